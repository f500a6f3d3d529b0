"""MC201-MC205: is compile driven by `model.compile.{enabled,backend,mode}`?"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

from model_compile.ledger.recipe import RecipeContext
from model_compile.parse.models import FieldFact, StageFacts
from model_compile.parse.python import literal_of
from model_compile.rules.base import Example, Rule, call_subject, compile_events, gate_state, step_ref
from model_compile.rules.finding import Finding
from model_compile.rules.placement import _GATED_KIT, _WITHOUT_COMPILE
from model_compile.rules.scaffold import CANONICAL_BODY, SCHEMA, STAGE, engine_text, mark, replace_once
from model_compile.vocabulary import BACKENDS, MODES

ALLOWED = {"backend": list(BACKENDS), "mode": list(MODES)}
NO_COMPILE_SCHEMA = replace_once(
    SCHEMA, "    compile: ExampleCompileConfig = Field(default_factory=ExampleCompileConfig)\n", ""
)


class SchemaLacksCompile(Rule):
    id = "MC201"
    severity = "error"
    title = "schema lacks model.compile"
    what = "Flags a recipe that compiles while its schema has no `model.compile` section with enabled/backend/mode."
    why = "Without the section, compile cannot be switched off per stage or overridden with `--config-override`."
    example = "class ModelConfig(BaseModel):\n    path: str  # no compile field"
    use_instead = "compile: CompileConfig = Field(default_factory=CompileConfig)  # enabled, backend, mode"
    fix = "add a compile section class (enabled, backend, mode) and `compile` field on the model config"
    VALID = [
        Example(),
        Example(
            schema=replace_once(
                replace_once(
                    replace_once(
                        SCHEMA, "class ExampleCompileConfig(BaseModel):", "class TorchCompileSection(BaseModel):"
                    ),
                    "compile: ExampleCompileConfig = Field(default_factory=ExampleCompileConfig)",
                    "compile: TorchCompileSection = TorchCompileSection()",
                ),
                '"max-autotune-no-cudagraphs"] = "default"',
                '"max-autotune-no-cudagraphs"] = Field(default="default")',
            ),
            note="other section name, plain default, mode through Field",
        ),
    ]
    INVALID = [
        # Without a `compile` field there is no better line than the file's first.
        Example(schema=mark(NO_COMPILE_SCHEMA, "from typing import Literal", "MC201"), note="no compile field"),
        Example(
            schema=mark(
                replace_once(
                    SCHEMA,
                    '    mode: Literal["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"] = "default"\n',
                    "",
                ),
                "compile: ExampleCompileConfig = Field",
                "MC201",
            ),
            note="section lacks mode",
        ),
    ]

    def check(self, ctx: RecipeContext) -> Iterable[Finding]:
        events = compile_events(ctx)
        if not events:
            return
        schema = ctx.config.schema_
        file = schema.file or ctx.loc.rel("configs/schema.py")
        if schema.compile_class is None:
            detail = (
                "; ".join(schema.problems)
                if schema.problems
                else f"{schema.model_class or 'the model config'} has no `compile` field"
            )
            yield self.finding(
                ctx,
                file,
                schema.compile_field_line or 1,
                f"recipe compiles but {detail}",
                subject="schema model.compile",
            )
            return
        missing = [
            n for n in ("enabled", "backend", "mode") if not schema.fields.get(n) or not schema.fields[n].present
        ]
        if missing:
            yield self.finding(
                ctx,
                file,
                schema.compile_field_line or 1,
                f"{schema.compile_class} lacks {', '.join(missing)}",
                subject="schema model.compile fields",
            )


class InvalidCompileValue(Rule):
    id = "MC202"
    severity = "error"
    title = "backend or mode outside the allowed sets"
    what = (
        "Flags backend/mode values (schema defaults, Literal choices, stage YAMLs) outside the allowed sets and non-bool "
        "`enabled`. A stage value OmegaConf resolves at run time (`${oc.env:NAME,inductor}`) is no literal: its "
        "default is checked when it has one, and one without (`${model.other}`) is shown as dynamic by `inspect`."
    )
    why = "An unknown backend or mode fails only at the first training step, on the accelerator, after the job queued."
    example = "compile:\n  enabled: yes-please\n  backend: inductr"
    use_instead = "backend: inductor | aot_eager | eager; mode: default | reduce-overhead | max-autotune | max-autotune-no-cudagraphs"
    fix = "use an allowed value"
    VALID = [
        Example(),
        Example(stages={"train": replace_once(STAGE, "backend: inductor", "backend: aot_eager")}),
        Example(
            stages={"train": replace_once(STAGE, "mode: default", "mode: max-autotune-no-cudagraphs")},
            note="longest allowed mode",
        ),
        Example(
            stages={"train": replace_once(STAGE, "backend: inductor", 'backend: "${oc.env:COMPILE_BACKEND,inductor}"')},
            note="OmegaConf interpolation with a valid default",
        ),
        Example(
            stages={"train": replace_once(STAGE, "backend: inductor", "backend: ${model.compile_backend}")},
            note="interpolation with no default: dynamic, not checked as a literal",
        ),
        Example(
            stages={"train": replace_once(STAGE, "enabled: false", 'enabled: "${oc.env:USE_COMPILE,false}"')},
            note="enabled from the environment, default false",
        ),
    ]
    INVALID = [
        Example(stages={"train": replace_once(STAGE, "backend: inductor", "backend: inductr  # <- MC202")}),
        Example(stages={"train": replace_once(STAGE, "enabled: false", "enabled: sometimes  # <- MC202")}),
        Example(
            stages={
                "train": replace_once(
                    STAGE, "backend: inductor", 'backend: "${oc.env:COMPILE_BACKEND,bogus}"  # <- MC202'
                )
            },
            note="interpolation whose default is invalid",
        ),
        Example(
            stages={
                "train": replace_once(
                    STAGE,
                    "mode: default",
                    "mode: ${oc.select:train.compile_mode,max-autotune-no-cudagraph}  # <- MC202",
                )
            },
            note="oc.select with a misspelled default",
        ),
        Example(
            schema=replace_once(
                SCHEMA,
                'mode: Literal["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"] = "default"',
                'mode: str = "fast"  # <- MC202',
            )
        ),
        Example(
            schema=replace_once(
                SCHEMA,
                'backend: Literal["inductor", "aot_eager", "eager"] = "inductor"',
                'backend: Literal["inductor", "tensorrt"] = "inductor"  # <- MC202',
            )
        ),
        Example(
            body=mark(
                replace_once(CANONICAL_BODY, "mode=self.config.model.compile.mode", 'mode="max-autotune-no-cudagraph"'),
                "apply_model_compile(",
                "MC202",
            ),
            note="a misspelled mode hard-coded in the compile call",
        ),
    ]

    def check(self, ctx: RecipeContext) -> Iterable[Finding]:
        schema = ctx.config.schema_
        if schema.file is None:  # no schema file: no fields either
            return
        for name in ("backend", "mode"):
            fact = schema.fields.get(name)
            if fact and fact.present:
                if fact.default is not None and fact.default not in ALLOWED[name]:
                    yield self.finding(
                        ctx,
                        schema.file,
                        fact.line or 1,
                        f"default {name} {fact.default!r} is not one of {ALLOWED[name]}",
                        _typed_hint(fact, name),
                        subject=f"schema default {name} | {fact.default!r}",
                    )
                bad = [v for v in fact.allowed or [] if v not in ALLOWED[name]]
                if bad:
                    yield self.finding(
                        ctx,
                        schema.file,
                        fact.line or 1,
                        f"{name} type admits {bad}, outside {ALLOWED[name]}",
                        subject=f"schema type {name}",
                    )
        enabled = schema.fields.get("enabled")
        if enabled and enabled.present:
            if (
                enabled.default_text is not None
                and enabled.default is not None
                and not isinstance(enabled.default, bool)
            ):
                yield self.finding(
                    ctx,
                    schema.file,
                    enabled.line or 1,
                    f"default enabled {enabled.default!r} is not a bool",
                    subject="schema default enabled",
                )
            if enabled.annotation and enabled.annotation.replace(" ", "") not in (
                "bool",
                "StrictBool",
                "pydantic.StrictBool",
            ):
                yield self.finding(
                    ctx,
                    schema.file,
                    enabled.line or 1,
                    f"enabled is typed `{enabled.annotation}`, not bool",
                    subject="schema type enabled",
                )
        for _, event, _events in compile_events(ctx):
            for name in ("backend", "mode"):
                value = _literal_string(event.arguments.get(name))
                if value is not None and value not in ALLOWED[name]:
                    yield self.finding(
                        ctx,
                        event.file,
                        event.line,
                        f"the compile call passes {name}={value!r}, which is not one of {ALLOWED[name]}: "
                        "torch.compile rejects it when compile is enabled",
                        f"pass {name}=self.config.model.compile.{name} and set an allowed value in the config",
                        subject=f"compile argument {name}",
                    )
        for stage in ctx.config.stages:
            # A value resolved at run time (an OmegaConf interpolation) is no literal: only its default,
            # when it has one, is checked; `${model.other}` is dynamic and nothing here can judge it.
            for name in ("backend", "mode"):
                known, value = stage.static_value(name)
                if known and value not in ALLOWED[name]:
                    yield self.finding(
                        ctx,
                        stage.file,
                        stage.lines.get(name, 1),
                        f"{stage.name}: {name} {_stage_value(stage, name, value)} is not one of {ALLOWED[name]}",
                        subject=f"stage {stage.name} {name} | {value!r}",
                    )
            known, value = stage.static_value("enabled")
            if known and not _bool_like(value, dynamic="enabled" in stage.dynamic):
                yield self.finding(
                    ctx,
                    stage.file,
                    stage.lines.get("enabled", 1),
                    f"{stage.name}: enabled {_stage_value(stage, 'enabled', value)} is not a bool",
                    subject=f"stage {stage.name} enabled",
                )


def _default_effect(ctx: RecipeContext) -> str:
    """MC203 on a schema default of True: which stages get compile from it today, and which would."""
    stages = ctx.config.stages
    inherit = [s.name for s in stages if "enabled" not in s.values]
    new_file = "any new stage file without a `compile:` block (or without `enabled` in it) would too"
    if inherit:
        verb = "sets" if len(inherit) == 1 else "set"
        return (
            f"schema default enables compile: {', '.join(inherit)} {verb} no `model.compile.enabled` and "
            f"{'gets' if len(inherit) == 1 else 'get'} compile from it today; {new_file}"
        )
    if stages:
        off = [s.name for s in stages if s.values.get("enabled") is False]
        which = (
            f"every stage sets false: {', '.join(off)}"
            if len(off) == len(stages)
            else "every stage sets `enabled` itself"
        )
        return (
            f"schema default enables compile: no stage gets it today ({which}), but any new stage file without a "
            "`compile:` block (or without `enabled` in it) would get compile"
        )
    return "schema default enables compile: there is no stage YAML yet, so every stage file without a `compile:` block would get compile"


_CONFIG_ROOT = re.compile(r"^(?:self\.)?(?:config|cfg|conf|args|hparams)\.(?P<field>[A-Za-z_][\w.]*)$")


def _argument_source(value: str) -> str:
    """Where a compile argument comes from, for MC204: a literal, another config field, or some expression."""
    try:
        literal = literal_of(value)
    except (ValueError, SyntaxError, RecursionError):
        literal = None
    else:
        return f"is hard-coded as {literal!r}"
    m = _CONFIG_ROOT.match(value.strip())
    if m:
        return f"is read from `{m.group('field')}`"
    return f"is passed as `{value}`"


def _stage_value(stage: StageFacts, name: str, value: object) -> str:
    """A stage value as the message names it: the literal, or a dynamic field's default."""
    if name in stage.dynamic:
        return f"{value!r} (the default of `{stage.dynamic[name]}`, resolved at run time)"
    return repr(value)


def _bool_like(value: object, dynamic: bool) -> bool:
    """A bool; for a run-time default also the strings pydantic reads as one (oc.env yields strings)."""
    if isinstance(value, bool):
        return True
    return dynamic and isinstance(value, str) and value.lower() in ("true", "false", "yes", "no", "on", "off", "1", "0")


@functools.lru_cache(maxsize=4096)
def _literal_string(source: str | None) -> str | None:
    """The value of a string literal argument (`"max-autotune"`), or None for anything else."""
    if not source:
        return None
    try:
        value = literal_of(source)
    except (ValueError, SyntaxError, RecursionError):
        return None
    return value if isinstance(value, str) else None


class EnabledWithoutIntent(Rule):
    id = "MC203"
    severity = "warning"
    title = "compile enabled without documented intent"
    what = "Flags `enabled` defaulting to True in the schema, or set true in a stage YAML, with no note saying it is intended."
    why = (
        "Compile changes first-step latency, memory and failure modes. A schema default of True that every "
        "stage overrides to false, or one stage quietly on, is exactly the question a reviewer must ask."
    )
    example = "class CompileConfig(BaseModel):\n    enabled: bool = True"
    use_instead = "enabled: true  # model-compile: enabled - try compile on the long-sequence stage; not measured yet"
    fix = "add `# model-compile: enabled - <reason>` on or above the line, or set it to false"
    VALID = [
        Example(),
        Example(
            stages={
                "train": replace_once(
                    STAGE, "enabled: false", "enabled: true  # model-compile: enabled - measured faster steps"
                )
            }
        ),
        Example(
            schema=replace_once(
                SCHEMA,
                "    enabled: bool = False\n    backend",
                "    enabled: bool = True  # model-compile: enabled - every stage of this recipe trains compiled\n    backend",
            ),
            note="documented schema default",
        ),
    ]
    INVALID = [
        Example(
            schema=replace_once(
                SCHEMA, "    enabled: bool = False\n    backend", "    enabled: bool = True  # <- MC203\n    backend"
            )
        ),
        Example(stages={"train": replace_once(STAGE, "enabled: false", "enabled: true  # <- MC203")}),
        Example(
            stages={
                "train": replace_once(STAGE, "enabled: false", 'enabled: "${oc.env:USE_COMPILE,true}"  # <- MC203')
            },
            note="enabled unless the environment says otherwise",
        ),
    ]

    def check(self, ctx: RecipeContext) -> Iterable[Finding]:
        if ctx.readme_documents("enabled"):
            return
        schema = ctx.config.schema_
        enabled = schema.fields.get("enabled")
        if (
            enabled
            and schema.file is not None  # always, when it has fields
            and enabled.default is True
            and not ctx.documented("enabled", schema.file, enabled.line or 0)
        ):
            yield self.finding(
                ctx,
                schema.file,
                enabled.line or 1,
                _default_effect(ctx) + "; is that intended?",
                # Scoped by the stages that get compile from the default: a change that adds one makes it new.
                subject="schema default enabled | "
                + (", ".join(s.name for s in ctx.config.stages if "enabled" not in s.values) or "no stage"),
            )
        for stage in ctx.config.stages:
            known, value = stage.static_value("enabled")
            if known and value is True:
                line = stage.lines.get("enabled", 1)
                if not ctx.documented("enabled", stage.file, line):
                    how = f" by default (`{stage.dynamic['enabled']}`)" if "enabled" in stage.dynamic else ""
                    yield self.finding(
                        ctx,
                        stage.file,
                        line,
                        f"stage {stage.name} enables compile{how} without a documented reason",
                        subject=f"stage {stage.name} enabled",
                    )


class ConfigNotWired(Rule):
    id = "MC204"
    severity = "error"
    title = "compile not wired to the config"
    what = (
        "Flags compile not gated by `model.compile.enabled` (or gated inverted), backend/mode hard-coded or "
        "not passed, and a compile config section that nothing reads."
    )
    why = "The config is the contract: `--config-override model.compile.enabled=true` must turn compile on, and stage YAMLs must choose backend and mode."
    example = 'model = self.model_kit.apply_model_compile(model, backend="inductor", mode="default")'
    use_instead = (
        "if self.config.model.compile.enabled:\n    model = self.model_kit.apply_model_compile(\n"
        "        model, backend=self.config.model.compile.backend, mode=self.config.model.compile.mode)"
    )
    fix = "gate with `if self.config.model.compile.enabled:` and pass backend/mode from self.config.model.compile"
    VALID = [
        Example(),
        Example(
            body=replace_once(
                CANONICAL_BODY,
                "if self.config.model.compile.enabled:\n"
                "    model = self.model_kit.apply_model_compile(\n"
                "        model,\n"
                "        backend=self.config.model.compile.backend,\n"
                "        mode=self.config.model.compile.mode,\n",
                "cfg = self.config.model.compile\n"
                "if cfg.enabled:\n"
                "    model = self.model_kit.apply_model_compile(\n"
                "        model,\n"
                "        backend=cfg.backend,\n"
                "        mode=cfg.mode,\n",
            ),
            note="local alias",
        ),
        Example(
            body=replace_once(
                CANONICAL_BODY,
                "if self.config.model.compile.enabled:\n",
                "if self.config.model.compile.enabled and not self.config.debug:\n",
            ),
            note="extra conjunct",
        ),
        Example(
            body=replace_once(
                CANONICAL_BODY,
                "if self.config.model.compile.enabled:",
                'if getattr(self.config.model.compile, "enabled", False):',
            ),
            note="getattr gate",
        ),
        Example(
            body=replace_once(
                CANONICAL_BODY,
                "if self.config.model.compile.enabled:",
                "use_compile = bool(self.config.model.compile.enabled)\nif use_compile:",
            ),
            note="a gate flag built through bool()",
        ),
        Example(
            body=replace_once(
                CANONICAL_BODY,
                "if self.config.model.compile.enabled:",
                'use_compile = bool(getattr(self.config.model.compile, "enabled", False))\n'
                "if self.config.model.gradient_checkpointing.enabled and not use_compile:\n"
                "    self.logger.info('eager run with checkpointing')\n"
                "if use_compile:",
            ),
            note="bool() of a getattr, read twice",
        ),
        Example(
            body=_WITHOUT_COMPILE + _GATED_KIT,
            note="compile after the return is MC405's one error, not also 'never compiles'",
        ),
    ]
    INVALID = [
        # Findings on a multi-line call land on its first line.
        Example(
            body=mark(
                replace_once(CANONICAL_BODY, "if self.config.model.compile.enabled:\n", "if True:\n"),
                "apply_model_compile(",
                "MC204",
            ),
            note="ungated",
        ),
        Example(
            body=mark(
                replace_once(
                    CANONICAL_BODY,
                    "if self.config.model.compile.enabled:\n",
                    "if not self.config.model.compile.enabled:\n",
                ),
                "apply_model_compile(",
                "MC204",
            ),
            note="inverted",
        ),
        Example(
            body=mark(
                replace_once(
                    CANONICAL_BODY,
                    "if self.config.model.compile.enabled:",
                    "use_compile = bool(self.config.model.gradient_checkpointing.enabled)\nif use_compile:",
                ),
                "apply_model_compile(",
                "MC204",
            ),
            note="a flag through bool() of another field (near miss)",
        ),
        Example(
            body=mark(
                replace_once(
                    CANONICAL_BODY,
                    "if self.config.model.compile.enabled:",
                    "use_compile = bool(self.config.model.compile.enabled)\nuse_compile = self.config.debug\nif use_compile:",
                ),
                "apply_model_compile(",
                "MC204",
            ),
            note="the flag rebound to another field before the gate",
        ),
        Example(
            body=mark(
                replace_once(
                    CANONICAL_BODY,
                    "if self.config.model.compile.enabled:",
                    "use_compile = not bool(self.config.model.compile.enabled)\nif use_compile:",
                ),
                "apply_model_compile(",
                "MC204",
            ),
            note="a flag through bool(), negated: inverted gate",
        ),
        Example(
            body=mark(
                replace_once(CANONICAL_BODY, "backend=self.config.model.compile.backend", 'backend="inductor"'),
                "apply_model_compile(",
                "MC204",
            ),
            note="hard-coded backend",
        ),
        Example(
            body=mark(
                replace_once(
                    CANONICAL_BODY,
                    "backend=self.config.model.compile.backend",
                    "backend=self.config.optim.compile_backend",
                ),
                "apply_model_compile(",
                "MC204",
            ),
            note="backend read from another config field",
        ),
        Example(
            engine=mark(
                engine_text(
                    "model = self.model_kit.build_model(self.config.model.path)\n"
                    "return parallelize_model(model, parallel_mesh=self.parallel_mesh)\n"
                ),
                "def prepare_model(self):",
                "MC204",
            ),
            note="config section exists, nothing compiles",
        ),
    ]

    def check(self, ctx: RecipeContext) -> Iterable[Finding]:
        events = compile_events(ctx)
        schema = ctx.config.schema_
        # A compile call that is never reached is MC405's one error, not also "never compiles" here.
        written = compile_events(ctx, reachable=False)
        if not written and ctx.ledgers and (schema.compile_class or any(s.has_compile for s in ctx.config.stages)):
            ledger = ctx.ledgers[0]
            yield self.finding(
                ctx,
                ledger.file,
                ledger.line,
                f"the config has model.compile but {ledger.engine_class}.prepare_model() never compiles",
                fix=f"add the kit call: model-compile generate {ctx.loc.display_path} --path kit",
                subject=f"{ledger.engine_class}.prepare_model",
            )
        for _, e, _ in events:
            state = gate_state(e)
            if state == "inverted":
                yield self.finding(
                    ctx,
                    e.file,
                    e.line,
                    f"compile {step_ref(e)} runs when model.compile.enabled is false (inverted gate)",
                    subject=f"{call_subject(e)} gate",
                )
            elif state == "ungated":
                yield self.finding(
                    ctx,
                    e.file,
                    e.line,
                    f"compile {step_ref(e)} is not gated by model.compile.enabled",
                    subject=f"{call_subject(e)} gate",
                )
            for name in ("backend", "mode"):
                value = e.arguments.get(name)
                if value is None:
                    yield self.finding(
                        ctx,
                        e.file,
                        e.line,
                        f"compile {step_ref(e)} does not pass {name} from model.compile.{name}",
                        subject=f"{call_subject(e)} {name}",
                    )
                elif f"compile.{name}" not in value:
                    yield self.finding(
                        ctx,
                        e.file,
                        e.line,
                        f"compile {step_ref(e)}: {name} {_argument_source(value)} instead of `model.compile.{name}`",
                        subject=f"{call_subject(e)} {name}",
                    )


class UntypedCompileChoice(Rule):
    id = "MC205"
    severity = "info"
    title = "backend or mode typed as a plain string (suggestion)"
    what = (
        "Suggests typing `backend: str` / `mode: str` with a Literal of the allowed values. A suggestion, not a "
        "warning: MC202 already checks the schema default and every stage YAML, so code whose configured values "
        "are all valid is correct as written."
    )
    why = (
        "With a Literal type, a typo in a `--config-override` (which no stage YAML shows) fails when the config "
        "loads instead of at the first step on the accelerator. Some repositories keep `str` on purpose."
    )
    example = 'backend: str = "inductor"'
    use_instead = 'backend: Literal["inductor", "aot_eager", "eager"] = "inductor"'
    fix = "optionally type it with Literal[...] of the allowed values (or silence MC205 in [tool.model-compile] ignore)"
    VALID = [
        Example(),
        Example(
            schema=replace_once(SCHEMA, "    mode: Literal", '    cache_dir: str = ""\n    mode: Literal'),
            note="other str field in the section",
        ),
    ]
    INVALID = [
        Example(
            schema=replace_once(
                SCHEMA,
                'backend: Literal["inductor", "aot_eager", "eager"] = "inductor"',
                'backend: str = "inductor"  # <- MC205',
            )
        )
    ]

    def check(self, ctx: RecipeContext) -> Iterable[Finding]:
        schema = ctx.config.schema_
        if schema.file is None:  # no schema file: no fields either
            return
        for name in ("backend", "mode"):
            fact = schema.fields.get(name)
            if fact and fact.present and _plain_str(fact):
                yield self.finding(
                    ctx,
                    schema.file,
                    fact.line or 1,
                    f"{schema.compile_class}.{name} is `{fact.annotation}`; its configured values are checked by MC202, "
                    f"a Literal type would also reject typos in overrides",
                    subject=f"schema type {name}",
                )


def _plain_str(fact: FieldFact) -> bool:
    return fact.allowed is None and (fact.annotation or "").replace(" ", "") in ("str", "str|None", "Optional[str]")


def _typed_hint(fact: FieldFact, name: str) -> str:
    """MC202's fix hint, with the Literal suggestion folded in when the field is a plain `str`."""
    allowed = ", ".join(ALLOWED[name])
    if _plain_str(fact):
        return f"use one of {allowed}; typing the field Literal[...] makes the config loader reject such typos"
    return f"use one of {allowed}"

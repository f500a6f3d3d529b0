"""MC201 and MC205: does the schema declare `model.compile` (enabled, backend, mode), and how are its choices typed?"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import yaml

from model_compile.ledger.models import Event
from model_compile.ledger.recipe import RecipeContext
from model_compile.parse.forwarding import model_config_forwards
from model_compile.parse.models import FLAT_FIELDS, SchemaFacts
from model_compile.parse.python import dotted
from model_compile.rules.base import Example, Rule, compile_events, gate_state, step_ref
from model_compile.rules.config_values import plain_str
from model_compile.rules.config_wiring import _CONFIG_ROOT
from model_compile.rules.finding import Finding
from model_compile.rules.scaffold import (
    CANONICAL_BODY,
    FLAT_BODY,
    FLAT_SCHEMA,
    FLAT_STAGE,
    SCHEMA,
    STAGE,
    engine_text,
    mark,
    replace_once,
)

NO_COMPILE_SCHEMA = replace_once(
    SCHEMA, "    compile: ExampleCompileConfig = Field(default_factory=ExampleCompileConfig)\n", ""
)


@dataclass
class DeadGate:
    """A compile gate reading a config key no stage YAML sets and the schema does not define."""

    event: Event
    key: str
    read: int  # stage YAMLs read
    instead: str  # ` (the stages set `optim.compile`)`, or ""


def dead_gates(ctx: RecipeContext) -> list[DeadGate]:
    """The compile gates whose key no config has (computed once per recipe: MC201 and MC210 both ask)."""
    if "dead_gates" in ctx.memo:
        return ctx.memo["dead_gates"]  # type: ignore[return-value]
    out: list[DeadGate] = []
    ctx.memo["dead_gates"] = out
    if ctx.config.schema_.form is not None:
        return out  # the schema defines model.compile: its default holds where a stage leaves it out
    stages = []
    for text in ctx.stage_texts.values():
        try:
            stages.append(yaml.safe_load(text))
        except yaml.YAMLError:
            return out  # a stage that does not load: MC202's to say, not a dead switch
    for _, e, _ in compile_events(ctx):
        for key in dict.fromkeys(k for cond in e.condition for k in _gate_keys(cond)):
            section = key.rsplit(".", 1)[0] if key.endswith(".enabled") else key
            if any(_sets(data, section) for data in stages):
                continue
            elsewhere = sorted({k for data in stages for k in _compile_keys(data)})
            instead = f" (the stages set {', '.join(f'`{k}`' for k in elsewhere[:3])})" if elsewhere else ""
            out.append(DeadGate(e, key, len(stages), instead))
    return out


def _gate_keys(condition: str) -> list[str]:
    """The config keys a gate reads as attribute chains (`self.config.model.compile` -> `model.compile`), the
    longest chain of each (its `.enabled` read counts as reading the section too)."""
    try:
        tree = ast.parse(condition, mode="eval")
    except SyntaxError:
        return []
    inner = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    keys = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and id(node) not in inner:
            m = _CONFIG_ROOT.match(dotted(node) or "")
            if m and "compile" in m.group("field").split("."):
                keys.append(m.group("field"))
    return keys


def _sets(data: Any, key: str) -> bool:
    for part in key.split("."):
        if not isinstance(data, dict) or part not in data:
            return False
        data = data[part]
    return True


def _compile_keys(data: Any, prefix: str = "") -> list[str]:
    """Every `...compile` key a stage YAML sets (where a recipe put its switch instead)."""
    out: list[str] = []
    if isinstance(data, dict):
        for k, v in data.items():
            path = f"{prefix}.{k}" if prefix else str(k)
            out += [path] if k == "compile" else []
            out += _compile_keys(v, path)
    return out


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
        Example(
            body=FLAT_BODY, schema=FLAT_SCHEMA, stages={"train": FLAT_STAGE}, note="the older flat form is MC206's"
        ),
    ]
    INVALID = [
        # Without a `compile` field there is no better line than the file's first.
        Example(schema=mark(NO_COMPILE_SCHEMA, "from typing import Literal", "MC201"), note="no compile field"),
        Example(
            schema=replace_once(
                SCHEMA,
                "    compile: ExampleCompileConfig = Field(default_factory=ExampleCompileConfig)\n",
                "    compile: dict = Field(default_factory=dict)  # <- MC201\n",
            ),
            note="`compile` typed as a dict: the message names the type (near miss of the flat bool, MC206)",
        ),
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
        if schema.form == "flat":
            return  # the older flat form is a schema with a compile switch: MC206 says what to migrate to
        if schema.compile_class is None:
            detail = (
                "; ".join(schema.problems)
                if schema.problems
                else f"{schema.model_class or 'the model config'} has no `compile` field"
            )
            gates = "; ".join(
                f"the gate of compile {step_ref(g.event)} reads `{g.key}`, which no stage YAML sets either{g.instead}"
                for g in dead_gates(ctx)
            )
            yield self.finding(
                ctx,
                file,
                schema.compile_field_line or 1,
                f"recipe compiles but {detail}"
                + (f"; {gates}: compile cannot be turned on from a stage" if gates else ""),
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
            if fact and fact.present and plain_str(fact):
                yield self.finding(
                    ctx,
                    schema.file,
                    fact.line or 1,
                    f"{_field_name(schema, name)} is `{fact.annotation}`; its configured values are checked by MC202, "
                    f"a Literal type would also reject typos in overrides",
                    subject=f"schema type {name}",
                )


class OlderFlatCompileConfig(Rule):
    id = "MC206"
    severity = "warning"
    title = "compile configured in the older flat form"
    what = (
        "Flags a recipe whose model config has `compile` as a bool, with `compile_backend` / `compile_mode` beside "
        "it (in the schema, else in its stage YAMLs): one finding for the recipe, at the schema's `compile` field "
        "(else the first stage that sets it), saying what prepare_model() gates compile with and what to migrate to. "
        "The review reads the flat fields as the stage's switch and choices (MC203, `inspect`, the stage table)."
    )
    why = (
        "The section `model.compile: {enabled, backend, mode}` holds the switch and its choices in one block: "
        "`--config-override model.compile.enabled=true`, the smoke commands' switch, does not apply to a bool "
        "`compile`, and each tool and test must special-case the recipe."
    )
    example = (
        "class ModelConfig(BaseModel):\n    compile: bool = True\n    compile_backend: str = 'inductor'\n"
        "    compile_mode: str = 'default'"
    )
    use_instead = "compile: CompileConfig = Field(default_factory=CompileConfig)  # enabled, backend, mode"
    fix = (
        "migrate to a compile section: a class with enabled, backend, mode as the model config's `compile`; in each "
        "stage YAML, `compile: true|false`, `compile_backend`, `compile_mode` become `compile: {enabled, backend, mode}`; "
        "prepare_model() reads self.config.model.compile.enabled / .backend / .mode"
    )
    VALID = [
        Example(),
        Example(
            schema=replace_once(
                SCHEMA,
                "    compile: ExampleCompileConfig = Field(default_factory=ExampleCompileConfig)\n",
                "    compile: ExampleCompileConfig = Field(default_factory=ExampleCompileConfig)\n"
                '    compile_cache_dir: str = ""\n',
            ),
            note="a section, with another compile_* field beside it",
        ),
    ]
    INVALID = [
        Example(
            body=FLAT_BODY,
            schema=mark(FLAT_SCHEMA, "compile: bool = False", "MC206"),
            stages={"train": FLAT_STAGE},
            note="flat schema and stages, prepare_model gated by model.compile",
        ),
        Example(
            body=FLAT_BODY,
            schema=NO_COMPILE_SCHEMA,
            stages={"stage1": STAGE, "stage2": mark(FLAT_STAGE, "compile: false", "MC206")},
            note="no compile field in the schema; a stage sets the flat switch",
        ),
    ]

    def check(self, ctx: RecipeContext) -> Iterable[Finding]:
        config = ctx.config
        if config.form != "flat":
            return
        schema = config.schema_
        gated = [e for _, e, _ in compile_events(ctx) if gate_state(e, "model.compile") == "gated"]
        gate = (
            f"; prepare_model() gates {step_ref(gated[0])} with it"
            + (f" (and {len(gated) - 1} more)" if gated[1:] else "")
            if gated
            else ""
        )
        if schema.form == "flat" and schema.file is not None:
            beside = [FLAT_FIELDS[n] for n in ("backend", "mode") if schema.fields[n].present]
            what = f"`{schema.model_class}.compile` is `{schema.compile_type}`" + (
                f" with {' and '.join(f'`{b}`' for b in beside)} beside it" if beside else ""
            )
            where, line = schema.file, schema.compile_field_line or 1
        else:
            stage = next(s for s in config.stages if s.form == "flat")
            what = f"stage {stage.name} sets {', '.join(f'`model.{FLAT_FIELDS[k]}`' for k in stage.values)}"
            where, line = stage.file, stage.lines.get("compile", 1)
        flat_stages = [s.name for s in config.stages if s.form == "flat"]
        stages = f"; stage YAMLs in this form: {', '.join(flat_stages)}" if flat_stages else ""
        yield self.finding(
            ctx,
            where,
            line,
            f"{what}: the older flat form of the compile config{gate}{stages}",
            subject="config form flat",
        )


def _field_name(schema: SchemaFacts, name: str) -> str:
    """`ExampleCompileConfig.backend`; in the older flat form `ExampleModelConfig.compile_backend`."""
    if schema.form == "flat":
        return f"{schema.model_class}.{FLAT_FIELDS[name]}"
    return f"{schema.compile_class}.{name}"


_BUILDER = """\
from dataclasses import dataclass


@dataclass
class TinyConfig:
    hidden: int = 8


def build_tiny(config):
    return TinyConfig(**config.model_dump())
"""
_BUILDER_BODY = replace_once(
    CANONICAL_BODY,
    "model = self.model_kit.build_model(self.config.model.path).to(self.device)\n",
    "model = build_tiny(self.config.model)\n",
)
_BUILDER_ENGINE = engine_text(_BUILDER_BODY).replace(
    "from ..model import patch_attention\n",
    "from ..model import patch_attention\nfrom ..model.builder import build_tiny\n",
)


class ModelConfigForwardedWhole(Rule):
    id = "MC209"
    severity = "error"
    title = "the whole model config, compile included, forwarded into a model's own config"
    what = (
        "Flags a constructor that receives every field of the recipe's model config (`Target(**config.model_dump())`, "
        "`**dict(config)`, `**config`, where `config` is `self.config.model` or what prepare_model() passes it as) "
        "while that config has a compile field and the constructor, a recipe class whose fields are known, has none."
    )
    why = (
        "A dataclass or a strict model config rejects the unknown `compile` keyword: the recipe stops building its "
        "model, with compile on and off alike, as soon as the compile section is added."
    )
    example = "TransformerConfig(**config.model_dump())  # config now has `compile`"
    use_instead = 'TransformerConfig(**config.model_dump(exclude={"compile"}))'
    fix = 'exclude the section: `config.model_dump(exclude={"compile"})` (model-compile generate writes this edit)'
    VALID = [
        Example(
            engine=_BUILDER_ENGINE,
            files={"model/builder.py": _BUILDER},
            schema=NO_COMPILE_SCHEMA,
            stages={"train": "engine: ExampleEngine\nmodel:\n  path: ./pretrained\n"},
            note="no compile field yet: nothing to leak",
        ),
        Example(
            engine=_BUILDER_ENGINE,
            files={"model/builder.py": _BUILDER.replace(".model_dump()", '.model_dump(exclude={"compile"})')},
            note="the compile section excluded",
        ),
        Example(
            engine=_BUILDER_ENGINE,
            files={
                "model/builder.py": _BUILDER.replace("hidden: int = 8", "hidden: int = 8\n    compile: object = None")
            },
            note="the model's own config takes a compile field",
        ),
    ]
    INVALID = [
        Example(
            engine=_BUILDER_ENGINE,
            files={
                "model/builder.py": _BUILDER.replace("**config.model_dump())", "**config.model_dump())  # <- MC209")
            },
            note="the builder prepare_model() calls with self.config.model dumps it whole",
        ),
        Example(
            engine=_BUILDER_ENGINE,
            files={
                "model/builder.py": _BUILDER.replace(
                    "**config.model_dump())", '**config.model_dump(exclude={"dropout"}))  # <- MC209'
                )
            },
            note="another field excluded, not compile (near miss)",
        ),
    ]

    def check(self, ctx: RecipeContext) -> Iterable[Finding]:
        if ctx.config.form is None:
            return  # no compile field to leak
        engines = [p for p in ctx.modules if p.startswith(ctx.loc.rel("engine/"))]
        for f in model_config_forwards(ctx.modules, engines):
            if f.excludes_compile or f.target_fields is None or "compile" in f.target_fields:
                continue
            field = "the compile section" if ctx.config.form == "section" else "`compile` and its flat choices"
            yield self.finding(
                ctx,
                f.file,
                f.line,
                f"`{f.call}` passes every field of the model config, {field} included, into {f.target}, whose fields "
                f"({', '.join(f.target_fields[:4])}{', ...' if len(f.target_fields) > 4 else ''}) have no `compile`: "
                "the model does not build, with compile on or off",
                subject=f"forward model config into {f.target}",
            )

"""MC203: is compile turned on (schema default or stage YAML) with a documented intent? MC210: can it be turned on
at all (does any config have the key its gate reads)?"""

from __future__ import annotations

from collections.abc import Iterable

from model_compile.ledger.recipe import RecipeContext
from model_compile.parse.models import config_key
from model_compile.rules.base import Example, Rule, call_subject, step_ref
from model_compile.rules.config_schema import NO_COMPILE_SCHEMA, dead_gates
from model_compile.rules.finding import Finding
from model_compile.rules.scaffold import (
    CANONICAL_BODY,
    FLAT_BODY,
    FLAT_SCHEMA,
    FLAT_STAGE,
    SCHEMA,
    STAGE,
    mark,
    replace_once,
)


def _default_effect(ctx: RecipeContext) -> str:
    """MC203 on a schema default of True: which stages get compile from it today, and which would."""
    stages = ctx.config.stages
    flat = ctx.config.form == "flat"
    key = config_key(ctx.config.form, "enabled")
    field = "compile" if flat else "enabled"
    block = "`compile:` line" if flat else "`compile:` block (or without `enabled` in it)"
    inherit = [s.name for s in stages if "enabled" not in s.values]
    new_file = f"any new stage file without a {block} would too"
    if inherit:
        verb = "sets" if len(inherit) == 1 else "set"
        return (
            f"schema default enables compile: {', '.join(inherit)} {verb} no `{key}` and "
            f"{'gets' if len(inherit) == 1 else 'get'} compile from it today; {new_file}"
        )
    if stages:
        off = [s.name for s in stages if s.values.get("enabled") is False]
        which = (
            f"every stage sets false: {', '.join(off)}"
            if len(off) == len(stages)
            else f"every stage sets `{field}` itself"
        )
        return (
            f"schema default enables compile: no stage gets compile from the default today ({which}), but any new stage file without a "
            f"{block} would get compile"
        )
    return f"schema default enables compile: there is no stage YAML yet, so every stage file without a {block} would get compile"


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
        Example(
            body=FLAT_BODY,
            schema=FLAT_SCHEMA,
            stages={
                "train": replace_once(
                    FLAT_STAGE, "compile: false", "compile: true  # model-compile: enabled - measured faster steps"
                )
            },
            note="the flat switch on, with its intent note",
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
            body=FLAT_BODY,
            schema=FLAT_SCHEMA,
            stages={"train": replace_once(FLAT_STAGE, "compile: false", "compile: true  # <- MC203")},
            note="the older flat switch `compile: true` in a stage",
        ),
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


_NO_MC201 = '[tool.model-compile]\nignore = ["MC201"]\n'


class DeadCompileSwitch(Rule):
    id = "MC210"
    severity = "warning"
    same_root = "MC201"  # a schema without the compile section: MC201 says it, naming the dead gate
    title = "the compile switch is a key no config has"
    what = (
        "Flags a compile call gated by a config key (an attribute chain through `compile`) that no stage YAML of "
        "the recipe sets and its schema does not define, naming the compile keys the stages do set."
    )
    why = (
        "Reading a missing key raises (OmegaConf: `Missing key`) or is never true: compile can never be turned on "
        "from a stage file or `--config-override`, and the run may fail before it trains."
    )
    example = "if self.config.model.compile:  # the stages set optim.compile; no schema"
    use_instead = "read the key the stages set, or add `model.compile` to the schema (model-compile generate writes it)"
    fix = "gate on the key the stage YAMLs set (or define it in the schema with its default)"
    VALID = [
        Example(),
        Example(
            schema=NO_COMPILE_SCHEMA,
            stages={"train": "engine: ExampleEngine\nmodel:\n  path: ./pretrained\n"},
            note="MC201 reports the schema without compile, naming this gate: one root, one finding",
        ),
        Example(body=FLAT_BODY, schema=FLAT_SCHEMA, stages={"train": FLAT_STAGE}, note="the older flat form"),
        Example(schema="", note="no schema, but every stage sets model.compile"),
        Example(
            schema="",
            stages={"train": STAGE, "debug": "engine: ExampleEngine\nmodel:\n  path: ./pretrained\n"},
            note="one stage sets it: reading it elsewhere is a stage's own gap, not a dead switch",
        ),
    ]
    # Where the schema lacks the compile section, MC201 reports that root and names the dead gate (one finding);
    # MC210 says it on its own where MC201 is not selected.
    INVALID = [
        Example(
            body=mark(FLAT_BODY, "apply_model_compile(", "MC210"),
            schema="",
            stages={"train": replace_once(FLAT_STAGE, "  compile: false\n", "") + "optim:\n  compile: false\n"},
            files={"/pyproject.toml": _NO_MC201},
            note="no schema; the stages put the switch under optim",
        ),
        Example(
            body=mark(CANONICAL_BODY, "apply_model_compile(", "MC210"),
            schema=NO_COMPILE_SCHEMA,
            stages={"train": "engine: ExampleEngine\nmodel:\n  path: ./pretrained\n"},
            files={"/pyproject.toml": _NO_MC201},
            note="a schema without compile and stages without it (near miss of the canonical recipe)",
        ),
    ]

    def check(self, ctx: RecipeContext) -> Iterable[Finding]:
        for gate in dead_gates(ctx):
            yield self.finding(
                ctx,
                gate.event.file,
                gate.event.line,
                f"compile {step_ref(gate.event)} is gated by `{gate.key}`, which no stage YAML of the recipe sets "
                f"({gate.read} read) and the schema does not define{gate.instead}: reading it raises or is never "
                "true, so compile cannot be turned on from a stage (unless a launcher's own default config "
                "supplies it)",
                subject=f"{call_subject(gate.event)} gate | {gate.key}",
            )

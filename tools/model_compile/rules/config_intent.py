"""MC203: is compile turned on (schema default or stage YAML) with a documented intent?"""

from __future__ import annotations

from collections.abc import Iterable

from model_compile.ledger.recipe import RecipeContext
from model_compile.parse.models import config_key
from model_compile.rules.base import Example, Rule
from model_compile.rules.finding import Finding
from model_compile.rules.scaffold import FLAT_BODY, FLAT_SCHEMA, FLAT_STAGE, SCHEMA, STAGE, replace_once


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

"""MC201 and MC205: does the schema declare `model.compile` (enabled, backend, mode), and how are its choices typed?"""

from __future__ import annotations

from collections.abc import Iterable

from model_compile.ledger.recipe import RecipeContext
from model_compile.rules.base import Example, Rule, compile_events
from model_compile.rules.config_values import plain_str
from model_compile.rules.finding import Finding
from model_compile.rules.scaffold import SCHEMA, mark, replace_once

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
                    f"{schema.compile_class}.{name} is `{fact.annotation}`; its configured values are checked by MC202, "
                    f"a Literal type would also reject typos in overrides",
                    subject=f"schema type {name}",
                )

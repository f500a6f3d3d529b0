"""MC000 (file does not parse), MC001 (ignore comment without a reason) and MC100 (recipe without compile)."""

from __future__ import annotations

import re
from collections.abc import Iterable

from model_compile.ledger.recipe import RecipeContext
from model_compile.rules.base import Example, Rule, compile_events, generate_hint
from model_compile.rules.finding import Finding
from model_compile.rules.scaffold import STAGE, engine_text, mark, replace_once


class FileDoesNotParse(Rule):
    id = "MC000"
    severity = "error"
    title = "recipe file does not parse"
    what = "Reports a recipe Python file, stage YAML or README that cannot be parsed or read as UTF-8 text."
    why = (
        "A file the tools cannot parse cannot be reviewed: compile wiring in it is invisible, and the "
        "recipe's own tests would fail on it too. Other recipes are still analysed."
    )
    example = "def prepare_model(self)\n    model = build()  # missing colon"
    use_instead = "Fix the syntax error (or re-save the file as UTF-8)."
    fix = "make the file parse; the other rules skip what they cannot read"
    VALID = [
        Example(),
        Example(files={"model/notes.py": "# café, naïve: non-ASCII UTF-8 text is fine\n"}, note="non-ASCII UTF-8"),
        Example(
            stages={"train": "model:\n  compile:\n    enabled: false\n    backend: inductor  # not inductor: eager\n"},
            note="colon in a YAML comment",
        ),
    ]
    INVALID = [
        Example(engine="class Broken(Engine:  # <- MC000\n    pass\n", note="Python syntax error"),
        Example(
            stages={"train": "model:\n  compile:\n    enabled: false\n    backend: inductor: eager  # <- MC000\n"},
            note="YAML syntax error",
        ),
        Example(files={"model/notes.py": b"# caf\xe9 \xff  # <- MC000\n"}, note="not UTF-8"),
    ]

    def check(self, ctx: RecipeContext) -> Iterable[Finding]:
        for failure in ctx.failures:
            yield self.finding(ctx, failure.path, failure.line, failure.message, subject="does not parse")
        for stage in ctx.config.stages:
            for problem in stage.problems:
                yield self.finding(
                    ctx, stage.file, _line_of(problem), f"{stage.file} {problem}", subject="does not parse"
                )
        for path, problem in ctx.unreadable:
            yield self.finding(ctx, path, 1, f"{path} cannot be read: {problem}", subject="unreadable")


def _line_of(problem: str) -> int:
    import re

    m = re.search(r"line (\d+)", problem)
    return int(m.group(1)) if m else 1


def _no_compile_example(readme: str | None = None, note: str = "") -> Example:
    """A recipe that builds and wraps its model with no compile anywhere (optionally with a README)."""
    return Example(
        engine=mark(
            engine_text(
                "model = build_example_model(self.config.model).to(self.device)\n"
                "return parallelize_model(model, parallel_mesh=self.parallel_mesh)\n"
            ),
            "def prepare_model(self):",
            "MC100",
        ),
        schema="from pydantic import BaseModel, Field\n\n\nclass M(BaseModel):\n    path: str = ''\n\n\n"
        "class ExampleConfig(BaseModel):\n    model: M = Field(default_factory=M)\n",
        stages={"train": "model:\n  path: x\n"},
        readme=readme,
        note=note,
    )


class NoCompileSupport(Rule):
    id = "MC100"
    severity = "info"
    title = "recipe has no compile support"
    what = "Notes a recipe whose prepare_model() never compiles and whose schema has no model.compile section."
    why = "Such recipes are the targets for adding compile support through the kit."
    example = "model = build_model(cfg)\nreturn parallelize_model(model, ...)"
    use_instead = "model-compile generate RECIPE --path kit (adds the kit call, config section and tests)"
    fix = "model-compile generate {recipe} --path kit"
    VALID = [
        Example(),
        Example(
            engine=engine_text(
                "model = build_example_model(self.config.model).to(self.device)\n"
                "model = self._compile(model)\n"
                "return parallelize_model(model, parallel_mesh=self.parallel_mesh)\n"
            )
            + "\n"
            "    def _compile(self, model):\n"
            "        if self.config.model.compile.enabled:\n"
            "            model = self.model_kit.apply_model_compile(\n"
            "                model, backend=self.config.model.compile.backend, mode=self.config.model.compile.mode\n"
            "            )\n"
            "        return model\n",
            note="compile in a helper prepare_model calls",
        ),
    ]
    INVALID = [
        _no_compile_example(),
        _no_compile_example(
            readme="# Example\n\nThis recipe intentionally does not use the kit layer.\n",
            note="README opts out of the kit: the hint asks and offers a recipe-local path",
        ),
    ]

    def check(self, ctx: RecipeContext) -> Iterable[Finding]:
        if not ctx.ledgers or compile_events(ctx, reachable=False):
            return
        if ctx.config.form is not None:
            return
        ledger = ctx.ledgers[0]
        path = ctx.loc.display_path
        fix = generate_hint(ctx)
        if ctx.readme and KIT_OPT_OUT.search(ctx.readme) and ctx.repo.kit:
            fix = (
                "its README says it does not use the kit: ask before adding it; a recipe-local compile is "
                f'`model-compile generate {path} --path submodule --target <module> --reason "..."` '
                f"(or the kit anyway: `{fix}`)"
            )
        yield self.finding(
            ctx,
            ledger.file,
            ledger.line,
            f"{ledger.engine_class}.prepare_model() does not compile and the schema has no model.compile section",
            fix=fix,
            subject=f"{ledger.engine_class}.prepare_model",
        )


# A README that says the recipe stays off the kit layer ("does not use the kit", "without the kit").
KIT_OPT_OUT = re.compile(
    r"\b(?:does not|doesn't|do not|never)\s+uses?\s+the\s+(?:model\s+)?kit|\bwithout\s+the\s+(?:model\s+)?kit\b", re.I
)


class SuppressionWithoutReason(Rule):
    id = "MC001"
    severity = "warning"
    title = "ignore comment without a reason"
    what = (
        "Reports a `# model-compile: ignore[MCxxx]` comment that gives no reason, names no rule, or names a rule "
        "that does not exist. Such a comment silences nothing."
    )
    why = (
        "A suppression is a review decision: the next reader needs to know why the rule does not apply here. "
        "A reasonless or misspelled suppression would otherwise hide findings without a trace."
    )
    example = 'backend: str = "inductor"  # model-compile: ignore[MC205]'
    use_instead = 'backend: str = "inductor"  # model-compile: ignore[MC205] - upstream keeps str; MC202 checks values'
    fix = "write `# model-compile: ignore[MCxxx] - <reason>` with known rule ids"
    VALID = [
        Example(),
        Example(
            stages={
                "train": replace_once(
                    STAGE, "backend: inductor", "backend: inductor  # model-compile: ignore[MC202] - vendor backend"
                )
            },
            note="ignore with a reason",
        ),
    ]
    INVALID = [
        Example(
            stages={
                "train": replace_once(
                    STAGE, "backend: inductor", "backend: inductor  # model-compile: ignore[MC202]  # <- MC001"
                )
            }
        ),
        Example(
            stages={
                "train": replace_once(
                    STAGE, "mode: default", "mode: default  # model-compile: ignore[MC999] - typo in the id  # <- MC001"
                )
            },
            note="unknown rule id",
        ),
    ]

    # every rule id of the catalogue: set by rules/__init__.py once ALL_RULES is built (no import back to it)
    known_ids: frozenset[str] = frozenset()

    def check(self, ctx: RecipeContext) -> Iterable[Finding]:
        for s in ctx.suppressions:
            unknown = [r for r in s.rules if r not in self.known_ids]
            if not s.rules:
                problem = "names no rule"
            elif unknown:
                problem = f"names unknown rule(s) {', '.join(unknown)}"
            elif not s.reason:
                problem = "gives no reason"
            else:
                continue
            yield self.finding(
                ctx,
                s.file,
                s.line,
                f"`# model-compile: ignore[{', '.join(s.rules)}]` {problem}: it silences nothing",
                subject=f"ignore {','.join(s.rules)}",
            )

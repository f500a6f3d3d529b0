"""MC211: a recipe test that overrides the compile config in a form the schema rejects cannot pass as configured.

The recipe's own tests build their config by merging overrides over a stage YAML (OmegaConf), then validate it
through the schema. An override written for the other form of the compile config (`model.compile: False` where
the schema made compile a section; `model.compile.enabled` where it is still the flat bool) replaces the node
wholesale, and the schema rejects the result: every run of that test fails config validation before it trains.
The overrides are read statically from the test files: nested dict literals (`{"model": {"compile": False}}`)
and OmegaConf dotlist strings (`"model.compile=false"`).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from model_compile.ledger.recipe import RecipeContext
from model_compile.parse.models import ConfigForm
from model_compile.rules.base import Example, Rule
from model_compile.rules.finding import Finding
from model_compile.rules.scaffold import FLAT_BODY, FLAT_SCHEMA, FLAT_STAGE

_FIELDS = ("enabled", "backend", "mode")


@dataclass(frozen=True)
class CompileOverride:
    """A compile override a recipe test applies: where, the key, the value as written, and the form it assumes."""

    file: str
    line: int
    key: str  # `model.compile` or `model.compile.enabled`
    value: str  # as written: `False`, `{'enabled': False}`, `true`
    form: ConfigForm  # flat: a scalar on `model.compile`; section: a mapping or a key under it
    function: str  # the test function (or module) it sits in

    @property
    def enables(self) -> bool | None:
        """Whether it turns compile on (True), off (False), or says nothing about it (None)."""
        text = self.value.strip().lower()
        if self.key.endswith(".enabled") or self.form == "flat":
            return True if text in ("true", "1") else False if text in ("false", "0", "none", "null") else None
        if "'enabled': true" in text or '"enabled": true' in text:
            return True
        return False if "'enabled': false" in text or '"enabled": false' in text else None


def _dict_overrides(node: ast.Dict, prefix: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], ast.expr]]:
    for key, value in zip(node.keys, node.values, strict=True):
        if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
            continue
        path = (*prefix, key.value)
        if path[-2:] == ("model", "compile") or (len(path) >= 3 and path[-3:-1] == ("model", "compile")):
            yield path, value
        if isinstance(value, ast.Dict):
            yield from _dict_overrides(value, path)


def compile_overrides(path: str, tree: ast.Module) -> list[CompileOverride]:
    """Every override of `model.compile` (or a field of it) a test module writes, outermost dicts only."""
    out: list[CompileOverride] = []
    inner: set[int] = set()
    functions = {
        id(n): f.name
        for f in ast.walk(tree)
        if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
        for n in ast.walk(f)
    }
    for node in ast.walk(tree):
        where = functions.get(id(node), "<module>")
        if isinstance(node, ast.Dict) and id(node) not in inner:
            inner.update(id(d) for d in ast.walk(node) if isinstance(d, ast.Dict) and d is not node)
            for keys, value in _dict_overrides(node, ()):
                key = ".".join(keys[keys.index("model") :]) if "model" in keys else ".".join(keys)
                if key == "model.compile":
                    form: ConfigForm = "section" if isinstance(value, ast.Dict) else "flat"
                elif key.rsplit(".", 1)[-1] in _FIELDS:
                    form = "section"
                else:
                    continue
                out.append(CompileOverride(path, value.lineno, key, ast.unparse(value), form, where))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("model.compile"):
            key, eq, written = node.value.partition("=")
            if not eq or key not in ("model.compile", *(f"model.compile.{f}" for f in _FIELDS)):
                continue
            form = "flat" if key == "model.compile" else "section"
            out.append(CompileOverride(path, node.lineno, key, written, form, where))
    return sorted(out, key=lambda o: (o.file, o.line))


def recipe_test_overrides(ctx: RecipeContext) -> list[CompileOverride]:
    """The compile overrides of the recipe's tests (files under its `tests/`), once per recipe."""
    if "test_overrides" not in ctx.memo:
        prefix = ctx.loc.rel("tests/")
        ctx.memo["test_overrides"] = [
            o
            for path, mod in ctx.modules.items()
            if path.startswith(prefix) and "compile" in mod.text
            for o in compile_overrides(path, mod.tree)
        ]
    return ctx.memo["test_overrides"]  # type: ignore[return-value]


def rejected(override: CompileOverride, schema_form: ConfigForm | None) -> bool:
    """The schema's form of the compile config rejects what the override writes there."""
    return schema_form is not None and override.form != schema_form


_SMOKE = '''"""Smoke test."""

from example_engine.testing import load_smoke_test_config


def test_smoke(config_name, config_overrides):
    config = load_smoke_test_config(
        config_name,
        config_overrides=config_overrides,
        extra_override={"data": {"num_workers": 0}, "model": {"compile": False}},
    )
    assert config is not None
'''


class TestOverrideRejected(Rule):
    id = "MC211"
    severity = "error"
    leads = True
    title = "a recipe test overrides compile in a form the schema rejects"
    what = (
        "Flags a recipe test (under `tests/`) that overrides the compile config in the other form than the schema "
        'declares: a scalar on `model.compile` (`{"model": {"compile": False}}`, `model.compile=false`) where '
        "the schema made compile a section, or a key under it where the schema still has the flat bool."
    )
    why = (
        "The override replaces the node wholesale (an OmegaConf merge puts a bool where a section was), and the "
        "schema rejects the result: every run of the test fails config validation before it trains, unless a "
        "command-line override rebuilds the node - and a rebuilt section holds only the keys given, so backend "
        "and mode fall back to the schema's defaults, not the stage's."
    )
    example = 'extra_override={"model": {"compile": False}}  # the schema has model.compile.{enabled,backend,mode}'
    use_instead = 'extra_override={"model": {"compile": {"enabled": False}}}'
    fix = "override `model.compile.enabled` (a key of the section), not `model.compile` itself"
    VALID = [
        Example(),
        Example(
            files={"tests/test_smoke.py": _SMOKE.replace('{"compile": False}', '{"compile": {"enabled": False}}')},
            note="the section's switch",
        ),
        Example(
            body=FLAT_BODY,
            schema=FLAT_SCHEMA,
            stages={"train": FLAT_STAGE},
            files={"tests/test_smoke.py": _SMOKE},
            note="the older flat form takes a bool there",
        ),
    ]
    INVALID = [
        Example(
            files={
                "tests/test_smoke.py": _SMOKE.replace(
                    '"model": {"compile": False}},', '"model": {"compile": False}},  # <- MC211'
                )
            },
            note="a bool where the schema made compile a section",
        ),
        Example(
            body=FLAT_BODY,
            schema=FLAT_SCHEMA,
            stages={"train": FLAT_STAGE},
            files={"tests/conftest.py": 'DEFAULT_OVERRIDES = ["model.compile.enabled=false"]  # <- MC211\n'},
            note="a key of a section where the schema still has the flat bool",
        ),
    ]

    def check(self, ctx: RecipeContext) -> Iterable[Finding]:
        schema = ctx.config.schema_
        for o in recipe_test_overrides(ctx):
            if not rejected(o, schema.form):
                continue
            declared = (
                f"a section ({schema.compile_class}: enabled, backend, mode)"
                if schema.form == "section"
                else ("the flat bool `compile` (with `compile_backend`, `compile_mode` beside it)")
            )
            then = (
                "; a command-line `model.compile.enabled=...` given after it rebuilds a section of that key alone: "
                "backend and mode then fall back to the schema's defaults, not the stage's"
                if schema.form == "section"
                else ""
            )
            yield self.finding(
                ctx,
                o.file,
                o.line,
                f"{o.function} overrides `{o.key}` with `{o.value}`, but the schema declares `model.compile` as "
                f"{declared}: every run of this test fails config validation as configured{then}",
                fix=self.fix
                if schema.form == "section"
                else "override `model.compile` (the flat bool), not a key under it",
                subject=f"test override {o.key} | {o.function}",
            )

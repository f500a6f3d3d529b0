"""The recipe's test conventions, read statically from its conftest.py files.

pytest refuses options nobody registered, and a recipe's smoke test is often
opt-in (`--run-smoke`) with a world size defaulting to a full node. So the
tool reads every `pytest_addoption` in the conftest.py files pytest would load
for the recipe's tests (the recipe's tests/ folder up to the repository root)
with `ast` - never importing them - and passes only registered options.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from model_compile.parse.python import literal_or, unparse

WORLD_SIZE = "--world-size"
CONFIG_NAME = "--config-name"
CONFIG_OVERRIDE = "--config-override"


@dataclass
class Option:
    """One registered command-line option."""

    names: list[str]
    action: str | None = None
    default: Any = None
    help: str = ""
    file: str = ""
    line: int = 0

    @property
    def is_flag(self) -> bool:
        """A switch that takes no value."""
        return self.action in ("store_true", "store_false", "count")

    @property
    def opt_in(self) -> bool:
        """A `--run-xxx` switch that is off unless given (the recipe's way of gating a heavy test)."""
        name = self.names[0].lstrip("-").replace("_", "-")
        return self.action == "store_true" and not self.default and (name.startswith("run") or "smoke" in name)


@dataclass
class Conventions:
    """What the conftest.py files register, and what could not be read."""

    options: dict[str, Option] = field(default_factory=dict)  # every alias -> its Option
    files: list[str] = field(default_factory=list)
    dynamic: list[str] = field(default_factory=list)  # addoption calls whose name is not a literal
    smoke_config_name: str | None = None  # CONFIG_NAME = "train" in tests/test_smoke.py

    @property
    def known(self) -> bool:
        """True when every option registration was read (no computed names)."""
        return not self.dynamic

    def registers(self, name: str) -> bool:
        """Whether pytest will accept `name` (unknown registrations count as yes)."""
        return name in self.options or not self.known

    def opt_in_flags(self, layer: str) -> list[str]:
        """The opt-in switches a layer needs: smoke flags for the smoke, the rest for impact tests too."""
        seen: list[str] = []
        for option in self.options.values():
            flag = option.names[0]
            if not option.opt_in or flag in seen:
                continue
            is_smoke = "smoke" in flag
            if (layer == "smoke" and not _is_impact_flag(flag)) or (layer.startswith("impact") and not is_smoke):
                seen.append(flag)
        return seen

    def default_of(self, name: str) -> Any:
        """The registered default of `name`, or None."""
        option = self.options.get(name)
        return option.default if option else None


def _is_impact_flag(flag: str) -> bool:
    return any(word in flag for word in ("impact", "perf", "slow", "benchmark"))


_NOT_LITERAL = object()


def _literal(node: ast.AST | None) -> Any:
    if node is None:
        return None
    value = literal_or(node, _NOT_LITERAL)
    return unparse(node) if value is _NOT_LITERAL else value


def _read_conftest(path: Path, out: Conventions, root: Path) -> None:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, ValueError):
        out.dynamic.append(f"{path}: does not parse")
        return
    _read_source(text, str(path.relative_to(root)) if path.is_relative_to(root) else str(path), out)


def read_text(text: str, rel: str) -> Conventions:
    """The options one conftest.py source registers (a planned file that is not on disk yet)."""
    out = Conventions()
    _read_source(text, rel, out)
    return out


def _read_source(text: str, rel: str, out: Conventions) -> None:
    try:
        tree = ast.parse(text, filename=rel)
    except (SyntaxError, ValueError):
        out.dynamic.append(f"{rel}: does not parse")
        return
    for func in ast.walk(tree):
        if not (isinstance(func, ast.FunctionDef) and func.name == "pytest_addoption"):
            continue
        out.files.append(rel)
        for call in ast.walk(func):
            if not (
                isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "addoption"
            ):
                continue
            names = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            if len(names) != len(call.args) or not names:
                out.dynamic.append(f"{rel}:{call.lineno}: {ast.unparse(call)[:120]}")
                continue
            kw = {k.arg: k.value for k in call.keywords if k.arg}
            option = Option(
                names=names,
                action=_literal(kw.get("action")) if kw.get("action") is not None else None,
                default=_literal(kw.get("default")),
                help=str(_literal(kw.get("help")) or ""),
                file=rel,
                line=call.lineno,
            )
            for name in names:
                out.options.setdefault(name, option)


def _config_name_constant(test_file: Path) -> str | None:
    """`CONFIG_NAME = "train"` at the top of a smoke test, if it has one."""
    try:
        tree = ast.parse(test_file.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return None
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            if any(isinstance(t, ast.Name) and t.id in ("CONFIG_NAME", "DEFAULT_CONFIG_NAME") for t in node.targets):
                return node.value.value
    return None


def read(recipe_root: Path, repo_root: Path) -> Conventions:
    """Options registered by the conftest.py files pytest loads for `recipe_root`/tests (nearest first)."""
    out = Conventions()
    start = recipe_root / "tests"
    folders = [start, *start.parents]
    for folder in folders:
        conftest = folder / "conftest.py"
        if conftest.is_file():
            _read_conftest(conftest, out, repo_root)
        if folder == repo_root or folder == folder.parent:
            break
    out.smoke_config_name = _config_name_constant(recipe_root / "tests" / "test_smoke.py")
    return out

"""Refuse, before anything is planned, input the editors cannot handle cleanly.

`generate` edits with LibCST, whose parser and visitors recurse once per
nesting level (its native parser can even crash the interpreter). Every file
the edit depends on is therefore read boundedly (`read_regular`: regular
files inside the repository, at most `max-file-bytes`), parsed with the
stdlib first (`ast`, which reports a syntax error as MC000 does), and
measured: nesting deeper than `MAX_DEPTH` is refused with one line. A recipe
whose engine folder, schema or stage YAMLs do not parse is refused too: the
plan would otherwise be written and only then reported as MC000.
"""

from __future__ import annotations

import ast
import os
import warnings
from dataclasses import dataclass
from pathlib import Path

import yaml

from model_compile.discover.tree import read_regular
from model_compile.errors import InputError
from model_compile.generate.planning.locate import repo_root
from model_compile.settings import load_settings

# Deepest AST nesting an edit accepts. LibCST parses, annotates and reprints a
# 100-deep nested list with Python's default recursion limit and fails at 150;
# real engine code stays far below (a deep `prepare_model` is ~15 levels).
MAX_DEPTH = 100
NOTHING_WRITTEN = "nothing was written"


@dataclass(frozen=True)
class Depth:
    """The deepest node of a module: its nesting level and line."""

    level: int
    line: int


def max_depth(tree: ast.AST) -> Depth:
    """Deepest nesting of `tree`, measured without recursion."""
    best = Depth(0, 1)
    stack: list[tuple[ast.AST, int, int]] = [(tree, 0, 1)]
    while stack:
        node, level, line = stack.pop()
        line = getattr(node, "lineno", line)
        if level > best.level:
            best = Depth(level, line)
        stack.extend((child, level + 1, line) for child in ast.iter_child_nodes(node))
    return best


def decode(data: bytes, rel: str) -> str:
    """UTF-8 text with universal newlines and no BOM; InputError otherwise.

    The write puts back the file's CRLF line endings and BOM (`transaction`).
    """
    if b"\0" in data[:8192]:
        raise InputError(f"{rel}: binary file, not source; {NOTHING_WRITTEN}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{rel}: not UTF-8 text (byte {exc.start}); {NOTHING_WRITTEN}") from None
    return text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")


def read_source(path: Path, rel: str, boundary: Path | None, max_bytes: int | None) -> str:
    """The text of a file the edit reads, or one-line refusal naming it."""
    data, problem = read_regular(path, boundary, max_bytes)
    if data is None:
        raise InputError(f"{rel}: cannot be read: {problem}; {NOTHING_WRITTEN}")
    return decode(data, rel)


def check_python(text: str, rel: str) -> None:
    """Refuse Python that does not parse (MC000) or is nested too deeply for the editor."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(text, filename=rel)
    except SyntaxError as exc:
        raise InputError(
            f"{rel}: cannot parse ({exc.msg} at line {exc.lineno}; MC000): fix it first, {NOTHING_WRITTEN}"
        ) from None
    except RecursionError:
        raise InputError(
            f"{rel}: nested too deeply for Python's own parser (RecursionError); refusing the edit, {NOTHING_WRITTEN}"
        ) from None
    except (ValueError, MemoryError) as exc:
        raise InputError(
            f"{rel}: cannot parse ({type(exc).__name__}; MC000): fix it first, {NOTHING_WRITTEN}"
        ) from None
    depth = max_depth(tree)
    if depth.level > MAX_DEPTH:
        raise InputError(
            f"{rel}:{depth.line}: code nested {depth.level} levels deep (the editor handles {MAX_DEPTH}); "
            f"refusing the edit, {NOTHING_WRITTEN}"
        )


def check_yaml(text: str, rel: str) -> None:
    """Refuse a stage YAML that does not parse (MC000)."""
    try:
        for _ in yaml.compose_all(text, Loader=yaml.SafeLoader):
            pass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise InputError(f"{rel}: cannot parse YAML{where} (MC000): fix it first, {NOTHING_WRITTEN}") from None
    except (RecursionError, MemoryError) as exc:
        raise InputError(
            f"{rel}: cannot parse ({type(exc).__name__}; MC000): fix it first, {NOTHING_WRITTEN}"
        ) from None


def dependencies(recipe: Path) -> tuple[list[Path], list[Path]]:
    """(files the edit parses, files it only reads) of a recipe folder.

    Parsed: every engine-folder module (siblings too: the ledger resolves
    helpers across them), configs/schema.py and the stage YAMLs. Read: the
    README and the recipe's existing model-compile tests (both rewritten).
    """
    engine_dir = recipe / "engine"
    engines = sorted(engine_dir.glob("*.py")) if engine_dir.is_dir() else sorted(recipe.glob("*engine*.py"))
    configs = recipe / "configs"
    stages = sorted(p for p in configs.glob("*.y*ml") if p.suffix in (".yaml", ".yml")) if configs.is_dir() else []
    schema = configs / "schema.py"
    parsed = [*engines, *([schema] if os.path.lexists(schema) else []), *stages]
    skill_tests = recipe / "tests" / "skills" / "model-compile"
    read = sorted(p for p in skill_tests.glob("*.py")) if skill_tests.is_dir() else []
    readme = recipe / "README.md"
    return parsed, ([readme] if os.path.lexists(readme) else []) + read


def check_recipe(recipe: Path) -> None:
    """Refuse the edit unless every file it depends on reads and parses within the limits."""
    recipe = Path(recipe).resolve()
    if not recipe.is_dir():
        return  # Options.check() / locate report a missing recipe folder
    root = repo_root(recipe)
    max_bytes = load_settings(root).max_file_bytes

    def rel(path: Path) -> str:
        try:
            return path.relative_to(root).as_posix()
        except ValueError:
            return path.as_posix()

    parsed, read = dependencies(recipe)
    for path in parsed:
        text = read_source(path, rel(path), root, max_bytes)
        if path.suffix == ".py":
            check_python(text, rel(path))
        else:
            check_yaml(text, rel(path))
    for path in read:
        read_source(path, rel(path), root, max_bytes)

"""The recipe's test files in a generate plan: never replace what the recipe wrote itself.

- A skill file we rendered earlier (it carries `recipe_tests.MARKER`) is ours:
  kept as it is when it was rendered for the same compile path (its TARGET
  text does not churn), re-rendered when the path changes.
- The recipe's own `asserts.py` gets our hook functions merged in with LibCST:
  every existing function stays; a function name it already defines is skipped
  and reported; merged code sits below a `MERGE_MARKER` comment so a later run
  can update it. Its own parity test is left alone. `--force` overwrites.
- Missing `tests/test_structure.py` / `tests/test_smoke.py` are reported and,
  when the repository ships `tests/templates/<name>.template`, created from it.
"""

from __future__ import annotations

import ast
import builtins
import re
import symtable
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import libcst as cst

from model_compile.errors import InputError
from model_compile.generate.edits import base_tests
from model_compile.generate.edits.cst_util import assigned_name
from model_compile.generate.edits.import_order import insert_import
from model_compile.parse.python import source_lines
from model_compile.recipe_tests import MARKER

RelOf = Callable[[Path], str]  # a path as the output shows it (relative to the repository)
MERGE_MARKER = "# --- model-compile hooks (merged by `model-compile generate`; updated on rerun) ---"
RECIPE_TESTS = ("test_structure.py", "test_smoke.py")


@dataclass
class TestFiles:
    """Files to write ({path: (old text or None, new text)}) and what to tell the user."""

    files: dict[Path, tuple[str | None, str]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    conftest: str | None = None  # the tests/conftest.py this plan creates, if it creates one


def ours(text: str) -> bool:
    """Was this file rendered by model-compile (from templates/recipe_tests)?"""
    return MARKER in text


def needs_tool(text: str) -> bool:
    """Did an earlier version render this file to need model-compile or its helper at run time (now
    self-contained, in one file)?"""
    return (
        "compile_checks.py" in text
        or "model_compile.api" in text
        or ("model_compile.runtime" in text and "except ImportError" not in text)
    )


def _constant(text: str, name: str) -> str | None:
    m = re.search(rf"^{name}\s*=\s*[\"']([^\"']*)[\"']", text, re.M)
    return m.group(1) if m else None


def _defined(stmt: cst.CSTNode) -> str | None:
    if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
        return stmt.name.value
    return assigned_name(stmt)


def _has_marker(stmt: cst.CSTNode) -> bool:
    lines = getattr(stmt, "leading_lines", ())
    return any(line.comment is not None and line.comment.value == MERGE_MARKER for line in lines)


class _Names(cst.CSTVisitor):
    def __init__(self) -> None:
        self.names: set[str] = set()

    def visit_Name(self, node: cst.Name) -> None:
        self.names.add(node.value)


def _imports_of(module: cst.Module) -> list[tuple[str, str | None, str]]:
    """(module, name or None, bound name) of our top-level imports (no __future__)."""
    out: list[tuple[str, str | None, str]] = []
    for stmt in module.body:
        if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
            continue
        imp = stmt.body[0]
        if isinstance(imp, cst.ImportFrom) and imp.module is not None and not isinstance(imp.names, cst.ImportStar):
            mod = module.code_for_node(imp.module)
            if mod != "__future__":
                out += [(mod, a.name.value, a.name.value) for a in imp.names if isinstance(a.name, cst.Name)]
        elif isinstance(imp, cst.Import):
            out += [(module.code_for_node(a.name), None, module.code_for_node(a.name)) for a in imp.names]
    return out


def merge_asserts(existing: str, generated: str, rel: str, root: Path) -> tuple[str, list[str], list[str]]:
    """(merged text, functions added, functions kept as the recipe wrote them).

    Raises InputError when a constant or helper we need exists with other content.
    """
    try:
        old, new = cst.parse_module(existing), cst.parse_module(generated)
    except cst.ParserSyntaxError as exc:
        raise InputError(f"{rel}: cannot parse ({exc.message} at line {exc.raw_line}); nothing merged") from exc
    body = list(old.body)
    region = next((i for i, s in enumerate(body) if _has_marker(s)), len(body))
    theirs = {n: s for s in body[:region] if (n := _defined(s))}
    previous = {n: i for i, s in enumerate(body) if i >= region and (n := _defined(s))}
    added, kept, merged = [], [], []
    for stmt in new.body:
        name = _defined(stmt)
        if name is None:
            continue  # docstring, imports
        if name in theirs:
            same = old.code_for_node(theirs[name]).strip() == new.code_for_node(stmt).strip()
            if isinstance(stmt, cst.FunctionDef) and name.startswith(("test_", "assert_")):
                kept.append(name)
                continue
            if not same:
                raise InputError(
                    f"{rel}: the recipe's own file defines {name} differently from the model-compile hooks "
                    "that need it; rename it, or pass --force to replace the file"
                )
            continue
        merged.append(stmt)
        if isinstance(stmt, cst.FunctionDef):
            added.append(name)
    keep = [s for i, s in enumerate(body) if i < region] + [
        s for i, s in enumerate(body) if i >= region and _defined(s) not in previous
    ]
    blank = cst.EmptyLine(indent=False)
    if merged:
        first = merged[0]
        merged[0] = first.with_changes(
            leading_lines=[blank, blank, cst.EmptyLine(indent=False, comment=cst.Comment(MERGE_MARKER))]
        )
        for i in range(1, len(merged)):
            if isinstance(merged[i], (cst.FunctionDef, cst.ClassDef)) and len(merged[i].leading_lines) < 2:
                merged[i] = merged[i].with_changes(leading_lines=[blank, blank])
    code = old.with_changes(body=keep + merged).code
    visitor = _Names()
    for stmt in merged:
        stmt.visit(visitor)
    for mod, name, bound in _imports_of(new):
        if bound.split(".")[0] in visitor.names:  # `import importlib.util` binds `importlib`
            code = insert_import(code, mod, name, root=root)
    missing = undefined_globals(code, rel)
    if missing:  # a merge that would only fail when the smoke runs: refuse it now
        raise InputError(
            f"{rel}: merging the hooks would leave {', '.join(missing)} undefined there; nothing written "
            "(--force replaces the file with model-compile's own)"
        )
    return code, added, kept


def undefined_globals(code: str, rel: str) -> list[str]:
    """Global names the module's functions read that nothing at its top level binds (nor the builtins).

    Unknown (empty) when the module has a star import or does not compile.
    """
    try:
        table = symtable.symtable(code, rel, "exec")
    except (SyntaxError, ValueError):
        return []
    if "*" in code and any(
        isinstance(n, ast.ImportFrom) and any(a.name == "*" for a in n.names) for n in ast.parse(code).body
    ):
        return []
    bound = {s.get_name() for s in table.get_symbols() if s.is_assigned() or s.is_imported()}
    known = bound | set(dir(builtins)) | {"__file__", "__name__", "__doc__", "__spec__", "__builtins__"}
    scopes, todo = [], list(table.get_children())
    while todo:
        child = todo.pop()
        todo.extend(child.get_children())
        scopes.append(child)
    # `global X` then `X = ...` in a function binds X at the top level too
    known |= {s.get_name() for c in scopes for s in c.get_symbols() if s.is_declared_global() and s.is_assigned()}
    missing = {
        s.get_name()
        for c in scopes
        for s in c.get_symbols()
        if s.is_referenced() and s.is_global() and s.get_name() not in known
    }
    return sorted(missing)


def plan_skill_tests(
    recipe: Path, rendered: dict[str, str], *, compile_path: str, force: bool, root: Path, rel_of: RelOf
) -> TestFiles:
    """What to write for each rendered skill test ({recipe-relative path: text})."""
    out = TestFiles()
    for rel, text in rendered.items():
        dest = recipe / rel
        shown = rel_of(dest)
        old = dest.read_text(encoding="utf-8") if dest.is_file() else None
        if old is None or force:
            out.files[dest] = (old, text)
            if old is not None and not ours(old):
                out.notes.append(f"{shown}: the recipe's own file replaced (--force)")
            continue
        if ours(old):
            before = _constant(old, "COMPILE_PATH")
            if before == compile_path and not needs_tool(old):
                out.notes.append(f"{shown}: kept (generated earlier for compile path {compile_path})")
                continue
            out.files[dest] = (old, text)
            continue
        if not rel.endswith("asserts.py"):
            out.notes.append(
                f"{shown}: the recipe's own file, kept; model-compile's version not written (--force replaces it)"
            )
            continue
        merged, added, kept = merge_asserts(old, text, shown, root)
        out.files[dest] = (old, merged)
        what = f"merged {', '.join(added)} into it" if added else "nothing to merge"
        keep = f"; kept its own {', '.join(kept)} (model-compile's versions not added)" if kept else ""
        out.notes.append(f"{shown}: the recipe's own file (not generated by model-compile): {what}{keep}")
        if compile_path != "kit" and "apply_model_compile" in old:
            out.notes.append(_kit_checks_note(old, shown, compile_path))
    return out


def _names_kit_call(test: ast.expr) -> bool:
    return any(
        isinstance(n, ast.Constant) and isinstance(n.value, str) and "apply_model_compile" in n.value
        for n in ast.walk(test)
    )


def _kit_checks_note(old: str, shown: str, compile_path: str) -> str:
    """What the recipe's own asserts that expect the kit call mean once the kit call is gone (never edited)."""
    try:
        module = ast.parse(old)
    except SyntaxError:
        module = None
    lines = source_lines(old)
    found = [
        f"`{' '.join(lines[node.lineno - 1].split())}`"  # no line number: merging and formatting move it
        for node in (ast.walk(module) if module is not None else ())
        if isinstance(node, ast.Assert) and _names_kit_call(node.test)  # the test, not the message
    ]
    if not found:  # e.g. only a message or a check of the kit's own source names it
        return f"{shown}: its own checks mention the kit's apply_model_compile, which {compile_path} removes"
    return (
        f"{shown}: its own asserts expect the kit's apply_model_compile, which {compile_path} removes, so the "
        f"structure test fails on them until they are updated (model-compile leaves a check a person wrote as it "
        f"is): {'; '.join(found[:3])}" + (f" (+{len(found) - 3} more)" if len(found) > 3 else "")
    )


def missing_recipe_tests(recipe: Path, root: Path, rel_of: RelOf) -> list[str]:
    """One note per missing tests/test_structure.py / test_smoke.py (nothing created)."""
    templates = root / "tests" / "templates"
    return [
        f"{rel_of(recipe / 'tests' / name)} missing"
        + (
            f" (the repository's {rel_of(templates / (name + '.template'))} is a start)"
            if (templates / f"{name}.template").is_file()
            else ""
        )
        for name in RECIPE_TESTS
        if not (recipe / "tests" / name).is_file()
    ]


def recipe_test_files(
    recipe: Path,
    root: Path,
    config_class: str | None,
    rel_of: RelOf,
    *,
    stage: Path | None = None,
    override: Path | None = None,
) -> TestFiles:
    """Missing tests/test_structure.py / test_smoke.py, created from the repo's own templates when it has them,
    and the tests/conftest.py whose options the created smoke test takes (generate/edits/base_tests.py)."""
    out = TestFiles()
    missing = [name for name in RECIPE_TESTS if not (recipe / "tests" / name).is_file()]
    if not missing:
        return out
    templates = root / "tests" / "templates"
    conftest = recipe / "tests" / "conftest.py"
    config_name = stage.stem if stage is not None else "train"
    world = (
        base_tests.mesh_world_size(stage, rel_of(stage))
        if stage is not None
        else base_tests.WorldSize(1, "no stage config")
    )
    smoke_template = templates / "test_smoke.py.template"
    create_conftest = "test_smoke.py" in missing and smoke_template.is_file() and not conftest.is_file()
    flag = base_tests.sibling_options(recipe, root).gate(world.size) if create_conftest else None
    refuses = (
        base_tests.helper_refuses_cpu(smoke_template.read_text(encoding="utf-8"), root)
        if smoke_template.is_file() and flag is None
        else None
    )
    if create_conftest:
        out.files[conftest] = (None, base_tests.render_conftest(recipe.name, world, config_name, flag, override))
        out.conftest = out.files[conftest][1]
        what = f"--world-size (default {world.size}: {world.why}), --config-name (default {config_name}), --config-override"
        out.notes.append(
            f"{rel_of(conftest)} was missing: created with the sibling recipes' options: {what}"
            + (f", {flag} (the smoke test is opt-in)" if flag else "")
        )
    for name in missing:
        template = templates / f"{name}.template"
        dest = recipe / "tests" / name
        if not template.is_file():
            out.notes.append(
                f"{rel_of(dest)} missing (the repository has no tests/templates/{name}.template to start from)"
            )
            continue
        filled = base_tests.fill_template(
            template.read_text(encoding="utf-8"),
            recipe.name,
            config_class=config_class,
            config_name=config_name,
            world_size=world.size,
            wire=create_conftest,
            smoke_flag=flag,
            root=root,
            accelerator=refuses is not None,
        )
        out.files[dest] = (None, filled.text)
        extra = f"; fill in {', '.join(filled.left)}" if filled.left else ""
        wired = (
            "; test_smoke takes the conftest's --world-size, --config-name, --config-override" if filled.wired else ""
        )
        gate = (
            f"; it skips without a GPU or an NPU ({refuses} refuses a CPU-only machine), so a plain pytest stays green"
            if name == "test_smoke.py" and refuses is not None
            else f"; it runs only with {flag}, as its siblings'"
            if name == "test_smoke.py" and flag
            else ""
        )
        out.notes.append(f"{rel_of(dest)} was missing: created from {rel_of(template)}{wired}{gate}{extra}")
    return out

"""The third-party modules a recipe's run imports, read statically: from the recipe's engine, schema and tests,
following every import that resolves to a repository file (bounded). Imports at module level are needed when the
engine imports; imports inside functions, and the repository's vendored model code (remote code loaded with
`trust_remote_code`), when the run reaches them. Nothing is imported here.
"""

from __future__ import annotations

import ast
from pathlib import Path

TEST_FILES = ("conftest.py", "test_structure.py", "test_smoke.py")
MAX_SCANNED = 400  # repository modules read while following imports


def import_name(path: Path) -> tuple[str, Path]:
    """(dotted module name, sys.path entry) for a file, as pytest's default `prepend` import mode finds them."""
    parts = [path.stem] if path.name != "__init__.py" else []
    folder = path.parent
    while (folder / "__init__.py").is_file() and folder.parent != folder:
        parts.insert(0, folder.name)
        folder = folder.parent
    return ".".join(parts), folder


def _imports_of(tree: ast.Module) -> list[tuple[int, str]]:
    """(level, module) of every import that runs at import time: module level, in top-level `if`/`try`
    blocks, but not under `if TYPE_CHECKING:` nor in a `try` that handles ImportError (optional imports)."""
    out: list[tuple[int, str]] = []

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.Import):
                out.extend((0, a.name) for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module != "__future__":
                base = node.module or ""
                out.append((node.level, base))
                if node.level and not base:  # `from . import x`: x may be a module
                    out.extend((node.level, a.name) for a in node.names)
            elif isinstance(node, ast.If) and "TYPE_CHECKING" not in ast.unparse(node.test):
                visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                handled = " ".join(ast.unparse(h.type) for h in node.handlers if h.type is not None)
                if "ImportError" not in handled and "ModuleNotFoundError" not in handled and "Exception" not in handled:
                    visit(node.body)

    visit(tree.body)
    return out


def _lazy_imports_of(tree: ast.Module) -> list[tuple[int, str]]:
    """(level, module) of the imports inside functions (they run when the function does), optional ones (in a
    `try` that handles ImportError) left out."""
    out: list[tuple[int, str]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        if isinstance(node, ast.Try):
            handled = " ".join(ast.unparse(h.type) for h in node.handlers if h.type is not None)
            if "ImportError" in handled or "ModuleNotFoundError" in handled or "Exception" in handled:
                return
        if in_function and isinstance(node, ast.Import):
            out.extend((0, a.name) for a in node.names)
        elif in_function and isinstance(node, ast.ImportFrom) and node.module != "__future__":
            out.append((node.level, node.module or ""))
        inside = in_function or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        for child in ast.iter_child_nodes(node):
            visit(child, inside)

    visit(tree, False)
    return out


def _repo_file(module: str, paths: list[str]) -> Path | None:
    rel = Path(*module.split("."))
    for p in paths:
        for candidate in (Path(p) / rel.with_suffix(".py"), Path(p) / rel / "__init__.py"):
            if candidate.is_file():
                return candidate
    return None


def modules_to_check(recipe_root: Path, repo_root: Path) -> tuple[dict[str, str], list[str]]:
    """({third-party top-level module: repository file that imports it}, sys.path entries).

    Starts from the recipe's engine and schema modules and what its tests import, and follows the
    imports that resolve to repository files (statically, bounded); every other top-level name is one
    the interpreter must have."""
    modules, _, paths = walk(recipe_root, repo_root)
    return modules, paths


def walk(
    recipe_root: Path, repo_root: Path, vendored: list[Path] | None = None
) -> tuple[dict[str, str], dict[str, str], list[str]]:
    """(modules imported when the engine imports, modules imported later: inside functions, by repository files
    only such imports reach, or by the repository's vendored model code (`vendored`), sys.path entries)."""
    modules: dict[str, str] = {}
    later: dict[str, str] = {}
    paths: list[str] = [str(repo_root)]
    files = [recipe_root / "configs" / "schema.py", *sorted((recipe_root / "engine").glob("*_engine.py"))]
    if len(files) == 1:
        files += [p for p in sorted((recipe_root / "engine").glob("*.py")) if p.name != "__init__.py"]
    files = [f for f in files if f.is_file()]
    for file in files:
        _, base = import_name(file)
        if str(base) not in paths:
            paths.append(str(base))
    files += [recipe_root / "tests" / t for t in TEST_FILES if (recipe_root / "tests" / t).is_file()]
    seen: set[Path] = set()
    queue: list[tuple[Path, bool]] = [(f, False) for f in files] + [(f, True) for f in vendored or []]
    while queue and len(seen) < MAX_SCANNED:
        path, lazy_file = queue.pop(0)
        path = path.resolve()
        if path in seen:
            continue
        seen.add(path)
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (OSError, SyntaxError, ValueError, RecursionError):
            continue
        package = import_name(path)[0].split(".")
        if path.name != "__init__.py":
            package = package[:-1]
        found = [(level, name, lazy_file) for level, name in _imports_of(tree)]
        found += [(level, name, True) for level, name in _lazy_imports_of(tree)]
        for level, name, lazy in found:
            if level:
                anchor = package[: len(package) - (level - 1)] if level > 1 else package
                name = ".".join([*anchor, name] if name else anchor)
            if not name:
                continue
            target = _repo_file(name, paths)
            if target is not None:
                queue.append((target, lazy))
                parent = _repo_file(name.rsplit(".", 1)[0], paths) if "." in name else None
                if parent is not None:
                    queue.append((parent, lazy))
                continue
            top = name.split(".")[0]
            if level == 0 and not _is_repo_module(top, repo_root, paths):
                rel = path.relative_to(repo_root.resolve()) if path.is_relative_to(repo_root.resolve()) else path
                (later if lazy else modules).setdefault(top, str(rel))
    return modules, {k: v for k, v in later.items() if k not in modules}, paths


def _is_repo_module(name: str | None, repo_root: Path, paths: list[str]) -> bool:
    if not name:
        return False
    top = name.split(".")[0]
    return any((Path(p) / top).is_dir() or (Path(p) / f"{top}.py").is_file() for p in [str(repo_root), *paths])

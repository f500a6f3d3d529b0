"""What Python files import, read statically, and the import closure of a set of files over a SourceTree.

Nothing is imported: each file is parsed with `ast` (once per content, across trees). Only modules of the
tree are followed (a name that is no file of the tree - the standard library, site-packages - ends the walk).
What counts, as Python would run it:

- `import a.b.c` runs `a/__init__.py`, `a/b/__init__.py` and `a/b/c.py` (the package files that exist:
  folders without one are namespace packages); `from a.b import x` runs `a/b` and, when `x` is a submodule,
  `a/b/x.py`; relative imports are resolved from the importing file's folder;
- imports anywhere in a file, inside functions too (a lazy import runs when the function does), and literal
  `importlib.import_module("m")` / `import_module(".m", __name__)` / `__import__("m")` calls;
- imports under `if TYPE_CHECKING:` never run; in a module with a module-level `__getattr__` (PEP 562 lazy
  exports) they say where each exported name comes from, and so do the module's `{"Name": ".module"}` maps
  when its `__getattr__` calls `import_module`: `from pkg import Name` then follows Name to its module;
- the folders that are roots of imports: the tree's root, and `src/` when the tree has one.
"""

from __future__ import annotations

import ast
import hashlib
import posixpath
import re
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from model_compile.discover.tree import SourceTree

_MODULE_STRING = re.compile(r"^\.*([A-Za-z_]\w*(\.[A-Za-z_]\w*)*)?$")
_CACHE_LIMIT = 20000
_MAX_LAZY_DEPTH = 16


@dataclass(frozen=True)
class ImportSpec:
    """One import: `module` (dotted, '' for `from . import x`), `level` (0: absolute), `names` (from-import
    names; None for `import module`), `alias` (`import module as alias`)."""

    module: str
    level: int = 0
    names: tuple[str, ...] | None = None
    alias: str | None = None
    condition: str | None = None  # `if <test>` (line N) the import sits under, when it runs only then


@dataclass(frozen=True)
class ModuleFacts:
    imports: tuple[ImportSpec, ...] = ()
    lazy: dict[str, ImportSpec] = field(default_factory=dict)  # exported name -> where it comes from
    problem: str | None = None  # the file does not parse: its imports are unknown


_FACTS: dict[bytes, ModuleFacts] = {}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _dotted(node: ast.expr) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _literal_import(call: ast.Call, is_package: bool, stem: str) -> ImportSpec | None:
    """`import_module("a.b")`, `import_module(".b", __name__ | __package__ | "pkg")`, `__import__("a")`."""
    func = call.func
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
    if name not in ("import_module", "__import__") or not call.args:
        return None
    first = call.args[0]
    if not (isinstance(first, ast.Constant) and isinstance(first.value, str)) or not _MODULE_STRING.match(first.value):
        return None
    text = first.value
    level = len(text) - len(text.lstrip("."))
    module = text[level:]
    if level and name == "import_module":
        anchor = (
            call.args[1] if len(call.args) > 1 else next((k.value for k in call.keywords if k.arg == "package"), None)
        )
        if isinstance(anchor, ast.Name) and anchor.id == "__name__" and not is_package:
            module = f"{stem}.{module}" if module else stem  # relative to this module, taken as a package
        elif not (isinstance(anchor, ast.Name) and anchor.id in ("__name__", "__package__")):
            return None  # another anchor: not known statically
    elif level:
        return None
    return ImportSpec(module, level)


_BODIES = ("body", "orelse", "finalbody")


class _Collector:
    """The import statements of a module, found by walking statement bodies only (expressions are skipped)."""

    def __init__(self) -> None:
        self.runtime: list[ImportSpec] = []
        self.type_only: list[ast.Import | ast.ImportFrom] = []

    def visit(
        self, body: list[ast.stmt], quiet: bool = False, condition: str | None = None, lazy: bool = False
    ) -> None:
        """`condition`: the `if` the statements sit under; `lazy`: inside a module's `__getattr__` (PEP 562), whose
        tests pick the name asked for (an import of that name runs it), so they are no condition of the import."""
        for n in body:
            if isinstance(n, ast.Import | ast.ImportFrom):
                if quiet:
                    self.type_only.append(n)
                elif isinstance(n, ast.Import):
                    self.runtime.extend(ImportSpec(a.name, 0, None, a.asname, condition) for a in n.names)
                else:
                    names = tuple(a.name for a in n.names)
                    self.runtime.append(ImportSpec(n.module or "", n.level, names, None, condition))
                continue
            if isinstance(n, ast.If) and _is_type_checking(n.test):
                self.visit(n.body, True)
                self.visit(n.orelse, quiet, condition)
                continue
            if isinstance(n, ast.If) and not lazy:  # the import runs only when the test holds (else: fails)
                test = " ".join(ast.unparse(n.test).split())[:120]
                outer = f", inside {condition}"[:200] if condition else ""  # the innermost test first
                self.visit(n.body, quiet, f"if {test} (line {n.lineno}){outer}")
                self.visit(n.orelse, quiet, f"if not ({test}) (line {n.lineno}){outer}")
                continue
            inner = lazy or (isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == "__getattr__")
            for attr in _BODIES:
                sub = getattr(n, attr, None)
                if isinstance(sub, list):
                    self.visit(sub, quiet, condition, inner)
            for handler in getattr(n, "handlers", ()) or ():
                self.visit(handler.body, quiet, condition, inner)
            for case in getattr(n, "cases", ()) or ():
                self.visit(case.body, quiet, condition, inner)


def attribute_usage(data: bytes, bound: str, dotted: str) -> frozenset[str] | None:
    """The attributes a module reads on `dotted` (bound to the name `bound`); None when `bound` is used otherwise
    too (passed around, `getattr(...)`): then anything it exports may be read."""
    try:
        tree = ast.parse(data)
    except (SyntaxError, ValueError, RecursionError):
        return None
    values: set[int] = set()
    used: set[str] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Attribute):
            values.add(id(n.value))
            if _dotted(n.value) == dotted:
                used.add(n.attr)
        elif isinstance(n, ast.Name) and n.id == bound and isinstance(n.ctx, ast.Load) and id(n) not in values:
            return None
    return frozenset(used)


def _calls(tree: ast.Module, is_package: bool, stem: str) -> list[ImportSpec]:
    return [
        spec
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and (spec := _literal_import(n, is_package, stem)) is not None
    ]


def _lazy_table(tree: ast.Module, type_only: list[ast.Import | ast.ImportFrom]) -> dict[str, ImportSpec]:
    getattr_fn = next(
        (n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == "__getattr__"),
        None,
    )
    if getattr_fn is None:
        return {}
    table: dict[str, ImportSpec] = {}
    for node in type_only:
        if isinstance(node, ast.ImportFrom):
            for a in node.names:
                table[a.asname or a.name] = ImportSpec(node.module or "", node.level, (a.name,))
        else:
            for a in node.names:
                if a.asname:
                    table[a.asname] = ImportSpec(a.name)
    calls_import = any(
        isinstance(c, ast.Call) and (_dotted(c.func) or "").rsplit(".", 1)[-1] in ("import_module", "__import__")
        for c in ast.walk(getattr_fn)
    )
    if calls_import:
        for stmt in tree.body:
            value = stmt.value if isinstance(stmt, ast.Assign | ast.AnnAssign) else None
            if not isinstance(value, ast.Dict):
                continue
            for k, v in zip(value.keys, value.values, strict=False):
                if (
                    isinstance(k, ast.Constant)
                    and isinstance(k.value, str)
                    and k.value.isidentifier()
                    and isinstance(v, ast.Constant)
                    and isinstance(v.value, str)
                    and _MODULE_STRING.match(v.value)
                ):
                    level = len(v.value) - len(v.value.lstrip("."))
                    table.setdefault(k.value, ImportSpec(v.value[level:], level, (k.value,)))
    return table


def clear_cache() -> None:
    """Forget every parsed file (a benchmark's cold start)."""
    _FACTS.clear()


def module_facts(path: str, data: bytes) -> ModuleFacts:
    """The imports of one file's content (cached by content and by whether it is a package's `__init__`)."""
    base = posixpath.basename(path)
    is_package = base == "__init__.py"
    stem = base[:-3] if base.endswith(".py") else base
    key = hashlib.sha1(data + (b"\0pkg" if is_package else b"\0" + stem.encode())).digest()
    cached = _FACTS.get(key)
    if cached is not None:
        return cached
    try:
        tree = ast.parse(data, filename=path)
    except (SyntaxError, ValueError, RecursionError) as exc:
        facts = ModuleFacts(problem=f"does not parse ({type(exc).__name__}: {getattr(exc, 'msg', exc)})")
    else:
        collector = _Collector()
        collector.visit(tree.body)
        found = collector.runtime
        if b"import_module" in data or b"__import__" in data:
            found += _calls(tree, is_package, stem)
        facts = ModuleFacts(tuple(dict.fromkeys(found)), _lazy_table(tree, collector.type_only))
    if len(_FACTS) >= _CACHE_LIMIT:
        _FACTS.clear()
    _FACTS[key] = facts
    return facts


Edge = tuple[str, tuple[str, ...]]  # (file imported, the files between the importer and it: lazy exports)


class ImportGraph:
    """The import edges of a tree's Python files, read as asked."""

    def __init__(self, tree: SourceTree):
        self.tree = tree
        self.py = {f for f in tree.files() if f.endswith(".py")}
        self.dirs: set[str] = set()
        for f in self.py:
            d = posixpath.dirname(f)
            while d and d not in self.dirs:
                self.dirs.add(d)
                d = posixpath.dirname(d)
        self.roots = [""] + (["src"] if "src" in self.dirs else [])
        self._edges: dict[str, list[Edge]] = {}
        # (importer, imported) -> the `if` the import sits under, where it runs only then
        self.conditions: dict[tuple[str, str], str] = {}
        self._facts: dict[str, ModuleFacts] = {}
        self.problems: dict[str, str] = {}

    def facts(self, path: str) -> ModuleFacts:
        facts = self._facts.get(path)
        if facts is None:
            data = self.tree.read_bytes(path)
            facts = ModuleFacts() if data is None else module_facts(path, data)
            if facts.problem:
                self.problems[path] = facts.problem
            self._facts[path] = facts
        return facts

    def _root_of(self, path: str) -> str:
        return next((r for r in reversed(self.roots) if r and path.startswith(r + "/")), "")

    def ancestors(self, path: str) -> list[str]:
        """The package `__init__.py` files importing `path` runs first (outermost first)."""
        root = self._root_of(path)
        rel = path[len(root) + 1 :] if root else path
        out, cur = [], root
        for part in rel.split("/")[:-1]:
            cur = f"{cur}/{part}" if cur else part
            init = f"{cur}/__init__.py"
            if init in self.py and init != path:
                out.append(init)
        return out

    def _walk(self, start: str, parts: list[str]) -> tuple[list[str], str | None, bool]:
        """(files run, the module's file or package folder, whether every part resolved) from folder `start`."""
        ran: list[str] = []
        where: str | None = None
        cur = start
        for i, part in enumerate(parts):
            cand = f"{cur}/{part}" if cur else part
            init = f"{cand}/__init__.py"
            if init in self.py:
                ran.append(init)
                where, cur = cand, cand
            elif cand + ".py" in self.py:
                ran.append(cand + ".py")
                return ran, cand + ".py", i == len(parts) - 1
            elif cand in self.dirs:
                where, cur = cand, cand  # a namespace package
            else:
                return ran, where, False
        return ran, where, True

    def _locate(self, importer: str, module: str, level: int) -> tuple[list[str], str | None, bool]:
        parts = [p for p in module.split(".") if p]
        if level:
            start = posixpath.dirname(importer)
            for _ in range(level - 1):
                if not start:
                    return [], None, False
                start = posixpath.dirname(start)
            if not parts:
                return [], start, True
            return self._walk(start, parts)
        for root in self.roots:
            first = f"{root}/{parts[0]}" if root else parts[0]
            if first in self.dirs or first + ".py" in self.py:
                return self._walk(root, parts)
        return [], None, False  # not a module of this tree

    def _names(self, where: str, names: Iterable[str], via: tuple[str, ...], depth: int) -> list[Edge]:
        """Edges for `from <where> import names`: submodules, and lazy exports followed to their module."""
        out: list[Edge] = []
        module_file = where if where.endswith(".py") else f"{where}/__init__.py"
        lazy = self.facts(module_file).lazy if module_file in self.py else {}
        for name in names:
            if not where.endswith(".py") and name != "*":
                ran, _, whole = self._walk(where, [name])
                if whole and ran:
                    out.extend((f, via) for f in ran)
                    continue
            wanted = lazy.values() if name == "*" else [lazy[name]] if name in lazy else []
            for spec in wanted:
                out.extend(self._follow(module_file, spec, (*via, module_file), depth + 1))
        return out

    def _follow(self, importer: str, spec: ImportSpec, via: tuple[str, ...], depth: int = 0) -> list[Edge]:
        if depth > _MAX_LAZY_DEPTH:
            return []
        ran, where, whole = self._locate(importer, spec.module, spec.level)
        out: list[Edge] = [(f, via) for f in ran]
        if where is None or not whole:
            return out
        if spec.names is not None:
            out.extend(self._names(where, spec.names, via, depth))
            return out
        module_file = where if where.endswith(".py") else f"{where}/__init__.py"
        if depth == 0 and module_file in self.py and self.facts(module_file).lazy:
            # `import pkg` in the code (not a lazy table's own entry): the lazy exports the importer reads on it
            data = self.tree.read_bytes(importer) or b""
            bound = spec.alias or spec.module.split(".")[0]
            used = attribute_usage(data, bound, spec.alias or spec.module)
            out.extend(self._names(where, ["*"] if used is None else sorted(used), via, depth))
        return out

    def edges(self, path: str) -> list[Edge]:
        """What importing `path` imports: its package `__init__` files and its own imports."""
        cached = self._edges.get(path)
        if cached is None:
            cached = [(a, ()) for a in self.ancestors(path)]
            unconditional: set[str] = set()
            for spec in self.facts(path).imports:
                found = self._follow(path, spec, ())
                cached.extend(found)
                for target, _via in found:
                    if spec.condition is None:
                        unconditional.add(target)
                    else:
                        self.conditions.setdefault((path, target), spec.condition)
            for target in unconditional:  # imported unconditionally somewhere in the file: no condition
                self.conditions.pop((path, target), None)
            first: dict[str, Edge] = {}
            for edge in cached:
                if edge[0] != path:
                    first.setdefault(edge[0], edge)
            cached = list(first.values())
            self._edges[path] = cached
        return cached

    def closure(self, roots: Iterable[str]) -> dict[str, str | None]:
        """Every file importing `roots` runs: {file: the file that imports it first (None for a root)}."""
        parent: dict[str, str | None] = {}
        queue: deque[str] = deque()
        for r in roots:
            if r in self.py and r not in parent:
                parent[r] = None
                queue.append(r)
        while queue:
            cur = queue.popleft()
            for target, via in self.edges(cur):
                prev = cur
                for f in (*via, target):
                    if f not in parent:
                        parent[f] = prev
                        queue.append(f)
                    prev = f
        return parent


def conditions(graph: ImportGraph, via: list[str]) -> list[str]:
    """The `if`s along an import path (`chain`): `importer: if <test> (line N)` for each conditional step."""
    return [
        f"{a}: {graph.conditions[(a, b)]}" for a, b in zip(via, via[1:], strict=False) if (a, b) in graph.conditions
    ]


def chain(parent: dict[str, str | None], path: str) -> list[str]:
    """The import path from a root to `path` (root first)."""
    out = [path]
    seen = {path}
    while (prev := parent.get(out[-1])) is not None and prev not in seen:
        out.append(prev)
        seen.add(prev)
    return out[::-1]

"""What code a compiled module runs, read statically: a bounded walk of the functions its `forward` calls.

From each start (a class's `forward`), every function the body names is followed where the name resolves through
the file's own definitions and imports (the repository's code and the transformers of its environment, read as
text; nothing is imported): `f(...)`, `module.f(...)`, `self.method(...)`, a function passed by name, and a
registry the body looks up (`ALL_ATTENTION_FUNCTIONS[...]`: a module-level instance of a class whose body maps
strings to functions; the entry for the stage's `attn_implementation` when it is known, else every entry).

A patch that replaces a module's attribute (`transformers.modeling_flash_attention_utils._get_unpad_data = f`)
is honoured: where the walk resolves that attribute of that module, it follows the replacement instead, and
records the patch as running inside the start it was reached from.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass, field
from pathlib import Path

from model_compile.parse.model_source import Resolver, parse_file
from model_compile.parse.model_source import _index as import_index

MAX_FUNCTIONS = 800


@dataclass(frozen=True)
class Fn:
    """A function found in a file: its node, and the class it is a method of (None: module level)."""

    file: Path
    node: ast.FunctionDef | ast.AsyncFunctionDef
    owner: str | None = None
    parent: ast.FunctionDef | ast.AsyncFunctionDef | None = None  # the function it is defined in (its closure)

    @property
    def name(self) -> str:
        return f"{self.owner}.{self.node.name}" if self.owner else self.node.name


@dataclass
class Walk:
    """The functions reached from the starts: each with the function that reached it (None: a start), and the
    patches followed on the way (replacement -> the module attribute it replaces)."""

    reached: dict[Fn, Fn | None] = field(default_factory=dict)
    patches: dict[Fn, str] = field(default_factory=dict)

    def chain(self, fn: Fn) -> list[Fn]:
        """`fn` and its callers up to the start it was reached from, outermost first."""
        out = [fn]
        while (caller := self.reached.get(out[-1])) is not None and caller not in out:
            out.append(caller)
        return out[::-1]


@functools.lru_cache(maxsize=1024)
def _defs(file: Path) -> tuple[dict[str, ast.FunctionDef | ast.AsyncFunctionDef], dict[str, ast.ClassDef]]:
    tree = parse_file(file)
    functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
    classes: dict[str, ast.ClassDef] = {}
    for node in tree.body if tree is not None else []:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            functions[node.name] = node
        elif isinstance(node, ast.ClassDef):
            classes[node.name] = node
    return functions, classes


def _imports(file: Path) -> tuple[dict[str, tuple[int, str, str]], dict[str, str]]:
    """`from ... import` names (level, module, name), and module aliases (`import a.b as c`), anywhere in the file
    (the class resolver's index: one reading of both)."""
    index = import_index(file)
    return (index[1], index[2]) if index is not None else ({}, {})


class Finder:
    """Resolve names used in a file to the functions, modules and registries they denote."""

    def __init__(self, resolver: Resolver):
        self.resolver = resolver

    def module_file(self, file: Path, level: int, module: str) -> Path | None:
        if level:
            return self.resolver._relative(file, level, module or None)
        return self.resolver._module_file(module) if module else None

    def module_of(self, file: Path, name: str) -> Path | None:
        """The file of the module `name` stands for in `file` (`import x.y as name`, `from x import name`)."""
        froms, modules = _imports(file)
        if name in modules:
            return self.resolver._module_file(modules[name])
        if name in froms:
            level, module, real = froms[name]
            return self.module_file(file, level, f"{module}.{real}" if module else real)
        return None

    def function(self, file: Path, name: str, depth: int = 0) -> tuple[Path, str] | None:
        """(the file that defines it, its name there) for a function `name` names in `file`; follows re-exports."""
        functions, _ = _defs(file)
        if name in functions:
            return file, name
        origin = self._reexported(file, name, depth)
        return self.function(*origin, depth + 1) if origin is not None else None

    def _reexported(self, file: Path, name: str, depth: int) -> tuple[Path, str] | None:
        """(the module file, its name there) a `from ... import name` in `file` brings it from; None past 6 hops."""
        froms, _ = _imports(file)
        if name not in froms or depth >= 6:
            return None
        level, module, real = froms[name]
        source = self.module_file(file, level, module)
        return (source, real) if source is not None else None

    def registry(self, file: Path, name: str, key: str | None) -> list[tuple[Path, str]]:
        """The functions a registry instance `name` maps (`N = C()` with a str -> function dict in C's body): the
        entry for `key` when it has one, else every entry."""
        found = self.function_or_assign(file, name)
        if found is None:
            return []
        where, value = found
        if not isinstance(value, ast.Call) or not isinstance(value.func, ast.Name):
            return []
        _, classes = _defs(where)
        cls = classes.get(value.func.id)
        out: list[tuple[Path, str]] = []
        for stmt in cls.body if cls is not None else []:
            mapping = stmt.value if isinstance(stmt, (ast.Assign, ast.AnnAssign)) else None
            if not isinstance(mapping, ast.Dict):
                continue
            pairs = [
                (k.value, v.id)
                for k, v in zip(mapping.keys, mapping.values, strict=True)
                if isinstance(k, ast.Constant) and isinstance(k.value, str) and isinstance(v, ast.Name)
            ]
            chosen = [v for k, v in pairs if k == key] or ([] if key and key != "eager" else [v for _, v in pairs])
            out += [f for v in dict.fromkeys(chosen) if (f := self.function(where, v)) is not None]
        return out

    def function_or_assign(self, file: Path, name: str, depth: int = 0) -> tuple[Path, ast.expr] | None:
        tree = parse_file(file)
        for node in tree.body if tree is not None else []:
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
                return file, node.value
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == name:
                return (file, node.value) if node.value is not None else None
        origin = self._reexported(file, name, depth)
        return self.function_or_assign(*origin, depth + 1) if origin is not None else None

    def method(self, file: Path, cls_name: str, name: str, depth: int = 0) -> Fn | None:
        """`cls_name.name` or the first base class that defines it."""
        ref = self.resolver.in_file(file, cls_name)
        if ref is None or depth > 8:
            return None
        for stmt in ref.node.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == name:
                return Fn(ref.file, stmt, ref.name)
        for base in ref.node.bases:
            found = self.method(ref.file, ast.unparse(base), name, depth + 1)
            if found is not None:
                return found
        return None


def _top(file: Path, name: str) -> Fn | None:
    functions, _ = _defs(file)
    node = functions.get(name)
    return Fn(file, node) if node is not None else None


def walk(finder: Finder, starts: list[Fn], patched: dict[tuple[Path, str], Fn], attn: str | None) -> Walk:
    """Every function reachable from `starts` (bounded), following patched module attributes to their replacement."""
    out = Walk()
    queue: list[tuple[Fn, Fn | None]] = [(s, None) for s in starts]
    while queue and len(out.reached) < MAX_FUNCTIONS:
        fn, caller = queue.pop(0)
        if fn in out.reached:
            continue
        out.reached[fn] = caller
        for target in _targets(finder, fn, patched, attn, out):
            if target not in out.reached:
                queue.append((target, fn))
    return out


def _targets(finder: Finder, fn: Fn, patched: dict[tuple[Path, str], Fn], attn: str | None, out: Walk) -> list[Fn]:
    """What `fn` calls or names. A bare name is looked up in its own file's globals at run time, so a patch of
    that file's attribute replaces it (a patch of the module it was imported from does not); `module.attr`
    is looked up on that module."""
    found: list[Fn] = []
    scope = fn.parent or fn.node  # a nested function sees the functions defined beside it
    nested = {n.name: n for n in ast.walk(scope) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}

    def patch(file: Path, name: str) -> bool:
        replacement = patched.get((file.resolve(), name))
        if replacement is not None:
            out.patches.setdefault(replacement, f"{file.stem}.{name}")
            found.append(replacement)
        return replacement is not None

    for node in ast.walk(fn.node):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id != fn.node.name:
            if node.id in nested and nested[node.id] is not fn.node and nested[node.id] is not scope:
                found.append(Fn(fn.file, nested[node.id], fn.owner, scope))
            elif not patch(fn.file, node.id):
                resolved = finder.function(fn.file, node.id)
                if resolved is not None:
                    found += [t for t in [_top(*resolved)] if t is not None]
                else:
                    found += [t for f, n in finder.registry(fn.file, node.id, attn) if (t := _top(f, n)) is not None]
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and isinstance(node.ctx, ast.Load):
            if node.value.id == "self" and fn.owner is not None:
                method = finder.method(fn.file, fn.owner, node.attr)
                if method is not None and method.node is not fn.node:
                    found.append(method)
                continue
            module = finder.module_of(fn.file, node.value.id)
            if module is not None and not patch(module, node.attr):
                resolved = finder.function(module, node.attr)
                found += [t for t in [_top(*resolved)] if t is not None] if resolved is not None else []
    return found


def module_patches(finder: Finder, fn: Fn) -> dict[tuple[Path, str], Fn]:
    """{(module file, attribute): the replacement} for each `<module>.<attr> = <function>` a patch function writes
    (the function defined inside it, or one it names)."""
    out: dict[tuple[Path, str], Fn] = {}
    nested = {n.name: n for n in ast.walk(fn.node) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    for node in ast.walk(fn.node):
        if not isinstance(node, ast.Assign) or not isinstance(node.value, ast.Name):
            continue
        for target in node.targets:
            if not (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)):
                continue
            module = finder.module_of(fn.file, target.value.id)
            if module is None:
                continue
            name = node.value.id
            if name in nested:
                out[(module.resolve(), target.attr)] = Fn(fn.file, nested[name], None, fn.node)
            elif (resolved := finder.function(fn.file, name)) is not None and (f := _top(*resolved)) is not None:
                out[(module.resolve(), target.attr)] = f
    return out

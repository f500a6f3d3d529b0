"""The target repository's code conventions that generated code mirrors, read statically.

- the base engine class's `__init__` signature: a generated `__init__` takes the
  config exactly as the base does (its annotation, with the import the base
  module uses for it; none when the base leaves it untyped);
- the sibling recipes' compile config classes: their docstring, with the
  sibling's recipe prefix replaced by this recipe's.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from model_compile.generate.planning.locate import _read

MAX_HOPS = 4  # re-exports followed from the engine file to the base class


@dataclass
class BaseInit:
    """What the base class's `__init__` says about its config parameter."""

    base: str  # "mvp_engine.engine.engine.Engine"
    annotation: str | None  # the annotation's text, or None when the base leaves it untyped
    import_from: tuple[str, str] | None  # (module, name) that provides the annotation

    @property
    def described(self) -> str:
        shown = f": {self.annotation}" if self.annotation else " (untyped)"
        return f"{self.base}.__init__(self, config{shown})"


def _module_file(root: Path, module: str) -> Path | None:
    base = root.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _resolve(module: str, level: int, current: str, is_package: bool) -> str:
    if not level:
        return module
    parts = current.split(".")
    keep = len(parts) - level + (1 if is_package else 0)
    prefix = ".".join(parts[:keep])
    return f"{prefix}.{module}" if module else prefix


def _imports(tree: ast.Module, current: str, is_package: bool) -> dict[str, tuple[str, str]]:
    """{local name: (absolute module, imported name)} of the module's from-imports.

    Every from-import counts, also those under `if TYPE_CHECKING:` or in a lazy
    `__getattr__` (how packages re-export without importing eagerly).
    """
    out: dict[str, tuple[str, str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            mod = _resolve(node.module or "", node.level, current, is_package)
            for alias in node.names:
                out.setdefault(alias.asname or alias.name, (mod, alias.name))
    return out


def _find_class(root: Path, module: str, name: str) -> tuple[ast.ClassDef, str, ast.Module] | None:
    for _ in range(MAX_HOPS):
        path = _module_file(root, module)
        if path is None:
            return None
        try:
            tree = ast.parse(_read(path))
        except SyntaxError:
            return None
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and node.name == name:
                return node, module, tree
        found = _imports(tree, module, path.name == "__init__.py").get(name)
        if found is None:
            return None
        module, name = found
    return None


def base_init(root: Path, engine_file: Path, class_name: str) -> BaseInit | None:
    """The base of `class_name` in `engine_file` and its `__init__`'s config annotation."""
    try:
        tree = ast.parse(_read(engine_file))
    except SyntaxError:
        return None
    cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == class_name), None)
    if cls is None or not cls.bases or not isinstance(cls.bases[0], ast.Name):
        return None
    try:
        current = ".".join(engine_file.resolve().relative_to(root.resolve()).with_suffix("").parts)
    except ValueError:
        return None
    source = _imports(tree, current, engine_file.name == "__init__.py").get(cls.bases[0].id)
    if source is None:
        return None
    found = _find_class(root, *source)
    if found is None:
        return None
    base_cls, module, base_tree = found
    init = next((n for n in base_cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
    qualname = f"{module}.{base_cls.name}"
    if init is None or len(init.args.args) < 2:
        return None
    ann = init.args.args[1].annotation
    if ann is None:
        return BaseInit(qualname, None, None)
    text = ast.unparse(ann)
    if isinstance(ann, ast.Name):
        origin = _imports(base_tree, module, False).get(ann.id)
        if origin is not None and not origin[0].startswith("."):
            return BaseInit(qualname, text, (origin[0], ann.id) if origin[1] == ann.id else None)
        if any(isinstance(n, ast.ClassDef) and n.name == ann.id for n in base_tree.body):
            return BaseInit(qualname, text, (module, ann.id))
    return BaseInit(qualname, None, None)  # an annotation we cannot import the same way: leave it out


def engine_methods(root: Path, engine_file: Path, class_name: str) -> set[str] | None:
    """Methods `class_name` defines or inherits through bases found statically; None when a base cannot be read."""
    try:
        tree = ast.parse(_read(engine_file))
        current = ".".join(engine_file.resolve().relative_to(root.resolve()).with_suffix("").parts)
    except (SyntaxError, ValueError):
        return None
    cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == class_name), None)
    module, is_package = current, engine_file.name == "__init__.py"
    methods: set[str] = set()
    for _ in range(MAX_HOPS):
        if cls is None:
            return None
        methods |= {n.name for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        if not cls.bases:
            return methods
        base = cls.bases[0]
        if not isinstance(base, ast.Name):
            return None
        local = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == base.id), None)
        if local is not None:
            cls = local
            continue
        source = _imports(tree, module, is_package).get(base.id)
        if source is None:
            return None
        top = source[0].split(".")[0]
        if not ((root / top).is_dir() or (root / f"{top}.py").is_file()):
            return methods  # a base from outside the repository (ABC, nn.Module): no recipe hooks there
        found = _find_class(root, *source)
        if found is None:
            return None
        cls, module, tree = found
        is_package = False
    return None


def compile_class_docstring(root: Path, recipe: Path, class_name: str) -> str:
    """The docstring sibling recipes give their compile config class, for this recipe."""
    prefix = class_name.removesuffix("CompileConfig") or recipe.name
    for schema in sorted((root / "recipes").glob("*/configs/schema.py")) if (root / "recipes").is_dir() else []:
        if schema.parent.parent.resolve() == recipe.resolve():
            continue
        try:
            tree = ast.parse(_read(schema))
        except SyntaxError:
            continue
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and node.name.endswith("CompileConfig"):
                doc = ast.get_docstring(node)
                sibling = node.name.removesuffix("CompileConfig")
                if doc and "\n" not in doc and sibling and sibling in doc:
                    return doc.replace(sibling, prefix)
    return f"torch.compile options for the {prefix} recipe."

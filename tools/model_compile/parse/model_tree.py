"""The module tree of a model class, read statically from the code that defines it.

`build_tree` walks the class's `__init__` (and the `__init__` of the bases it calls through `super()`): every
`self.<name> = <module>(...)` is a child; `nn.ModuleList([Block(...) for ...])` is a container of repeated
blocks, written `<name>.*`; a child built under a condition on an `__init__` argument is decided from the
arguments the parent passes (`ViTModel(config, add_pooling_layer=False)`), else kept as optional. Names are
relative to the model, as `named_modules()` gives them ("" is the model itself).

It also records what decides where compile can go:
* `no_split`: the classes in the root's `_no_split_modules` (a per-block FSDP2 wrapper shards each of them);
* `checkpoint_layers`: classes that subclass transformers' `GradientCheckpointingLayer`, and
  `checkpoint_in_forward`: whether that transformers runs the checkpoint inside the layer's `forward` (5.23 and
  later: `__init_subclass__` wraps `forward`) or around its call (earlier 5.x: `__call__`);
* `checkpoint_callers`: classes whose own `forward` calls a checkpoint function.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from model_compile.parse.model_hf import auto_child, checkpoint_in_forward, no_split
from model_compile.parse.model_source import ClassRef, Resolver, is_module_class, terminal_base

_CONTAINERS = ("ModuleList", "Sequential", "ModuleDict")
_NOT_MODULES = ("Parameter", "Buffer", "Tensor")
_FACTORIES = ("_from_config", "from_config", "from_pretrained")
MAX_NODES = 4000


@dataclass(frozen=True)
class Node:
    """One module of the tree."""

    path: str
    cls: str  # the class as the code names it (`nn.Linear`, `ViTLayer`); "" when unknown
    container: bool = False  # its elements are `<path>.*`
    optional: bool = False  # built only under a condition the tool could not decide
    composite: bool = False  # it has submodules of its own


@dataclass
class ModelTree:
    """A model's modules, statically, and the facts about checkpointing and sharding units."""

    root: str
    nodes: dict[str, Node] = field(default_factory=dict)
    incomplete: set[str] = field(default_factory=set)  # modules with children the tool could not read
    no_split: tuple[str, ...] = ()
    checkpoint_layers: set[str] = field(default_factory=set)
    checkpoint_in_forward: bool | None = None
    checkpoint_where: str = ""  # the transformers `checkpoint_in_forward` was read from
    checkpoint_callers: set[str] = field(default_factory=set)

    def children(self, path: str) -> list[Node]:
        depth = path.count(".") + 1 if path else 0
        prefix = f"{path}." if path else ""
        return [n for p, n in self.nodes.items() if p.startswith(prefix) and p.count(".") == depth and p]

    def has(self, path: str) -> bool | None:
        """Whether the model has the module `path` (`*` for a block); None when the tool cannot tell."""
        if path in self.nodes:
            return True
        parts = path.split(".")
        for i in range(len(parts) - 1, -1, -1):
            parent = ".".join(parts[:i])
            if parent in self.nodes or parent == "":
                return None if parent in self.incomplete else False
        return None

    def containers(self) -> list[Node]:
        return [n for n in self.nodes.values() if n.container and f"{n.path}.*" in self.nodes]

    def element(self, container: str) -> Node | None:
        return self.nodes.get(f"{container}.*")

    def units_inside(self, path: str) -> list[Node]:
        """The FSDP2 units (`_no_split_modules` classes) strictly inside `path` (outermost only)."""
        prefix = f"{path}." if path else ""
        units = [n for p, n in self.nodes.items() if p.startswith(prefix) and _short(n.cls) in self.no_split and p]
        return [u for u in units if not any(u.path.startswith(o.path + ".") for o in units)]

    def eager_around(self, compiled: list[str]) -> list[str]:
        """The outermost modules that no compiled path covers nor leads to, in the model's order: what runs
        outside compile."""
        out: list[str] = []

        def visit(path: str) -> None:
            for child in self.children(path):
                if any(_inside(child.path, c) for c in compiled):
                    continue
                if any(_inside(c, child.path) for c in compiled):
                    visit(child.path)
                else:
                    out.append(child.path)

        visit("")
        return out


def _short(cls: str) -> str:
    return cls.rsplit(".", 1)[-1]


def _inside(path: str, region: str) -> bool:
    """`path` is `region` or below it, `*` matching one segment either side."""
    if region == "":
        return True
    p, r = path.split("."), region.split(".")
    return len(p) >= len(r) and all(a == b or "*" in (a, b) for a, b in zip(p, r, strict=False))


def _call_name(node: ast.expr) -> str:
    return ast.unparse(node)


class _Builder:
    def __init__(self, resolver: Resolver, tree: ModelTree):
        self.resolver = resolver
        self.tree = tree

    def expand(self, ref: ClassRef, path: str, call: ast.Call | None, depth: int) -> bool:
        """Add the children of an instance of `ref` at `path`; True when it has any."""
        if depth > 10 or len(self.tree.nodes) > MAX_NODES:
            self.tree.incomplete.add(path)
            return False
        self._facts(ref)
        children = self._children(ref, call, 0)
        for name, (value, optional, owner) in children.items():
            self._child(owner, f"{path}.{name}" if path else name, value, optional, depth)
        return bool(children)

    def _facts(self, ref: ClassRef) -> None:
        for base in ref.node.bases:
            if _short(ast.unparse(base)) == "GradientCheckpointingLayer":
                self.tree.checkpoint_layers.add(ref.name)
            if terminal_base(ast.unparse(base)):
                continue
            found = self.resolver.in_file(ref.file, ast.unparse(base))
            if found is not None and found != ref and ref.name not in self.tree.checkpoint_layers:
                self._facts(found)
                if found.name in self.tree.checkpoint_layers:
                    self.tree.checkpoint_layers.add(ref.name)
        forward = next((f for f in ref.node.body if isinstance(f, ast.FunctionDef) and f.name == "forward"), None)
        for node in ast.walk(forward) if forward else []:
            if isinstance(node, ast.Call):
                name = _call_name(node.func).rsplit(".", 1)[-1]
                if name.endswith("checkpoint") or name in ("checkpoint_sequential", "_gradient_checkpointing_func"):
                    self.tree.checkpoint_callers.add(ref.name)

    def _children(self, ref: ClassRef, call: ast.Call | None, depth: int) -> dict[str, tuple[ast.expr, bool, ClassRef]]:
        init = next((f for f in ref.node.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"), None)
        out: dict[str, tuple[ast.expr, bool, ClassRef]] = {}
        if init is None:  # the base's __init__ runs
            for base in ref.node.bases:
                if terminal_base(ast.unparse(base)):
                    continue
                found = self.resolver.in_file(ref.file, ast.unparse(base))
                if found is not None and found != ref and depth < 6:
                    return self._children(found, call, depth + 1)
            return out
        bound = _bind(init, call)
        self._walk(ref, init.body, bound, False, out, depth)
        return out

    def _walk(self, ref: ClassRef, body: list[ast.stmt], bound: dict, optional: bool, out: dict, depth: int) -> None:
        for stmt in body:
            if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
                func = _call_name(stmt.value.func)
                if func.startswith("super(") and func.endswith(".__init__") and depth < 6:
                    for base in ref.node.bases:
                        if terminal_base(ast.unparse(base)):
                            continue
                        found = self.resolver.in_file(ref.file, ast.unparse(base))
                        if found is not None and found != ref:
                            out.update(self._children(found, _with_args(stmt.value, bound), depth + 1))
                            break
            elif isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                for target in targets:
                    if isinstance(target, ast.Name) and _is_module_expr(stmt.value):
                        bound[f"<local>{target.id}"] = stmt.value  # `text_model = TextModel(...)`, used below
                    if (
                        isinstance(target, ast.Attribute)
                        and isinstance(target.value, ast.Name)
                        and target.value.id == "self"
                    ):
                        value = _decide(stmt.value, bound)
                        if isinstance(value, ast.Name) and f"<local>{value.id}" in bound:
                            value = bound[f"<local>{value.id}"]
                        if value is None:
                            out.pop(target.attr, None)  # `self.pooler = ... if False else None`
                        elif _is_module_expr(value):
                            out[target.attr] = (value, optional, ref)
                        elif _may_be_module(value, bound):  # a module the tool cannot name: known unknown
                            out[target.attr] = (_UNKNOWN, optional, ref)
            elif isinstance(stmt, ast.If):
                test = _truth(stmt.test, bound)
                if test is not False:
                    self._walk(ref, stmt.body, bound, optional or test is None, out, depth)
                if test is not True:
                    self._walk(ref, stmt.orelse, bound, optional or test is None, out, depth)
            elif isinstance(stmt, (ast.With, ast.Try)):
                self._walk(ref, stmt.body, bound, optional, out, depth)

    def _child(self, owner: ClassRef, path: str, value: ast.expr, optional: bool, depth: int) -> None:
        if value is _UNKNOWN:
            self.tree.nodes[path] = Node(path, "", optional=optional)
            self.tree.incomplete.add(path)
            return
        if isinstance(value, ast.IfExp):  # undecided: a module either way, or only in one arm (optional)
            arms = [a for a in (value.body, value.orelse) if _is_module_expr(a)]
            self._child(owner, path, arms[0], optional or len(arms) < 2, depth)
            return
        assert isinstance(value, ast.Call)
        func = _call_name(value.func)
        cls = func
        for factory in _FACTORIES:
            cls = cls.removesuffix(f".{factory}")
        if _short(cls) in _CONTAINERS:
            self.tree.nodes[path] = Node(path, cls, container=True, optional=optional, composite=True)
            elements = _elements(value)
            if elements is None:
                self.tree.incomplete.add(path)
            elif isinstance(elements, ast.Call):
                self._child(owner, f"{path}.*", elements, False, depth + 1)
            else:
                for i, element in enumerate(elements):
                    self._child(owner, f"{path}.{i}", element, False, depth + 1)
            return
        if _short(cls).startswith("Auto") and func != cls:  # `AutoModel.from_config(config.text_config)`
            ref = auto_child(self.resolver, owner, _short(cls), value)
            cls = ref.name if ref is not None else cls
        else:
            ref = None if cls.startswith(("nn.", "torch.nn.")) else self.resolver.in_file(owner.file, cls)
        if ref is not None and not is_module_class(self.resolver, ref):
            return
        self.tree.nodes[path] = Node(path, cls, optional=optional)
        if ref is None:
            if not cls.startswith(("nn.", "torch.nn.")):
                self.tree.incomplete.add(path)
            return
        if self.expand(ref, path, value if func == cls else None, depth + 1):
            self.tree.nodes[path] = Node(path, cls, optional=optional, composite=True)


_UNKNOWN = ast.Name(id="<unknown module>")
_PLAIN_CALLS = {"int", "float", "str", "bool", "len", "getattr", "max", "min", "tuple", "list", "dict", "set", "range"}


def _may_be_module(value: ast.expr, bound: dict[str, ast.expr]) -> bool:
    """A value the tool cannot classify that may hold a module: a part of a module built above
    (`text_model.text_model`), or what a helper function returns (`build_norm(cfg)`); plain data is not."""
    if isinstance(value, ast.Attribute):
        root = value
        while isinstance(root, ast.Attribute):
            root = root.value  # type: ignore[assignment]
        return isinstance(root, ast.Name) and f"<local>{root.id}" in bound
    if isinstance(value, ast.Call):
        name = _short(_call_name(value.func))
        return name[:1].islower() and name not in _PLAIN_CALLS and not name.startswith("_")
    return False


def _is_none(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _is_module_expr(node: ast.expr) -> bool:
    if isinstance(node, ast.IfExp):
        return _is_module_expr(node.body) or _is_module_expr(node.orelse)
    if not isinstance(node, ast.Call):
        return False
    name = _short(_call_name(node.func))
    for factory in _FACTORIES:
        if name == factory:
            name = _short(_call_name(node.func).removesuffix(f".{factory}"))
    return name[:1].isupper() and name not in _NOT_MODULES


def _elements(call: ast.Call) -> ast.Call | list[ast.Call] | None:
    """A container's blocks: one class repeated (a comprehension), or a list of calls; None when unreadable."""
    args = list(call.args)
    if len(args) == 1 and isinstance(args[0], (ast.ListComp, ast.GeneratorExp)) and isinstance(args[0].elt, ast.Call):
        return args[0].elt
    if len(args) == 1 and isinstance(args[0], (ast.List, ast.Tuple)):
        args = list(args[0].elts)
    if len(args) == 1 and isinstance(args[0], ast.Starred) and isinstance(args[0].value, ast.ListComp):
        elt = args[0].value.elt
        return elt if isinstance(elt, ast.Call) else None
    if args and all(isinstance(a, ast.Call) for a in args):
        return [a for a in args if isinstance(a, ast.Call)]
    return None if args else []


def _bind(init: ast.FunctionDef, call: ast.Call | None) -> dict[str, ast.expr]:
    """`__init__`'s parameters bound to the call's arguments, else their defaults (only what is known)."""
    params = [a.arg for a in init.args.args[1:]]
    bound: dict[str, ast.expr] = {}
    defaults = init.args.defaults
    for name, default in zip(params[len(params) - len(defaults) :], defaults, strict=True):
        bound[name] = default
    for arg, kw_default in zip(init.args.kwonlyargs, init.args.kw_defaults, strict=True):
        if kw_default is not None:
            bound[arg.arg] = kw_default
    if call is not None:
        for name, value in zip(params, call.args, strict=False):
            if not isinstance(value, ast.Starred):
                bound[name] = value
        for kw in call.keywords:
            if kw.arg:
                bound[kw.arg] = kw.value
    return bound


def _with_args(call: ast.Call, bound: dict[str, ast.expr]) -> ast.Call:
    """A `super().__init__(...)` call with the caller's known argument values substituted."""

    class Sub(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.expr:
            value = bound.get(node.id)
            return value if isinstance(value, ast.Constant) else node

    return Sub().visit(ast.parse(ast.unparse(call), mode="eval").body)


def _truth(test: ast.expr, bound: dict[str, ast.expr]) -> bool | None:
    """The value of a condition on `__init__` arguments, when they are known constants."""
    if isinstance(test, ast.Name) and isinstance(bound.get(test.id), ast.Constant):
        return bool(bound[test.id].value)  # type: ignore[attr-defined]
    if isinstance(test, ast.Constant):
        return bool(test.value)
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _truth(test.operand, bound)
        return None if inner is None else not inner
    return None


def _decide(value: ast.expr, bound: dict[str, ast.expr]) -> ast.expr | None:
    """An `a if test else b` with a known test, decided; other values as they are (None: nothing is built)."""
    if isinstance(value, ast.IfExp):
        test = _truth(value.test, bound)
        if test is not None:
            return _decide(value.body if test else value.orelse, bound)
    return None if _is_none(value) else value


def build_tree(resolver: Resolver, ref: ClassRef) -> ModelTree:
    """The module tree of an instance of `ref` built with its defaults."""
    tree = ModelTree(root=ref.name)
    tree.nodes[""] = Node("", ref.name, composite=True)
    _Builder(resolver, tree).expand(ref, "", None, 0)
    tree.no_split = no_split(resolver, ref)
    if tree.checkpoint_layers:
        tree.checkpoint_in_forward = checkpoint_in_forward(resolver)
        tree.checkpoint_where = resolver.transformers.where if resolver.transformers is not None else ""
    return tree

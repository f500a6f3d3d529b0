"""What transformers' own conventions say about a model, read as text from its files: the class an
`AutoModel*.from_config(config.<sub>)` builds (the sub-config's `model_type` in the auto class's mapping), the
FSDP2 units (`_no_split_modules` on the class or its bases), and where its `GradientCheckpointingLayer` runs the
checkpoint (inside `forward` from transformers 5.23: `__init_subclass__` wraps it; around the call before)."""

from __future__ import annotations

import ast

from model_compile.parse.model_source import ClassRef, Resolver, auto_mappings, parse_file


def auto_child(resolver: Resolver, owner: ClassRef, auto: str, call: ast.Call) -> ClassRef | None:
    """The class `<auto>.from_config(config.<sub>)` builds: the sub-config class the owner's config class
    names for `<sub>`, its `model_type`, and that type's class in the auto class's mapping."""
    package = resolver.transformers
    arg = call.args[0] if call.args else None
    if package is None or not isinstance(arg, ast.Attribute):
        return None
    init = next((f for f in owner.node.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"), None)
    params = init.args.args[1:] if init is not None else []
    annotation = params[0].annotation if params and params[0].annotation is not None else None
    config = resolver.in_file(owner.file, ast.unparse(annotation)) if annotation is not None else None
    sub = _dict_value(config, ("sub_configs", "sub_configs_defaults"), arg.attr) if config else None
    sub_ref = resolver.in_file(config.file, sub) if config is not None and sub else None
    model_type = _class_constant(sub_ref, "model_type") if sub_ref is not None else None
    names, autos = auto_mappings(package.path)
    cls = names.get(autos.get(auto, ""), {}).get(model_type or "")
    return resolver.transformers_class(cls) if cls else None


def _dict_value(ref: ClassRef, attrs: tuple[str, ...], key: str) -> str | None:
    """The name a class-level dict (`sub_configs = {"text_config": TextConfig}`) holds for `key`."""
    for stmt in ref.node.body:
        targets = (
            stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] if isinstance(stmt, ast.AnnAssign) else []
        )
        value = stmt.value if isinstance(stmt, (ast.Assign, ast.AnnAssign)) else None
        if any(isinstance(t, ast.Name) and t.id in attrs for t in targets) and isinstance(value, ast.Dict):
            for k, v in zip(value.keys, value.values, strict=True):
                if isinstance(k, ast.Constant) and k.value == key:
                    return ast.unparse(v)
    return None


def _class_constant(ref: ClassRef, name: str) -> str | None:
    for stmt in ref.node.body:
        targets = (
            stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] if isinstance(stmt, ast.AnnAssign) else []
        )
        value = stmt.value if isinstance(stmt, (ast.Assign, ast.AnnAssign)) else None
        if any(isinstance(t, ast.Name) and t.id == name for t in targets) and isinstance(value, ast.Constant):
            return str(value.value)
    return None


def no_split(resolver: Resolver, ref: ClassRef, depth: int = 0) -> tuple[str, ...]:
    for stmt in ref.node.body:
        if isinstance(stmt, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "_no_split_modules" for t in stmt.targets
        ):
            if isinstance(stmt.value, (ast.List, ast.Tuple)):
                return tuple(
                    e.value for e in stmt.value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)
                )
    for base in ref.node.bases if depth < 8 else []:
        if ast.unparse(base).rsplit(".", 1)[-1] in ("Module", "GradientCheckpointingLayer") or ast.unparse(
            base
        ).endswith("Mixin"):
            continue
        found = resolver.in_file(ref.file, ast.unparse(base))
        if found is not None and found != ref:
            names = no_split(resolver, found, depth + 1)
            if names:
                return names
    return ()


def checkpoint_in_forward(resolver: Resolver) -> bool | None:
    """Whether the transformers found runs a GradientCheckpointingLayer's checkpoint inside its `forward` (True),
    around its call (False), or cannot tell (None)."""
    if resolver.transformers is None:
        return None
    tree = parse_file(resolver.transformers.path / "modeling_layers.py")
    layer = next(
        (
            n
            for n in (tree.body if tree else [])
            if isinstance(n, ast.ClassDef) and n.name == "GradientCheckpointingLayer"
        ),
        None,
    )
    if layer is None:
        return None
    for fn in layer.body:
        if isinstance(fn, ast.FunctionDef) and fn.name == "__init_subclass__":
            if any(
                isinstance(n, ast.Attribute) and n.attr == "forward" and isinstance(n.ctx, ast.Store)
                for n in ast.walk(fn)
            ):
                return True
        if (
            isinstance(fn, ast.FunctionDef)
            and fn.name == "__call__"
            and "_gradient_checkpointing_func" in ast.unparse(fn)
        ):
            return False
    return None

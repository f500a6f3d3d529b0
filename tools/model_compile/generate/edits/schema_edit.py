"""LibCST edit of configs/schema.py: a Literal-typed compile section on the model config."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import libcst as cst
from libcst.codemod import CodemodContext
from libcst.codemod.visitors import AddImportsVisitor

from model_compile.errors import InputError
from model_compile.generate.edits.cst_util import dotted
from model_compile.generate.edits.imports import add_from_import


@dataclass
class SchemaResult:
    code: str
    notes: list[str] = field(default_factory=list)
    model_class: str | None = None
    compile_class: str | None = None
    changed: bool = False


def _classes(module: cst.Module) -> dict[str, cst.ClassDef]:
    return {s.name.value: s for s in module.body if isinstance(s, cst.ClassDef)}


def _fields(cls: cst.ClassDef) -> dict[str, cst.AnnAssign]:
    out = {}
    for s in cls.body.body:
        if isinstance(s, cst.SimpleStatementLine):
            for small in s.body:
                if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name):
                    out[small.target.value] = small
    return out


def model_classes(module: cst.Module, root_hint: str | None) -> tuple[str, str]:
    """(root config class, model config class) from the schema."""
    classes = _classes(module)
    roots = [root_hint] if root_hint and root_hint in classes else list(classes)
    for name in roots:
        ann = _fields(classes[name]).get("model")
        if ann is not None:
            model_cls = dotted(ann.annotation.annotation)
            if model_cls in classes:
                return name, model_cls
            raise InputError(f"schema: model config class {model_cls} is not defined in configs/schema.py")
    raise InputError("schema: no config class with a `model:` field in configs/schema.py")


def compile_class_name(model_class: str) -> str:
    for suffix in ("ModelConfig", "Config"):
        if model_class.endswith(suffix) and model_class != suffix:
            return model_class[: -len(suffix)] + "CompileConfig"
    return model_class + "CompileConfig"


def config_dict_args(module: cst.Module, cls: cst.ClassDef) -> str | None:
    """The `ConfigDict(...)` arguments the model class uses, reused for the new class."""
    for s in cls.body.body:
        if isinstance(s, cst.SimpleStatementLine):
            for small in s.body:
                if (
                    isinstance(small, cst.Assign)
                    and dotted(small.targets[0].target) == "model_config"
                    and isinstance(small.value, cst.Call)
                    and dotted(small.value.func) == "ConfigDict"
                ):
                    return ", ".join(module.code_for_node(a).strip().rstrip(",") for a in small.value.args)
    return None


def base_class(module: cst.Module, cls: cst.ClassDef) -> str:
    for b in cls.bases:
        name = dotted(b.value)
        if name:
            return name
    return "BaseModel"


def edit_schema(
    source: str,
    *,
    root_hint: str | None,
    render_class: Callable[[str, str, str | None], str],
    render_field: Callable[[str], str],
    filename: str,
) -> SchemaResult:
    """render_class(class_name, base, config_dict) / render_field(class_name) return code text."""
    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError as exc:
        raise InputError(f"{filename}: cannot parse ({exc.message} at line {exc.raw_line})") from exc
    _, model_cls = model_classes(module, root_hint)
    classes = _classes(module)
    cls = classes[model_cls]
    existing = _fields(cls).get("compile")
    if existing is not None:
        name = dotted(existing.annotation.annotation)
        return SchemaResult(
            code=source,
            model_class=model_cls,
            compile_class=name,
            notes=[f"{filename}: {model_cls}.compile already declared ({name}); left unchanged"],
        )
    cname = compile_class_name(model_cls)
    notes = []
    body = list(module.body)
    idx = body.index(cls)
    cfg = config_dict_args(module, cls)
    base = "BaseModel"  # a plain section: never inherit the model section's fields
    if cname not in classes:
        text = render_class(cname, base, cfg)
        try:
            new_cls = cst.parse_module(text).body
        except cst.ParserSyntaxError as exc:
            raise InputError(f"template config/compile_config.py.j2 does not parse: {exc.message}") from exc
        new_cls = [
            new_cls[0].with_changes(leading_lines=[cst.EmptyLine(indent=False), cst.EmptyLine(indent=False)]),
            *new_cls[1:],
        ]
        first = body[idx]
        body[idx:idx] = new_cls
        # the model class keeps its own leading lines; the new class sits right above it
        body[idx] = body[idx].with_changes(leading_lines=first.leading_lines)
        body[idx + len(new_cls)] = first.with_changes(
            leading_lines=[cst.EmptyLine(indent=False), cst.EmptyLine(indent=False)]
        )
        notes.append(f"{filename}: added class {cname}")
    field_stmt = cst.parse_module(render_field(cname)).body[0]
    cls_body = list(cls.body.body)
    last_field = max(
        (
            i
            for i, s in enumerate(cls_body)
            if isinstance(s, cst.SimpleStatementLine) and any(isinstance(x, cst.AnnAssign) for x in s.body)
        ),
        default=None,
    )
    if last_field is None:
        last_field = max((i for i, s in enumerate(cls_body) if isinstance(s, cst.SimpleStatementLine)), default=-1)
    cls_body.insert(last_field + 1, field_stmt)
    new_model_cls = cls.with_changes(body=cls.body.with_changes(body=cls_body))
    pos = next(i for i, s in enumerate(body) if isinstance(s, cst.ClassDef) and s.name.value == model_cls)
    body[pos] = new_model_cls.with_changes(leading_lines=body[pos].leading_lines)
    notes.append(f"{filename}: added field {model_cls}.compile")
    module = module.with_changes(body=body)
    module = add_from_import(module, "typing", "Literal")
    ctx = CodemodContext()
    AddImportsVisitor.add_needed_import(ctx, "pydantic", "Field")
    AddImportsVisitor.add_needed_import(ctx, "pydantic", "BaseModel")
    if cfg is not None:
        AddImportsVisitor.add_needed_import(ctx, "pydantic", "ConfigDict")
    module = module.visit(AddImportsVisitor(ctx))
    return SchemaResult(code=module.code, notes=notes, model_class=model_cls, compile_class=cname, changed=True)

"""LibCST edit of the engine: one gated compile block in prepare_model().

Existing compile statements in prepare_model() (kit call, in-place
`.compile()`, `torch.compile` wrappers, `torch.compiler.disable` regions,
gated or not) are removed and one block rendered from a template is inserted
at the right place: before the distributed wrap (after it for post-wrap).
Everything else reprints byte for byte (LibCST is lossless).
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field

import libcst as cst
from libcst.codemod import CodemodContext
from libcst.codemod.visitors import AddImportsVisitor

from model_compile.discover.tree import InputError

WRAP_EXACT = {
    "DistributedDataParallel",
    "DDP",
    "FullyShardedDataParallel",
    "FSDP",
    "fully_shard",
    "parallelize_module",
    "deepspeed.initialize",
    "accelerator.prepare",
    "self.accelerator.prepare",
}
WRAP_WORD = re.compile(r"paralleli[sz]e|shard", re.I)
KIT_SUFFIX = "ModelKit"


def dotted(expr: cst.BaseExpression) -> str | None:
    if isinstance(expr, cst.Name):
        return expr.value
    if isinstance(expr, cst.Attribute):
        base = dotted(expr.value)
        if base is None:
            if isinstance(expr.value, cst.Call):  # super().__init__
                inner = dotted(expr.value.func)
                return f"{inner}().{expr.attr.value}" if inner else None
            return None
        return f"{base}.{expr.attr.value}"
    return None


class _Calls(cst.CSTVisitor):
    def __init__(self) -> None:
        self.names: list[str] = []

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False

    def visit_Call(self, node: cst.Call) -> None:
        name = dotted(node.func)
        if name:
            self.names.append(name)


def call_names(node: cst.CSTNode) -> list[str]:
    v = _Calls()
    node.visit(v)
    return v.names


def is_compile_call(name: str) -> bool:
    """Kit compile, in-place `.compile()`, `torch.compile`, or a `torch.compiler.disable` region."""
    last = name.rsplit(".", 1)[-1]
    if last == "apply_model_compile" or name == "torch.compile" or name.startswith("torch.compiler.disable"):
        return True
    return last == "compile" and "." in name and not name.startswith(("re.", "regex."))


def is_wrap_call(name: str) -> bool:
    if name in WRAP_EXACT:
        return True
    last = name.rsplit(".", 1)[-1]
    return bool(WRAP_WORD.search(last))


def _is_compile_stmt(stmt: cst.BaseStatement) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine) and any(is_compile_call(n) for n in call_names(stmt))


@dataclass
class EngineResult:
    code: str
    notes: list[str] = field(default_factory=list)
    model_var: str = "model"
    wrapped_var: str | None = None
    kit_attr: str | None = None


@dataclass
class _Strip:
    removed: int = 0


def _strip_block(stmts, acc: _Strip, module: cst.Module):
    out = []
    for s in stmts:
        if _is_compile_stmt(s):
            acc.removed += 1
            continue
        if isinstance(s, (cst.If, cst.For, cst.While, cst.With)):
            new = _strip_compound(s, acc, module)
            if new is None:
                continue
            s = new
        out.append(s)
    return out


def _strip_compound(s, acc: _Strip, module: cst.Module):
    before = acc.removed
    if not isinstance(s.body, cst.IndentedBlock):
        if _is_compile_stmt(cst.SimpleStatementLine(body=s.body.body)):
            acc.removed += 1
            if getattr(s, "orelse", None) is None:
                return None
        return s
    body = _strip_block(s.body.body, acc, module)
    orelse = getattr(s, "orelse", None)
    if isinstance(orelse, cst.Else) and isinstance(orelse.body, cst.IndentedBlock):
        else_body = _strip_block(orelse.body.body, acc, module)
        orelse = orelse.with_changes(body=orelse.body.with_changes(body=else_body)) if else_body else None
    elif isinstance(orelse, cst.If):
        orelse = _strip_compound(orelse, acc, module)
    if acc.removed == before:
        return s
    test = module.code_for_node(s.test) if isinstance(s, (cst.If, cst.While)) else ""
    # A block gated on the compile config (or emptied by the removal) goes as a whole.
    if orelse is None and (not body or "compile" in test):
        return None
    if not body:
        body = [cst.SimpleStatementLine(body=[cst.Pass()])]
    changes = {"body": s.body.with_changes(body=body)}
    if hasattr(s, "orelse"):
        changes["orelse"] = orelse
    return s.with_changes(**changes)


def _find_method(cls: cst.ClassDef, name: str) -> tuple[int, cst.FunctionDef] | None:
    for i, s in enumerate(cls.body.body):
        if isinstance(s, cst.FunctionDef) and s.name.value == name:
            return i, s
    return None


def _blank(stmt: cst.BaseStatement) -> cst.BaseStatement:
    """Give a statement one blank line above it unless it already has leading lines."""
    if stmt.leading_lines:
        return stmt
    return stmt.with_changes(leading_lines=[cst.EmptyLine(indent=False)])


def _wrap_index(body) -> int | None:
    for i, s in enumerate(body):
        if isinstance(s, (cst.FunctionDef, cst.ClassDef)):
            continue
        if any(is_wrap_call(n) for n in call_names(s)):
            return i
    return None


def _model_var(body, wrap_stmt) -> str:
    if wrap_stmt is not None:
        for node in _first_call_args(wrap_stmt):
            if isinstance(node, cst.Name):
                return node.value
    for s in body:
        if isinstance(s, cst.SimpleStatementLine):
            for small in s.body:
                if isinstance(small, cst.Assign) and len(small.targets) == 1:
                    t = small.targets[0].target
                    if isinstance(t, cst.Name) and any("build" in n for n in call_names(small)):
                        return t.value
    return "model"


def _first_call_args(stmt):
    class V(cst.CSTVisitor):
        args: list = []

        def visit_Call(self, node: cst.Call) -> bool:
            name = dotted(node.func)
            if name and is_wrap_call(name) and not V.args and node.args:
                V.args = [node.args[0].value]
            return True

    V.args = []
    stmt.visit(V())
    return V.args


def _assigned_name(stmt) -> str | None:
    if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1:
        small = stmt.body[0]
        if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name):
            return small.targets[0].target.value
        if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name):
            return small.target.value
    return None


def _return_of(stmt) -> cst.Return | None:
    if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Return):
        return stmt.body[0]
    return None


def find_kit_attr(cls: cst.ClassDef) -> str | None:
    """`self.<attr>` holding a `*ModelKit()` instance, set anywhere in the class."""

    class V(cst.CSTVisitor):
        found: str | None = None

        def visit_Assign(self, node: cst.Assign) -> None:
            if V.found or not isinstance(node.value, cst.Call):
                return
            name = dotted(node.value.func) or ""
            if name.rsplit(".", 1)[-1].endswith(KIT_SUFFIX):
                for t in node.targets:
                    d = dotted(t.target)
                    if d and d.startswith("self."):
                        V.found = d

    V.found = None
    cls.visit(V())
    return V.found


def engine_classes(module: cst.Module) -> list[cst.ClassDef]:
    return [s for s in module.body if isinstance(s, cst.ClassDef) and _find_method(s, "prepare_model")]


def facts(module: cst.Module) -> dict:
    """model_var / wrapped_var / kit_attr / config class of the first engine class (for rendering)."""
    classes = engine_classes(module)
    if not classes:
        raise InputError("no class with prepare_model() in the engine file")
    cls = classes[0]
    _, fn = _find_method(cls, "prepare_model")
    body = list(fn.body.body)
    strip = _Strip()
    body = _strip_block(body, strip, module)
    wi = _wrap_index(body)
    wrap_stmt = body[wi] if wi is not None else None
    model_var = _model_var(body, wrap_stmt)
    wrapped = _assigned_name(wrap_stmt) if wrap_stmt is not None else None
    config_class = None
    for s in cls.body.body:
        if isinstance(s, cst.SimpleStatementLine):
            for small in s.body:
                if isinstance(small, cst.Assign) and dotted(small.targets[0].target) == "ConfigClass":
                    config_class = dotted(small.value)
    return {
        "model_var": model_var,
        "wrapped_var": wrapped,
        "has_wrap": wrap_stmt is not None,
        "kit_attr": find_kit_attr(cls),
        "class_name": cls.name.value,
        "config_class": config_class,
    }


def _parse_statements(text: str, what: str) -> list[cst.BaseStatement]:
    try:
        return list(cst.parse_module(text).body)
    except cst.ParserSyntaxError as exc:
        raise InputError(f"template {what} rendered code that does not parse: {exc.message}") from exc


def edit_engine(
    source: str,
    *,
    path_kind: str,
    block: str,
    model_var: str,
    kit_init: str | None = None,
    kit_attr_stmt: str | None = None,
    kit_import: tuple[str, str] | None = None,
    need_torch: bool = False,
    filename: str = "engine",
) -> EngineResult:
    """Return the new engine source with exactly one compile block in prepare_model()."""
    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError as exc:
        raise InputError(f"{filename}: cannot parse ({exc.message} at line {exc.raw_line})") from exc
    classes = engine_classes(module)
    if not classes:
        raise InputError(f"{filename}: no class with prepare_model()")
    notes: list[str] = []
    new_body = list(module.body)
    for cls in classes:
        idx = new_body.index(cls)
        new_body[idx] = _edit_class(cls, module, path_kind, block, model_var, kit_init, kit_attr_stmt, notes, filename)
    module = module.with_changes(body=new_body)
    if kit_import:
        module = add_from_import(module, kit_import[0], kit_import[1])
    if need_torch:
        ctx = CodemodContext()
        if need_torch:
            AddImportsVisitor.add_needed_import(ctx, "torch")
        module = module.visit(AddImportsVisitor(ctx))
    return EngineResult(code=module.code, notes=notes, model_var=model_var)


def _import_module(stmt) -> str | None:
    if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1:
        imp = stmt.body[0]
        if isinstance(imp, cst.ImportFrom) and not imp.relative and imp.module is not None:
            return dotted(imp.module)
        if isinstance(imp, cst.Import):
            return dotted(imp.names[0].name)
    return None


def add_from_import(module: cst.Module, mod: str, name: str) -> cst.Module:
    """`from mod import name`, next to the file's other imports of the same package."""
    root = mod.split(".")[0]
    last_same = None
    for i, stmt in enumerate(module.body):
        m = _import_module(stmt)
        if m is not None and (m == root or m.startswith(root + ".")):
            last_same = i
            if m > mod:  # keep an isort-ordered group ordered
                last_same = i - 1
                break
    existing = any(_import_module(s) == mod for s in module.body)
    if last_same is None and not existing and root in sys.stdlib_module_names:
        return _add_stdlib_import(module, mod, name)
    if last_same is None or existing:
        ctx = CodemodContext()
        AddImportsVisitor.add_needed_import(ctx, mod, name)
        return module.visit(AddImportsVisitor(ctx))
    new = cst.parse_statement(f"from {mod} import {name}\n")
    body = list(module.body)
    body.insert(last_same + 1, new)
    return module.with_changes(body=body)


def _add_stdlib_import(module: cst.Module, mod: str, name: str) -> cst.Module:
    """A standard-library import opens the import block (its own group)."""
    body = list(module.body)
    for i, stmt in enumerate(body):
        m = _import_module(stmt)
        if m is None and not (isinstance(stmt, cst.SimpleStatementLine) and isinstance(stmt.body[0], cst.ImportFrom)):
            continue
        if m == "__future__":
            continue
        new = cst.parse_statement(f"from {mod} import {name}\n").with_changes(leading_lines=stmt.leading_lines)
        stdlib = m is not None and m.split(".")[0] in sys.stdlib_module_names
        body[i] = stmt.with_changes(leading_lines=[] if stdlib else [cst.EmptyLine(indent=False)])
        body.insert(i, new)
        return module.with_changes(body=body)
    ctx = CodemodContext()
    AddImportsVisitor.add_needed_import(ctx, mod, name)
    return module.visit(AddImportsVisitor(ctx))


def _edit_class(cls, module, path_kind, block, model_var, kit_init, kit_attr_stmt, notes, filename):
    i_fn, fn = _find_method(cls, "prepare_model")
    if not isinstance(fn.body, cst.IndentedBlock):
        raise InputError(f"{filename}: prepare_model() body is on one line; cannot place a block")
    _check_helpers(cls, fn, module, filename)
    strip = _Strip()
    body = _strip_block(list(fn.body.body), strip, module)
    if strip.removed:
        notes.append(f"{cls.name.value}.prepare_model: replaced {strip.removed} existing compile statement(s)")
    block_stmts = _parse_statements(block, f"compile/{path_kind}.py.j2")
    block_stmts[0] = block_stmts[0].with_changes(leading_lines=[cst.EmptyLine(indent=False)])
    wi = _wrap_index(body)
    if path_kind == "post-wrap":
        if wi is None:
            raise InputError(f"{filename}: post-wrap needs a distributed wrap in prepare_model(); none found")
        wrap = body[wi]
        ret = _return_of(wrap)
        if ret is not None and ret.value is not None:
            assign = cst.SimpleStatementLine(
                body=[cst.Assign(targets=[cst.AssignTarget(target=cst.Name(model_var))], value=ret.value)],
                leading_lines=wrap.leading_lines,
            )
            final = cst.SimpleStatementLine(
                body=[cst.Return(value=cst.Name(model_var))], leading_lines=[cst.EmptyLine(indent=False)]
            )
            body[wi : wi + 1] = [assign, *block_stmts, final]
            notes.append(f"{cls.name.value}.prepare_model: split the wrapping return into assignment, compile, return")
        else:
            body[wi + 1 : wi + 1] = block_stmts
            after = wi + 1 + len(block_stmts)
            if after < len(body):
                body[after] = _blank(body[after])
            notes.append(f"{cls.name.value}.prepare_model: compile placed after the distributed wrap (line {_line(module, fn, wrap)})")
    else:
        if wi is None:
            last = body[-1] if body else None
            wi = len(body) - 1 if last is not None and _return_of(last) is not None else len(body)
            notes.append(f"{cls.name.value}.prepare_model: no distributed wrap found; block placed before the return")
        else:
            notes.append(f"{cls.name.value}.prepare_model: block placed before the distributed wrap")
        body[wi:wi] = block_stmts
        after = wi + len(block_stmts)
        if after < len(body):
            body[after] = _blank(body[after])
    fn = fn.with_changes(body=fn.body.with_changes(body=body))
    cls_body = list(cls.body.body)
    cls_body[i_fn] = fn
    if kit_attr_stmt is not None or kit_init is not None:
        cls_body = _add_kit(cls_body, kit_init, kit_attr_stmt, notes, cls.name.value)
    return cls.with_changes(body=cls.body.with_changes(body=cls_body))


def _line(module, fn, stmt) -> str:
    return module.code_for_node(stmt).strip().splitlines()[0]


def _check_helpers(cls, fn, module, filename):
    """A compile call hidden in a helper prepare_model() calls cannot be replaced safely."""
    called = {n.split(".", 1)[1] for n in call_names(fn.body) if n.startswith("self.") and n.count(".") == 1}
    for s in cls.body.body:
        if isinstance(s, cst.FunctionDef) and s.name.value in called:
            if any(is_compile_call(n) for n in call_names(s.body)):
                raise InputError(
                    f"{filename}: {s.name.value}() called from prepare_model() compiles the model; "
                    "move that compile into prepare_model() first (cannot place one block unambiguously)"
                )


def _add_kit(cls_body, kit_init, kit_attr_stmt, notes, cls_name):
    found = None
    for i, s in enumerate(cls_body):
        if isinstance(s, cst.FunctionDef) and s.name.value == "__init__":
            found = (i, s)
    if found is not None and kit_attr_stmt is not None:
        i, init = found
        stmts = list(init.body.body)
        pos = len(stmts)
        for j, st in enumerate(stmts):
            if any(n.startswith("super().__init__") or n.endswith(".__init__") for n in call_names(st)):
                pos = j + 1
                break
        new = _parse_statements(kit_attr_stmt, "compile/kit_attr.py.j2")
        stmts[pos:pos] = new
        cls_body[i] = init.with_changes(body=init.body.with_changes(body=stmts))
        notes.append(f"{cls_name}.__init__: added the model kit instance")
        return cls_body
    if kit_init is None:
        raise InputError(f"{cls_name}: no __init__ to add the model kit to")
    new_init = _parse_statements(kit_init, "compile/kit_init.py.j2")[0]
    new_init = new_init.with_changes(leading_lines=[cst.EmptyLine(indent=False)])
    first_fn = next((i for i, s in enumerate(cls_body) if isinstance(s, cst.FunctionDef)), len(cls_body))
    cls_body.insert(first_fn, new_init)
    if first_fn + 1 < len(cls_body):
        cls_body[first_fn + 1] = _blank(cls_body[first_fn + 1])
    notes.append(f"{cls_name}: created __init__ calling super().__init__(config) with the model kit")
    return cls_body

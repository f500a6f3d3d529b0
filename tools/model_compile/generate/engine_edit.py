"""LibCST edit of the engine: one gated compile block in prepare_model().

What to change comes from the ledger (`model_compile.ledger`), the package's
one static model of `prepare_model()`: the statements holding its `compile` and
`graph_break` events are removed, and one block rendered from a template is
inserted before the statement that reaches the distributed wrap (after it for
post-wrap). LibCST only performs the edit, matching statements to the
ledger's line numbers through `PositionProvider`; everything else reprints byte
for byte (LibCST is lossless).
"""

from __future__ import annotations

import keyword
import re
import sys
from dataclasses import dataclass, field
from typing import Mapping

import libcst as cst
from libcst.codemod import CodemodContext
from libcst.codemod.visitors import AddImportsVisitor
from libcst.metadata import CodeRange, MetadataWrapper, PositionProvider

from model_compile.errors import InputError
from model_compile.ledger.models import Event, Ledger

KIT_SUFFIX = "ModelKit"
# Steps the compile block must follow (the ledger's event kinds).
PRE_COMPILE = ("build", "patch", "freeze", "upcast", "checkpointing")
STRIP_KINDS = ("compile", "graph_break")


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


@dataclass
class EngineResult:
    code: str
    notes: list[str] = field(default_factory=list)
    model_var: str = "model"
    wrapped_var: str | None = None
    kit_attr: str | None = None


# -- the ledger, read as source lines -----------------------------------------
Positions = Mapping[cst.CSTNode, CodeRange]


def positions(module: cst.Module) -> Positions:
    """1-based line spans of the module's own nodes (the ledger's `ast` lines agree)."""
    return MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)


def _span(node: cst.CSTNode, pos: Positions) -> tuple[int, int]:
    r = pos[node]
    return r.start.line, r.end.line


def _index_at(body, line: int, pos: Positions) -> int | None:
    """Index of the statement of `body` whose span holds `line`."""
    for i, s in enumerate(body):
        lo, hi = _span(s, pos)
        if lo <= line <= hi:
            return i
    return None


def _helper_name(via: str) -> str:
    m = re.match(r"\s*([\w.]+)\s*\(", via)
    return f"{m.group(1)}()" if m else via


@dataclass
class _Where:
    """What one ledger says about prepare_model(), as lines of the engine file."""

    strip: set[int]  # lines of compile/graph_break events in prepare_model's own body
    others: set[int]  # lines of every other event there (never removed)
    wrap: Event | None  # the wrap the block goes before (after, for post-wrap)
    wrap_note: str | None  # why no wrap was chosen although the ledger has one
    model_var: str
    early_wrap: Event | None = None  # a wrap that comes before the last build/freeze ... step
    last_step: Event | None = None  # that last step

    @classmethod
    def of(cls, ledger: Ledger, fn: cst.FunctionDef, pos: Positions, filename: str, recipe_rel: str = "") -> "_Where":
        own = [e for e in ledger.events if not e.via and e.file == ledger.file]
        _refuse_helper_compiles(ledger, filename, recipe_rel)
        pre = [i for i, e in enumerate(ledger.events) if e.reachable and e.kind in PRE_COMPILE]
        after = pre[-1] if pre else -1
        wraps = [e for e in ledger.events[after + 1 :] if e.kind == "wrap" and e.reachable]
        wrap = wraps[0] if wraps else None
        note = early = None
        if wrap is None:
            early = next((e for e in ledger.events if e.kind == "wrap" and e.reachable), None)
            if early is not None:
                note = (
                    f"the distributed wrap (line {early.anchor_line}) comes before the last "
                    f"{ledger.events[after].kind} step (line {ledger.events[after].anchor_line})"
                )
        return cls(
            strip={e.line for e in own if e.kind in STRIP_KINDS},
            others={e.line for e in own if e.kind not in STRIP_KINDS},
            wrap=wrap,
            wrap_note=note,
            model_var=_model_var(wrap, [ledger.events[i] for i in pre], fn, pos),
            early_wrap=early,
            last_step=ledger.events[after] if pre else None,
        )

    def anchor_index(self, body, pos: Positions) -> int | None:
        """Index in prepare_model's (original) body of the statement reaching the wrap."""
        if self.wrap is None or self.wrap.anchor_line is None:
            return None
        return _index_at(body, self.wrap.anchor_line, pos)

    def post_wrap_index(self, body, pos: Positions) -> int | None:
        """Where a post-wrap compile follows: the wrap, or the last step when that runs after the wrap."""
        if self.wrap is not None:
            return self.anchor_index(body, pos)
        if self.early_wrap is None or self.last_step is None or self.last_step.anchor_line is None:
            return None
        return _index_at(body, self.last_step.anchor_line, pos)


def _refuse_helper_compiles(ledger: Ledger, filename: str, recipe_rel: str) -> None:
    """A compile reached through a helper cannot be replaced by one block in prepare_model()."""
    for e in ledger.of("compile"):
        if not e.via:
            continue
        where = f"{recipe_rel}/{e.file}" if recipe_rel else e.file
        chain = f" (through {' -> '.join(_helper_name(v) for v in e.via)})" if len(e.via) > 1 else ""
        raise InputError(
            f"{filename}: {_helper_name(e.via[0])} called from prepare_model() (line {e.anchor_line}) "
            f"compiles the model{chain}: `{e.call}` at {where}:{e.line}; move that compile into "
            "prepare_model() first (cannot place one block unambiguously)"
        )


def _is_name(target: str | None) -> bool:
    """A plain variable (not `self.model`, `each of ...`, nor a constant such as `False`)."""
    return bool(target) and target.isidentifier() and not keyword.iskeyword(target)


def _model_var(wrap: Event | None, pre: list[Event], fn: cst.FunctionDef, pos: Positions) -> str:
    """The wrap's target, else the target of the last step before the compile, else `model`."""
    if wrap is not None and _is_name(wrap.target):
        return wrap.target
    body = list(fn.body.body)
    for e in reversed(pre):
        if _is_name(e.target):
            return e.target
        if e.kind == "build" and e.anchor_line is not None:  # `model = build_model(...)`
            i = _index_at(body, e.anchor_line, pos)
            name = _assigned_name(body[i]) if i is not None else None
            if name:
                return name
    return "model"


# -- removing the existing compile statements ---------------------------------
@dataclass
class _Strip:
    where: _Where
    pos: Positions
    module: cst.Module
    filename: str
    removed: int = 0

    def hits(self, node: cst.CSTNode) -> bool:
        """True when the node holds a compile/graph_break event; refuses a line mixing it with other steps."""
        lo, hi = _span(node, self.pos)
        if not any(lo <= ln <= hi for ln in self.where.strip):
            return False
        if any(lo <= ln <= hi for ln in self.where.others):
            raise InputError(
                f"{self.filename}: line {lo}: `{self.module.code_for_node(node).strip().splitlines()[0]}` "
                "compiles and does another step of prepare_model() in one statement; split it first"
            )
        return True

    def holds_other(self, node: cst.CSTNode) -> bool:
        """Does this (original) node hold an event other than compile/graph_break?"""
        lo, hi = _span(node, self.pos)
        return any(lo <= ln <= hi for ln in self.where.others)


def _strip_block(stmts, acc: _Strip) -> tuple[list, list[int]]:
    """Statements left after removing compile statements, and each one's index in `stmts`."""
    out, origin = [], []
    for i, s in enumerate(stmts):
        if isinstance(s, cst.SimpleStatementLine) and acc.hits(s):
            acc.removed += 1
            continue
        if isinstance(s, (cst.If, cst.For, cst.While, cst.With)):
            new = _strip_compound(s, acc)
            if new is None:
                continue
            s = new
        out.append(s)
        origin.append(i)
    return out, origin


def _strip_compound(s, acc: _Strip):
    before = acc.removed
    if not isinstance(s.body, cst.IndentedBlock):
        if acc.hits(s.body):
            acc.removed += 1
            if getattr(s, "orelse", None) is None:
                return None
        return s
    body, _ = _strip_block(s.body.body, acc)
    orelse = getattr(s, "orelse", None)
    if isinstance(orelse, cst.Else) and isinstance(orelse.body, cst.IndentedBlock):
        else_body, _ = _strip_block(orelse.body.body, acc)
        orelse = orelse.with_changes(body=orelse.body.with_changes(body=else_body)) if else_body else None
    elif isinstance(orelse, cst.If):
        orelse = _strip_compound(orelse, acc)
    if acc.removed == before:
        return s
    test = acc.module.code_for_node(s.test) if isinstance(s, (cst.If, cst.While)) else ""
    # A block gated on the compile config (or emptied by the removal) goes as a whole,
    # unless it also does another step (a wrap, a freeze ...) that must stay.
    if orelse is None and (not body or ("compile" in test and not acc.holds_other(s))):
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


def _ledger_for(cls: cst.ClassDef, ledgers: Mapping[str, Ledger], filename: str) -> Ledger:
    ledger = ledgers.get(cls.name.value)
    if ledger is None:
        raise InputError(
            f"{filename}: the static analysis has no ledger for {cls.name.value}.prepare_model() "
            "(it reads the recipe's engine/*.py); cannot tell where the compile goes"
        )
    return ledger


def facts(module: cst.Module, ledgers: Mapping[str, Ledger], filename: str = "engine", recipe_rel: str = "") -> dict:
    """model_var / wrapped_var / kit_attr / config class of the first engine class (for rendering).

    `ledgers`: the ledger of each engine class of this file, by class name.
    """
    classes = engine_classes(module)
    if not classes:
        raise InputError("no class with prepare_model() in the engine file")
    cls = classes[0]
    _, fn = _find_method(cls, "prepare_model")
    pos = positions(module)
    where = _Where.of(_ledger_for(cls, ledgers, filename), fn, pos, filename, recipe_rel)
    wrapped = None
    wrap = where.wrap or where.early_wrap
    if wrap is not None and wrap.anchor_line is not None and isinstance(fn.body, cst.IndentedBlock):
        wi = _index_at(list(fn.body.body), wrap.anchor_line, pos)
        wrapped = _assigned_name(fn.body.body[wi]) if wi is not None else None
    config_class = None
    for s in cls.body.body:
        if isinstance(s, cst.SimpleStatementLine):
            for small in s.body:
                if isinstance(small, cst.Assign) and dotted(small.targets[0].target) == "ConfigClass":
                    config_class = dotted(small.value)
    return {
        "model_var": where.model_var,
        "wrapped_var": wrapped,
        "has_wrap": where.wrap is not None,
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
    ledgers: Mapping[str, Ledger],
    path_kind: str,
    block: str,
    model_var: str,
    kit_init: str | None = None,
    kit_attr_stmt: str | None = None,
    kit_import: tuple[str, str] | None = None,
    need_torch: bool = False,
    filename: str = "engine",
    recipe_rel: str = "",
) -> EngineResult:
    """Return the new engine source with exactly one compile block in prepare_model().

    `ledgers`: the ledger of each engine class of `source`, by class name, built
    from this same text (its line numbers locate the statements). `recipe_rel`:
    the recipe folder as shown in messages (ledger paths are relative to it).
    """
    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError as exc:
        raise InputError(f"{filename}: cannot parse ({exc.message} at line {exc.raw_line})") from exc
    classes = engine_classes(module)
    if not classes:
        raise InputError(f"{filename}: no class with prepare_model()")
    pos = positions(module)
    notes: list[str] = []
    new_body = list(module.body)
    for cls in classes:
        idx = new_body.index(cls)
        ledger = _ledger_for(cls, ledgers, filename)
        new_body[idx] = _edit_class(
            cls, module, pos, ledger, path_kind, block, model_var, kit_init, kit_attr_stmt, notes, filename, recipe_rel
        )
    module = module.with_changes(body=new_body)
    if kit_import:
        module = add_from_import(module, kit_import[0], kit_import[1])
    if need_torch:
        ctx = CodemodContext()
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


def _edit_class(cls, module, pos, ledger, path_kind, block, model_var, kit_init, kit_attr_stmt, notes, filename, recipe_rel):
    i_fn, fn = _find_method(cls, "prepare_model")
    if not isinstance(fn.body, cst.IndentedBlock):
        raise InputError(f"{filename}: prepare_model() body is on one line; cannot place a block")
    name = cls.name.value
    where = _Where.of(ledger, fn, pos, filename, recipe_rel)
    original = list(fn.body.body)
    anchor = where.post_wrap_index(original, pos) if path_kind == "post-wrap" else where.anchor_index(original, pos)
    strip = _Strip(where, pos, module, filename)
    body, origin = _strip_block(original, strip)
    if strip.removed:
        notes.append(f"{name}.prepare_model: replaced {strip.removed} existing compile statement(s)")
    wi = origin.index(anchor) if anchor is not None and anchor in origin else None
    if anchor is not None and wi is None:  # cannot happen: a statement with a wrap is never removed
        raise InputError(f"{filename}: the distributed wrap of {name}.prepare_model() sits in a compile statement")
    via = f" (inside {_helper_name(where.wrap.via[0])})" if where.wrap is not None and where.wrap.via else ""
    block_stmts = _parse_statements(block, f"compile/{path_kind}.py.j2")
    block_stmts[0] = block_stmts[0].with_changes(leading_lines=[cst.EmptyLine(indent=False)])
    if path_kind == "post-wrap":
        if wi is None:
            raise InputError(f"{filename}: post-wrap needs a distributed wrap in prepare_model(); none found")
        if where.wrap is None:  # the wrap comes before the last build/freeze step: compile after both
            via = f" and the {where.last_step.kind} step after it"
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
            notes.append(f"{name}.prepare_model: split the wrapping return into assignment, compile, return")
        else:
            body[wi + 1 : wi + 1] = block_stmts
            after = wi + 1 + len(block_stmts)
            if after < len(body):
                body[after] = _blank(body[after])
            notes.append(f"{name}.prepare_model: compile placed after the distributed wrap{via} (line {_line(module, fn, wrap)})")
    else:
        if wi is None:
            last = body[-1] if body else None
            wi = len(body) - 1 if last is not None and _return_of(last) is not None else len(body)
            if where.wrap_note:
                notes.append(
                    f"{name}.prepare_model: {where.wrap_note}; block placed before the return "
                    "(move that step before the wrap, or use --path post-wrap)"
                )
            else:
                notes.append(f"{name}.prepare_model: no distributed wrap found; block placed before the return")
        else:
            notes.append(f"{name}.prepare_model: block placed before the distributed wrap{via}")
            late = _steps_inside_wrap_helper(ledger, where.wrap)
            if late:
                notes.append(
                    f"{name}.prepare_model: {_helper_name(where.wrap.via[0])} also does {', '.join(late)} "
                    "before it wraps; the compile block precedes the whole call"
                )
        body[wi:wi] = block_stmts
        after = wi + len(block_stmts)
        if after < len(body):
            body[after] = _blank(body[after])
    for e in ledger.of("graph_break"):
        if e.via:
            notes.append(
                f"{name}.prepare_model: {_helper_name(e.via[0])} (line {e.anchor_line}) also disables compile "
                f"(`{e.call}`); left as it is"
            )
    fn = fn.with_changes(body=fn.body.with_changes(body=body))
    cls_body = list(cls.body.body)
    cls_body[i_fn] = fn
    if kit_attr_stmt is not None or kit_init is not None:
        cls_body = _add_kit(cls_body, kit_init, kit_attr_stmt, notes, name)
    return cls.with_changes(body=cls.body.with_changes(body=cls_body))


def _steps_inside_wrap_helper(ledger: Ledger, wrap: Event | None) -> list[str]:
    """Build/freeze/... steps the helper holding the wrap does before wrapping (they end up after the block)."""
    if wrap is None or not wrap.via:
        return []
    i = ledger.events.index(wrap)
    return sorted(
        {e.kind for e in ledger.events[:i] if e.reachable and e.kind in PRE_COMPILE and e.anchor_line == wrap.anchor_line}
    )


def _line(module, fn, stmt) -> str:
    return module.code_for_node(stmt).strip().splitlines()[0]


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

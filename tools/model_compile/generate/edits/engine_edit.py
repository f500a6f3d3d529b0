"""LibCST edit of the engine: one gated compile block in prepare_model().

What to change comes from the ledger (`model_compile.ledger`), the package's
one static model of `prepare_model()`: the statements holding its `compile` and
`graph_break` events are removed (`strip`), and one block rendered from a
template is inserted before the statement that reaches the distributed wrap
(after it for post-wrap; `placement`). LibCST only performs the edit, matching
statements to the ledger's line numbers through `PositionProvider`; everything
else reprints byte for byte (LibCST is lossless).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import libcst as cst

from model_compile.errors import InputError
from model_compile.generate.edits.cst_util import (
    Positions,
    assigned_name,
    blank,
    call_names,
    dotted,
    find_method,
    first_line,
    index_at,
    parse_statements,
    positions,
    return_of,
)
from model_compile.generate.edits.imports import add_from_import, add_import
from model_compile.generate.edits.placement import Where, helper_name, steps_inside_wrap_helper
from model_compile.generate.edits.strip import Strip, strip_block
from model_compile.ledger.models import Ledger

KIT_SUFFIX = "ModelKit"


@dataclass
class EngineResult:
    code: str
    notes: list[str] = field(default_factory=list)
    model_var: str = "model"
    wrapped_var: str | None = None
    kit_attr: str | None = None


@dataclass(frozen=True)
class EngineFacts:
    """What the first engine class of a file says for rendering the compile block and config."""

    model_var: str  # the model variable of prepare_model() the block compiles
    wrapped_var: str | None  # the variable the distributed wrap assigns, if it assigns one
    has_wrap: bool  # a wrap follows the last build/freeze ... step
    kit_attr: str | None  # `self.<attr>` holding the model kit, if the class has one
    class_name: str
    config_class: str | None  # the class's `ConfigClass = ...`, if set


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
    """The module's top-level classes that define prepare_model()."""
    return [s for s in module.body if isinstance(s, cst.ClassDef) and find_method(s, "prepare_model")]


def _prepare_model(cls: cst.ClassDef) -> tuple[int, cst.FunctionDef]:
    """Index in the class body and node of prepare_model(), for a class engine_classes() returned."""
    found = find_method(cls, "prepare_model")
    assert found is not None, "engine_classes() only returns classes that define prepare_model()"
    return found


def _ledger_for(cls: cst.ClassDef, ledgers: Mapping[str, Ledger], filename: str) -> Ledger:
    ledger = ledgers.get(cls.name.value)
    if ledger is None:
        raise InputError(
            f"{filename}: the static analysis has no ledger for {cls.name.value}.prepare_model() "
            "(it reads the recipe's engine/*.py); cannot tell where the compile goes"
        )
    return ledger


def facts(
    module: cst.Module, ledgers: Mapping[str, Ledger], filename: str = "engine", recipe_rel: str = ""
) -> EngineFacts:
    """model_var / wrapped_var / kit_attr / config class of the first engine class (for rendering).

    `ledgers`: the ledger of each engine class of this file, by class name.
    """
    classes = engine_classes(module)
    if not classes:
        raise InputError("no class with prepare_model() in the engine file")
    cls = classes[0]
    _, fn = _prepare_model(cls)
    pos = positions(module)
    where = Where.of(_ledger_for(cls, ledgers, filename), fn, pos, filename, recipe_rel)
    wrapped = None
    wrap = where.wrap or where.early_wrap
    if wrap is not None and wrap.anchor_line is not None and isinstance(fn.body, cst.IndentedBlock):
        wi = index_at(list(fn.body.body), wrap.anchor_line, pos)
        wrapped = assigned_name(fn.body.body[wi]) if wi is not None else None
    config_class = None
    for s in cls.body.body:
        if isinstance(s, cst.SimpleStatementLine):
            for small in s.body:
                if isinstance(small, cst.Assign) and dotted(small.targets[0].target) == "ConfigClass":
                    config_class = dotted(small.value)
    return EngineFacts(
        model_var=where.model_var,
        wrapped_var=wrapped,
        has_wrap=where.wrap is not None,
        kit_attr=find_kit_attr(cls),
        class_name=cls.name.value,
        config_class=config_class,
    )


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
        module = add_import(module, "torch")
    return EngineResult(code=module.code, notes=notes, model_var=model_var)


def _edit_class(
    cls: cst.ClassDef,
    module: cst.Module,
    pos: Positions,
    ledger: Ledger,
    path_kind: str,
    block: str,
    model_var: str,
    kit_init: str | None,
    kit_attr_stmt: str | None,
    notes: list[str],
    filename: str,
    recipe_rel: str,
) -> cst.ClassDef:
    i_fn, fn = _prepare_model(cls)
    if not isinstance(fn.body, cst.IndentedBlock):
        raise InputError(f"{filename}: prepare_model() body is on one line; cannot place a block")
    name = cls.name.value
    where = Where.of(ledger, fn, pos, filename, recipe_rel)
    original = list(fn.body.body)
    anchor = where.post_wrap_index(original, pos) if path_kind == "post-wrap" else where.anchor_index(original, pos)
    strip = Strip(where, pos, module, filename)
    body, origin = strip_block(original, strip)
    if strip.removed:
        notes.append(f"{name}.prepare_model: replaced {strip.removed} existing compile statement(s)")
    wi = origin.index(anchor) if anchor is not None and anchor in origin else None
    if anchor is not None and wi is None:  # cannot happen: a statement with a wrap is never removed
        raise InputError(f"{filename}: the distributed wrap of {name}.prepare_model() sits in a compile statement")
    via = f" (inside {helper_name(where.wrap.via[0])})" if where.wrap is not None and where.wrap.via else ""
    block_stmts = parse_statements(block, f"compile/{path_kind}.py.j2")
    # the block takes the place of the compile it replaces with that statement's own spacing (a blank line only
    # where the replaced statement had one); a new block gets one blank line before it
    kept = set(origin)
    replaced = next((original[i] for i in range(len(original)) if i not in kept), None)
    lead = (
        [line for line in replaced.leading_lines if line.comment is None][:1]  # its spacing, not its comments
        if isinstance(replaced, (cst.SimpleStatementLine, cst.BaseCompoundStatement))
        else None
    )
    block_stmts[0] = block_stmts[0].with_changes(
        leading_lines=lead if lead is not None else [cst.EmptyLine(indent=False)]
    )
    if path_kind == "post-wrap":
        if wi is None:
            raise InputError(f"{filename}: post-wrap needs a distributed wrap in prepare_model(); none found")
        if where.wrap is None:  # the wrap comes before the last build/freeze step: compile after both
            assert where.last_step is not None  # post_wrap_index() found the anchor through it
            via = f" and the {where.last_step.kind} step after it"
        wrap = body[wi]
        ret = return_of(wrap)
        if isinstance(wrap, cst.SimpleStatementLine) and ret is not None and ret.value is not None:
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
                body[after] = blank(body[after])
            notes.append(
                f"{name}.prepare_model: compile placed after the distributed wrap{via} (line {first_line(module, wrap)})"
            )
    else:
        if wi is None:
            last = body[-1] if body else None
            wi = len(body) - 1 if last is not None and return_of(last) is not None else len(body)
            if where.wrap_note:
                notes.append(
                    f"{name}.prepare_model: {where.wrap_note}; block placed before the return "
                    "(move that step before the wrap, or use --path post-wrap)"
                )
            else:
                notes.append(f"{name}.prepare_model: no distributed wrap found; block placed before the return")
        else:
            notes.append(f"{name}.prepare_model: block placed before the distributed wrap{via}")
            late = steps_inside_wrap_helper(ledger, where.wrap)
            if late and where.wrap is not None:  # late is empty without a wrap
                notes.append(
                    f"{name}.prepare_model: {helper_name(where.wrap.via[0])} also does {', '.join(late)} "
                    "before it wraps; the compile block precedes the whole call"
                )
        body[wi:wi] = block_stmts
        after = wi + len(block_stmts)
        if after < len(body):
            body[after] = blank(body[after])
    for e in ledger.of("graph_break"):
        if e.via:
            notes.append(
                f"{name}.prepare_model: {helper_name(e.via[0])} (line {e.anchor_line}) also disables compile "
                f"(`{e.call}`); left as it is"
            )
    fn = fn.with_changes(body=fn.body.with_changes(body=body))
    cls_body: list[cst.BaseStatement | cst.BaseSmallStatement] = list(cls.body.body)
    cls_body[i_fn] = fn
    if kit_attr_stmt is not None or kit_init is not None:
        cls_body = _add_kit(cls_body, kit_init, kit_attr_stmt, notes, name)
    return cls.with_changes(body=cls.body.with_changes(body=cls_body))


def _add_kit(
    cls_body: list[cst.BaseStatement | cst.BaseSmallStatement],
    kit_init: str | None,
    kit_attr_stmt: str | None,
    notes: list[str],
    cls_name: str,
) -> list[cst.BaseStatement | cst.BaseSmallStatement]:
    found: tuple[int, cst.FunctionDef] | None = None
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
        new = parse_statements(kit_attr_stmt, "compile/kit_attr.py.j2")
        stmts[pos:pos] = new
        cls_body[i] = init.with_changes(body=init.body.with_changes(body=stmts))
        notes.append(f"{cls_name}.__init__: added the model kit instance")
        return cls_body
    if kit_init is None:
        raise InputError(f"{cls_name}: no __init__ to add the model kit to")
    new_init = parse_statements(kit_init, "compile/kit_init.py.j2")[0]
    new_init = new_init.with_changes(leading_lines=[cst.EmptyLine(indent=False)])
    first_fn = next((i for i, s in enumerate(cls_body) if isinstance(s, cst.FunctionDef)), len(cls_body))
    cls_body.insert(first_fn, new_init)
    if first_fn + 1 < len(cls_body):
        cls_body[first_fn + 1] = blank(cls_body[first_fn + 1])
    notes.append(f"{cls_name}: created __init__ calling super().__init__(config) with the model kit")
    return cls_body

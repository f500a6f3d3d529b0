"""Build the ledger of a `prepare_model()` by walking its AST.

A small abstract interpreter: it follows statements in order through
if/else arms, loops, early returns, local aliases (`cfg =
self.config.model.compile`), reassignments of the model, and calls into
methods of the same class and functions of the same recipe (depth-limited).
It tracks which model object each name holds, so a compile applied to a copy
or to a model rebuilt afterwards can be told apart from the returned one.
Nothing is imported or executed.
"""

from __future__ import annotations

import ast
import itertools
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from model_compile.ledger.aliases import (
    Ctx,
    Frame,
    aliasable,
    getattr_as_attribute,
    identity,
    is_false,
    is_new_object,
    negate,
    resolve,
    root_key,
    root_name,
    target_names,
    truth_of,
)
from model_compile.ledger.calls import calls_in_order, first_arg, looks_like_function
from model_compile.ledger.classify import classify_call, is_graph_break_decorator
from model_compile.ledger.models import Branch, Event, EventKind, Ledger
from model_compile.parse.python import PyModule, dotted, unparse

MAX_DEPTH = 4
_ASSIGNS = frozenset({ast.Assign, ast.AnnAssign, ast.AugAssign})
FunctionDef = (ast.FunctionDef, ast.AsyncFunctionDef)
if sys.version_info >= (3, 11):  # `try: ... except* ...`
    _TRY_NODES = (ast.Try, ast.TryStar)
else:
    _TRY_NODES = (ast.Try,)


@dataclass
class Callable_:
    """A function the walker can step into."""

    node: ast.FunctionDef | ast.AsyncFunctionDef
    module: PyModule
    is_method: bool


@dataclass
class _Rest:
    """What the statements after `if test: return ...` run under: `not test`, in the if's else arm."""

    test: ast.expr
    branch: Branch


# Resolves a bare function name used in a module to its definition in the recipe.
Resolver = Callable[[PyModule, str], "Callable_ | None"]


class LedgerBuilder:
    """Walk one engine class's prepare_model into a Ledger."""

    def __init__(self, cls: ast.ClassDef, module: PyModule, methods: dict[str, Callable_], resolver: Resolver):
        self.cls = cls
        self.module = module
        self.methods = methods
        self.resolver = resolver
        self.events: list[Event] = []
        self.notes: list[str] = []
        self._ids = itertools.count(1)
        self._stack: list[ast.AST] = []

    # -- entry -------------------------------------------------------------
    def build(self) -> Ledger:
        pm = self.methods["prepare_model"]
        frame = Frame(module=pm.module)
        self._stack.append(pm.node)
        self._block(pm.node.body, frame, Ctx(), top=True)
        self._stack.pop()
        returned = next((r for r in frame.returned if r is not None), None)
        return Ledger(
            engine_class=self.cls.name,
            file=pm.module.path,
            line=pm.node.lineno,
            events=self.events,
            returned_identity=returned,
            notes=self.notes,
        )

    # -- expressions -------------------------------------------------------
    def text(self, expr: ast.expr, frame: Frame) -> str:
        resolved = resolve(expr, frame)
        root = root_name(resolved)
        out = unparse(resolved)
        if root in frame.loops:
            rest = out[len(root) :]
            if re.match(r"\.[A-Za-z_]", rest) and not frame.loops[root].startswith("each of "):
                # `for layer in X: layer.self_attn.compile()`: that submodule of each block, `X.*.self_attn`
                attribute = re.match(r"(?:\.[A-Za-z_]\w*)+", rest)
                assert attribute is not None
                tail = rest[attribute.end() :]
                return f"{frame.loops[root]}.*{attribute.group(0)}{tail}"
            return f"each of {frame.loops[root]}{rest}"
        return out

    # -- statements --------------------------------------------------------
    def _block(self, body: list[ast.stmt], frame: Frame, ctx: Ctx, top: bool = False) -> bool:
        """Walk statements; True when the block always ends in return/raise."""
        for stmt in body:
            sctx = ctx.but(anchor=stmt.lineno) if top else ctx
            ended = self._stmt(stmt, frame, sctx)
            if ended == "return":
                rest = body[body.index(stmt) + 1 :]
                if rest:
                    dead = ctx.but(reachable=False)
                    for s in rest:
                        self._stmt(s, frame, dead.but(anchor=s.lineno) if top else dead)
                return True
            if isinstance(ended, _Rest):  # early return under `if`: the rest runs under `not test`, in its else arm
                ctx = ctx.but(
                    conditions=ctx.conditions + (unparse(ended.test),), branches=ctx.branches + (ended.branch,)
                )
        return False

    def _stmt(self, stmt: ast.stmt, frame: Frame, ctx: Ctx) -> Literal["return"] | _Rest | None:
        """Walk one statement: "return" when it always ends the block, a test the rest runs under, else None."""
        kind = type(stmt)
        if kind in _ASSIGNS:  # the commonest statements first, by exact type
            self._assign(stmt, frame, ctx)  # type: ignore[arg-type]
            return None
        if kind is ast.Expr:
            self._expr(stmt.value, frame, ctx)  # type: ignore[attr-defined]
            return None
        if kind is ast.If:
            return self._if(stmt, frame, ctx)  # type: ignore[arg-type]
        if isinstance(stmt, (ast.Return, ast.Raise)):
            value = stmt.value if isinstance(stmt, ast.Return) else stmt.exc
            if value is not None:
                self._expr(value, frame, ctx)
            if isinstance(stmt, ast.Return):
                ident = identity(stmt.value, frame) if stmt.value is not None else None
                if ctx.reachable:
                    frame.returned.append(ident)
                if ctx.depth == 0 and stmt.value is not None:
                    self._event("return", stmt, frame, ctx, call=frame.module.segment(stmt), target_expr=stmt.value)
            return "return"
        if isinstance(stmt, (ast.For, ast.AsyncFor)):
            self._expr(stmt.iter, frame, ctx)
            loop_ctx = ctx.but(branches=ctx.branches + (Branch(node=f"{frame.module.path}:{stmt.lineno}", arm="loop"),))
            saved = dict(frame.loops)
            for name in target_names(stmt.target):
                frame.loops[name] = self.text(stmt.iter, frame)
            self._block(stmt.body, frame, loop_ctx)
            frame.loops = saved
            self._block(stmt.orelse, frame, ctx)
            return None
        if isinstance(stmt, ast.While):
            self._expr(stmt.test, frame, ctx)
            self._block(
                stmt.body,
                frame,
                ctx.but(branches=ctx.branches + (Branch(node=f"{frame.module.path}:{stmt.lineno}", arm="loop"),)),
            )
            return None
        if isinstance(stmt, (ast.With, ast.AsyncWith)):
            for item in stmt.items:
                self._expr(item.context_expr, frame, ctx)
            return "return" if self._block(stmt.body, frame, ctx) else None
        if isinstance(stmt, _TRY_NODES):
            ended = self._block(stmt.body, frame, ctx)
            for h in stmt.handlers:
                self._block(
                    h.body,
                    frame,
                    ctx.but(branches=ctx.branches + (Branch(node=f"{frame.module.path}:{h.lineno}", arm="else"),)),
                )
            self._block(stmt.orelse, frame, ctx)
            self._block(stmt.finalbody, frame, ctx)
            return "return" if ended and not stmt.handlers else None
        if isinstance(stmt, ast.Match):
            for case in stmt.cases:
                self._block(
                    case.body,
                    frame,
                    ctx.but(branches=ctx.branches + (Branch(node=f"{frame.module.path}:{stmt.lineno}", arm="else"),)),
                )
            return None
        if isinstance(stmt, FunctionDef):
            for dec in stmt.decorator_list:
                if is_graph_break_decorator(dec):
                    self._event(
                        "graph_break",
                        dec,
                        frame,
                        ctx,
                        call=f"@{unparse(dec)} def {stmt.name}",
                        target_text=stmt.name,
                    )
            return None
        return None

    def _if(self, stmt: ast.If, frame: Frame, ctx: Ctx) -> Literal["return"] | _Rest | None:
        self._expr(stmt.test, frame, ctx)
        test = resolve(stmt.test, frame)
        node = f"{frame.module.path}:{stmt.lineno}"
        then_branch = Branch(node=node, arm="then")
        then_ctx = ctx.but(
            conditions=ctx.conditions + (unparse(test),),
            branches=ctx.branches + (then_branch,),
            reachable=ctx.reachable and not is_false(stmt.test),
        )
        then_frame_models = dict(frame.models)
        then_ends = self._block(stmt.body, frame, then_ctx)
        after_then = frame.models
        frame.models = then_frame_models if then_ends else dict(after_then)
        else_ends = False
        if stmt.orelse or then_ends:  # the else arm's test and branch, made only where something runs in it
            not_test, else_branch = negate(test), Branch(node=node, arm="else")
            if stmt.orelse:
                else_ctx = ctx.but(
                    conditions=ctx.conditions + (unparse(not_test),), branches=ctx.branches + (else_branch,)
                )
                else_ends = self._block(stmt.orelse, frame, else_ctx)
        if then_ends and else_ends:
            return "return"
        if then_ends and not stmt.orelse:
            # The rest of the block runs only when the test is false: it is the `if`'s else arm, so
            # steps there never share a path with the returning arm's steps.
            return _Rest(test=not_test, branch=else_branch)
        if not then_ends:
            frame.models = {**frame.models, **after_then}
        if else_ends:  # `if test: ... else: return ...`: the rest is the then arm
            return _Rest(test=test, branch=then_branch)
        return None

    def _assign(self, stmt: ast.Assign | ast.AnnAssign | ast.AugAssign, frame: Frame, ctx: Ctx) -> None:
        value = stmt.value
        if value is None:
            return
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        self._expr(value, frame, ctx, result_kept=True, stored_into=targets)
        for target in targets:
            self._statement_events(target, value, frame, ctx)
        if isinstance(stmt, ast.AugAssign):
            return
        new = is_new_object(value)
        ident = next(self._ids) if new else identity(value, frame, known_not_new=True)
        for target in targets:
            key = dotted(target)
            if key is None:
                continue
            if isinstance(target, ast.Name):
                frame.aliases.pop(target.id, None)
                ref = (
                    getattr_as_attribute(value) or truth_of(value) or value
                )  # `use = bool(cfg.enabled)`: use is cfg.enabled
                if ident is None and aliasable(ref):
                    resolved = resolve(ref, frame)
                    if not any(isinstance(n, ast.Name) and n.id == target.id for n in ast.walk(resolved)):
                        frame.aliases[target.id] = resolved  # `x = x.y` would alias x to itself
            if ident is not None:
                frame.models[key] = ident
            else:
                frame.models.pop(key, None)

    def _statement_events(self, target: ast.expr, value: ast.expr, frame: Frame, ctx: Ctx) -> None:
        """Freeze and upcast written as assignments."""
        if isinstance(target, ast.Attribute) and target.attr == "requires_grad":
            if isinstance(value, ast.Constant) and value.value is False:
                self._event("freeze", target, frame, ctx, call=f"{unparse(target)} = False", target_expr=target.value)
        if isinstance(target, ast.Attribute) and target.attr == "data":
            text = unparse(value)
            if any(t in text for t in (".to(", ".float(", "float32", "bfloat16", ".half(")):
                if self.events and self.events[-1].kind == "upcast" and self.events[-1].line == value.lineno:
                    self.events.pop()  # the `.to(dtype)` call on the right is this same upcast
                self._event("upcast", target, frame, ctx, call=f"{unparse(target)} = {text}", target_expr=target.value)

    def _expr(
        self, expr: ast.expr, frame: Frame, ctx: Ctx, result_kept: bool = False, stored_into: Sequence[ast.expr] = ()
    ) -> None:
        """Record the calls of an expression in evaluation order."""
        for call, kept in calls_in_order(expr, result_kept):
            self._call(call, frame, ctx, kept, stored_into if call is expr else ())

    # -- calls -------------------------------------------------------------
    def _call(self, call: ast.Call, frame: Frame, ctx: Ctx, kept: bool, stored_into: Sequence[ast.expr]) -> None:
        callee = self._local_callee(call, frame)
        if callee is not None and ctx.depth < MAX_DEPTH and callee.node not in self._stack:
            before = len(self.events)
            self._enter(callee, call, frame, ctx)
            if len(self.events) > before:
                return
        elif callee is not None and ctx.depth >= MAX_DEPTH:
            self.notes.append(f"not followed (depth limit): {frame.module.segment(call)}")
        kind, facts = classify_call(call)
        if kind is None:
            return
        extra: dict[str, Any] = {}
        if kind == "compile":
            style = facts.get("style")
            if facts.get("kit"):
                extra["compile_style"] = "kit"
                target = first_arg(call, "model")
            elif style == "inplace":
                assert isinstance(call.func, ast.Attribute)  # classify_call: `<module>.compile(...)`
                extra["compile_style"] = "inplace"
                target = call.func.value
            else:
                target = first_arg(call, "model")
                if target is not None and looks_like_function(target):
                    extra["compile_style"] = "function"
                    target = target.value if isinstance(target, ast.Attribute) and target.attr == "forward" else target
                else:
                    extra["compile_style"] = "wrapper"
                    extra["replaces_model"] = bool(kept or stored_into)
            if stored_into:  # `x = <compile>(...)`: where the result is kept
                extra["kept_as"] = self.text(stored_into[0], frame)
            extra["arguments"] = {k.arg: self.text(k.value, frame) for k in call.keywords if k.arg}
            self._event(kind, call, frame, ctx, target_expr=target, kit=bool(facts.get("kit")), **extra)
            return
        if kind == "graph_break":
            target = first_arg(call, "fn")
            if isinstance(target, ast.Attribute) and target.attr == "forward":
                target = target.value
            self._event(kind, call, frame, ctx, target_expr=target)
            return
        if kind == "upcast" or (kind == "build" and not facts.get("kit")):
            recv = call.func.value if isinstance(call.func, ast.Attribute) else None
            if kind == "upcast" and recv is not None and is_new_object(recv):
                return  # build(...).to(dtype=...) is part of the build
        target = None if kind == "build" else first_arg(call, "model")
        if target is not None and dotted(target) is None and not isinstance(target, ast.Subscript):
            target = None  # `x.requires_grad_(False)`: the constant is not what is acted on
        if target is None and kind != "build" and isinstance(call.func, ast.Attribute):
            target = call.func.value
        self._event(kind, call, frame, ctx, target_expr=target, kit=bool(facts.get("kit")))

    def _local_callee(self, call: ast.Call, frame: Frame) -> Callable_ | None:
        func = call.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
            return self.methods.get(func.attr)
        if isinstance(func, ast.Name):
            return self.resolver(frame.module, func.id)
        return None

    def _enter(self, callee: Callable_, call: ast.Call, frame: Frame, ctx: Ctx) -> None:
        inner = Frame(module=callee.module)
        params = [a.arg for a in callee.node.args.posonlyargs + callee.node.args.args]
        if callee.is_method and params:
            params = params[1:]
        bound: dict[str, ast.expr] = dict(zip(params, call.args, strict=False))  # defaults, *args: lengths differ
        for kw in call.keywords:
            if kw.arg:
                bound[kw.arg] = kw.value
        for name, arg in bound.items():
            ident = identity(arg, frame)
            if ident is not None:
                inner.models[name] = ident
            if aliasable(arg):
                inner.aliases[name] = resolve(arg, frame)
            elif (key := dotted(arg)) is not None and key in frame.loops:
                inner.loops[name] = frame.loops[key]
        inner.loops.update({k: v for k, v in frame.loops.items() if k not in bound})
        self._stack.append(callee.node)
        self._block(callee.node.body, inner, ctx.but(depth=ctx.depth + 1, via=ctx.via + (frame.module.segment(call),)))
        self._stack.pop()

    def _event(
        self,
        kind: EventKind,
        node: ast.AST,
        frame: Frame,
        ctx: Ctx,
        call: str | None = None,
        target_expr: ast.expr | None = None,
        target_text: str | None = None,
        kit: bool = False,
        **extra: Any,
    ) -> None:
        target = target_text
        ident = None
        if target_expr is not None:
            target = self.text(target_expr, frame)
            root = root_key(target_expr, frame)
            ident = frame.models.get(root) if root else None
            if ident is None:
                ident = identity(target_expr, frame)
        self.events.append(
            Event(
                kind=kind,
                file=frame.module.path,
                line=getattr(node, "lineno", 0),
                call=call or frame.module.segment(node),
                condition=list(ctx.conditions),
                target=target,
                via=list(ctx.via),
                anchor_line=ctx.anchor,
                reachable=ctx.reachable,
                kit=kit,
                branches=list(ctx.branches),
                model_identity=ident,
                **extra,
            )
        )

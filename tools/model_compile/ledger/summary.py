"""Derived facts of a recipe: compile path, compiled targets, placement."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from model_compile.ledger.models import Event
from model_compile.ledger.recipe import RecipeContext
from model_compile.parse.models import Documentation
from model_compile.parse.python import dotted
from model_compile.vocabulary import FALLBACK_KINDS, fallback_path

# Most specific first: a regional compile's README also talks about graph breaks.
SHAPE_PRIORITY = ("regional", "post-wrap", "submodule", "graph-break")


def is_direct(event: Event) -> bool:
    """A compile that does not go through the kit."""
    return event.kind == "compile" and event.compile_style != "kit"


def fallback_doc(ctx: RecipeContext, event: Event) -> Documentation | None:
    """The documentation that covers a direct compile: a comment at it, else the README.

    Found once per event (the compile path and MC101 both ask).
    """
    key = ("fallback_doc", id(event))  # events live as long as the context that holds this memo
    if key not in ctx.memo:
        ctx.memo[key] = _fallback_doc(ctx, event)
    return ctx.memo[key]  # type: ignore[return-value]


def _fallback_doc(ctx: RecipeContext, event: Event) -> Documentation | None:
    for kind in SHAPE_PRIORITY:
        doc = ctx.documented(kind, event.file, event.line)
        if doc is not None:
            return doc
    shapes = code_shapes(ctx, event)
    readme = [d for d in ctx.docs if d.source == "readme" and d.kind in FALLBACK_KINDS]
    # Prefer the kind the code implements; a README names several words.
    for kind in SHAPE_PRIORITY:
        for d in readme:
            if d.kind == kind and kind in shapes:
                return d
    return readme[0] if readme else None


def code_shapes(ctx: RecipeContext, event: Event) -> frozenset[str]:
    """Which fallback kinds the code of a compile event looks like (found once per event: several rules ask)."""
    key = ("code_shapes", id(event))
    if key not in ctx.memo:
        ctx.memo[key] = _code_shapes(ctx, event)
    return ctx.memo[key]  # type: ignore[return-value]


def _code_shapes(ctx: RecipeContext, event: Event) -> frozenset[str]:
    shapes: set[str] = set()
    target = event.target or ""
    if "*" in target.split("(")[0].split("."):  # `X.*.self_attn`: a submodule of each block
        shapes.update(("regional", "submodule"))
    elif target.startswith("each of") or any(b.arm == "loop" for b in event.branches):
        shapes.add("regional")
    elif "." in target.split("(")[0]:
        shapes.add("submodule")
    for ledger in ctx.ledgers:
        idx = next((i for i, e in enumerate(ledger.events) if e is event), None)
        if idx is None:
            continue
        if any(e.kind == "wrap" and e.reachable for e in ledger.events[:idx]):
            shapes.add("post-wrap")
        if any(e.kind == "graph_break" for e in ledger.events):
            shapes.add("graph-break")
    return frozenset(shapes)


def compile_path(ctx: RecipeContext) -> str:
    """kit, fallback:<kind>, direct or none."""
    events = [e for ledger in ctx.ledgers for e in ledger.events if e.kind == "compile" and e.reachable]
    if not events:
        return "none"
    direct = [e for e in events if is_direct(e)]
    if not direct:
        return "kit"
    docs = [fallback_doc(ctx, e) for e in direct]
    if any(d is None for d in docs):
        return "direct"
    return fallback_path(docs[0].kind)  # type: ignore[union-attr]


def compiled_targets(ctx: RecipeContext) -> list[str]:
    out: list[str] = []
    for ledger in ctx.ledgers:
        for e in ledger.events:
            if e.kind == "compile" and e.reachable and e.target and e.target not in out:
                out.append(e.target)
    return out


def placement(ctx: RecipeContext) -> str:
    """One line: what runs before and after the first compile."""
    for ledger in ctx.ledgers:
        events = [e for e in ledger.events if e.reachable and e.kind != "return"]
        idx = next((i for i, e in enumerate(events) if e.kind == "compile"), None)
        if idx is None:
            continue
        before = _kinds(events[:idx])
        after = _kinds(events[idx + 1 :])
        wraps = [e.call.split("(")[0] for e in events[idx + 1 :] if e.kind == "wrap"]
        text = f"{ledger.engine_class}.prepare_model: after {', '.join(before) or 'nothing'}"
        text += f"; before {', '.join(after) or 'nothing'}"
        if wraps:
            text += f" ({wraps[0]})"
        return text
    return ""


def _kinds(events: list[Event]) -> list[str]:
    out: list[str] = []
    for e in events:
        if e.kind not in out and e.kind != "compile":
            out.append(e.kind)
    return out


def _statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Every statement in `body` and in the blocks it holds (functions, branches, loops, with, try)."""
    for stmt in body:
        yield stmt
        for name in ("body", "orelse", "finalbody"):
            inner = getattr(stmt, name, None)
            if isinstance(inner, list):
                yield from _statements(inner)
        for handler in getattr(stmt, "handlers", None) or []:
            yield from _statements(handler.body)


_KIT_RECEIVER = re.compile(r"([A-Za-z_][\w.]*)\.apply_model_compile\s*\(")


def called_kits(ctx: RecipeContext) -> list[str]:
    """The kit classes whose apply_model_compile this recipe's compile reaches: the class each `self.<attr>`
    receiver is built from in the engine (`self.model_kit = LLMModelKit()`, import aliases resolved); `?` for a
    receiver whose class is not found statically (any kit may be it)."""
    built: dict[str, str] = {}
    if not any(e.compile_style == "kit" for lg in ctx.ledgers for e in lg.of("compile")):
        return []  # no kit compile: no receiver to resolve (the class walk below is the costly part)
    for cls, mod in ctx.engine_classes.values():
        aliases = {
            a.asname: a.name for n in mod.tree.body if isinstance(n, ast.ImportFrom) for a in n.names if a.asname
        }
        classes = {n.name: n for n in mod.tree.body if isinstance(n, ast.ClassDef)}
        chain, seen = [cls], set()
        while chain:  # the engine class and its bases defined in the same file
            c = chain.pop()
            if c.name in seen:
                continue
            seen.add(c.name)
            chain.extend(classes[b.id] for b in c.bases if isinstance(b, ast.Name) and b.id in classes)
            for node in _statements(c.body):  # assignments are statements: expressions need no visit
                if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and len(node.targets) == 1:
                    target, name = node.targets[0], (dotted(node.value.func) or "").rsplit(".", 1)[-1]
                    if isinstance(target, ast.Attribute) and dotted(target.value) == "self" and name:
                        built.setdefault(target.attr, aliases.get(name, name))
    out: list[str] = []
    for ledger in ctx.ledgers:
        for e in ledger.of("compile"):
            if e.compile_style != "kit":
                continue
            m = _KIT_RECEIVER.search(e.call)
            receiver = m.group(1) if m else ""
            attr = receiver.removeprefix("self.") if receiver.count(".") == 1 and receiver.startswith("self.") else ""
            name = built.get(attr, "?")
            if name not in out:
                out.append(name)
    return out

"""Where the compile block goes in prepare_model(), read from the ledger.

`Where` turns one ledger into lines of the engine file: the compile/graph_break
statements to strip, the other steps that must stay, and the distributed wrap
the block goes before (after it for post-wrap). A compile reached through a
helper is refused: one block in prepare_model() cannot replace it.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeGuard

import libcst as cst

from model_compile.errors import InputError
from model_compile.generate.edits.cst_util import Positions, assigned_name, index_at
from model_compile.ledger.models import Event, Ledger

# Steps the compile block must follow (the ledger's event kinds).
PRE_COMPILE = ("build", "patch", "freeze", "upcast", "checkpointing")
STRIP_KINDS = ("compile", "graph_break")


def helper_name(via: str) -> str:
    """`helper()` for a ledger `via` entry such as `self.helper(model)`."""
    m = re.match(r"\s*([\w.]+)\s*\(", via)
    return f"{m.group(1)}()" if m else via


@dataclass
class Where:
    """What one ledger says about prepare_model(), as lines of the engine file."""

    strip: set[int]  # lines of compile/graph_break events in prepare_model's own body
    others: set[int]  # lines of every other event there (never removed)
    wrap: Event | None  # the wrap the block goes before (after, for post-wrap)
    wrap_note: str | None  # why no wrap was chosen although the ledger has one
    model_var: str
    early_wrap: Event | None = None  # a wrap that comes before the last build/freeze ... step
    last_step: Event | None = None  # that last step

    @classmethod
    def of(cls, ledger: Ledger, fn: cst.FunctionDef, pos: Positions, filename: str, recipe_rel: str = "") -> Where:
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

    def anchor_index(self, body: Sequence[cst.CSTNode], pos: Positions) -> int | None:
        """Index in prepare_model's (original) body of the statement reaching the wrap."""
        if self.wrap is None or self.wrap.anchor_line is None:
            return None
        return index_at(body, self.wrap.anchor_line, pos)

    def post_wrap_index(self, body: Sequence[cst.CSTNode], pos: Positions) -> int | None:
        """Where a post-wrap compile follows: the wrap, or the last step when that runs after the wrap."""
        if self.wrap is not None:
            return self.anchor_index(body, pos)
        if self.early_wrap is None or self.last_step is None or self.last_step.anchor_line is None:
            return None
        return index_at(body, self.last_step.anchor_line, pos)


def _refuse_helper_compiles(ledger: Ledger, filename: str, recipe_rel: str) -> None:
    """A compile reached through a helper cannot be replaced by one block in prepare_model()."""
    for e in ledger.of("compile"):
        if not e.via:
            continue
        where = f"{recipe_rel}/{e.file}" if recipe_rel else e.file
        chain = f" (through {' -> '.join(helper_name(v) for v in e.via)})" if len(e.via) > 1 else ""
        raise InputError(
            f"{filename}: {helper_name(e.via[0])} called from prepare_model() (line {e.anchor_line}) "
            f"compiles the model{chain}: `{e.call}` at {where}:{e.line}; move that compile into "
            "prepare_model() first (cannot place one block unambiguously)"
        )


def _is_name(target: str | None) -> TypeGuard[str]:
    """A plain variable (not `self.model`, `each of ...`, nor a constant such as `False`)."""
    return target is not None and target.isidentifier() and not keyword.iskeyword(target)  # '' is no identifier


def _model_var(wrap: Event | None, pre: list[Event], fn: cst.FunctionDef, pos: Positions) -> str:
    """The wrap's target, else the target of the last step before the compile, else `model`."""
    if wrap is not None and _is_name(wrap.target):
        return wrap.target
    body = list(fn.body.body)
    for e in reversed(pre):
        if _is_name(e.target):
            return e.target
        if e.kind == "build" and e.anchor_line is not None:  # `model = build_model(...)`
            i = index_at(body, e.anchor_line, pos)
            name = assigned_name(body[i]) if i is not None else None
            if name:
                return name
    return "model"


def steps_inside_wrap_helper(ledger: Ledger, wrap: Event | None) -> list[str]:
    """Build/freeze/... steps the helper holding the wrap does before wrapping (they end up after the block)."""
    if wrap is None or not wrap.via:
        return []
    i = ledger.events.index(wrap)
    return sorted(
        {
            e.kind
            for e in ledger.events[:i]
            if e.reachable and e.kind in PRE_COMPILE and e.anchor_line == wrap.anchor_line
        }
    )

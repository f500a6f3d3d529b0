"""What gets stripped from prepare_model(): the existing compile code.

Statements holding a ledger `compile`/`graph_break` event are removed, looking
into if/for/while/with blocks; a block gated on the compile config (or emptied
by the removal) goes as a whole unless it also does another step. A statement
that mixes a compile with another step is refused.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

import libcst as cst

from model_compile.errors import InputError
from model_compile.generate.edits.cst_util import Positions, first_line, span
from model_compile.generate.edits.placement import Where

# The compound statements whose blocks are searched.
_Compound: TypeAlias = cst.If | cst.For | cst.While | cst.With


@dataclass
class Strip:
    """State of one stripping pass over prepare_model(): the ledger's lines and how many statements went."""

    where: Where
    pos: Positions
    module: cst.Module
    filename: str
    removed: int = 0

    def hits(self, node: cst.CSTNode) -> bool:
        """True when the node holds a compile/graph_break event; refuses a line mixing it with other steps."""
        lo, hi = span(node, self.pos)
        if not any(lo <= ln <= hi for ln in self.where.strip):
            return False
        if any(lo <= ln <= hi for ln in self.where.others):
            raise InputError(
                f"{self.filename}: line {lo}: `{first_line(self.module, node)}` "
                "compiles and does another step of prepare_model() in one statement; split it first"
            )
        return True

    def holds_other(self, node: cst.CSTNode) -> bool:
        """Does this (original) node hold an event other than compile/graph_break?"""
        lo, hi = span(node, self.pos)
        return any(lo <= ln <= hi for ln in self.where.others)


def strip_block(stmts: Sequence[cst.BaseStatement], acc: Strip) -> tuple[list[cst.BaseStatement], list[int]]:
    """Statements left after removing compile statements, and each one's index in `stmts`."""
    out: list[cst.BaseStatement] = []
    origin: list[int] = []
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


def _strip_compound(s: _Compound, acc: Strip) -> _Compound | None:
    """The compound statement without its compile statements, or None when it goes as a whole."""
    before = acc.removed
    if not isinstance(s.body, cst.IndentedBlock):
        if acc.hits(s.body):
            acc.removed += 1
            if getattr(s, "orelse", None) is None:
                return None
        return s
    body, _ = strip_block(s.body.body, acc)
    orelse = getattr(s, "orelse", None)
    if isinstance(orelse, cst.Else) and isinstance(orelse.body, cst.IndentedBlock):
        else_body, _ = strip_block(orelse.body.body, acc)
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
    changes: dict[str, Any] = {"body": s.body.with_changes(body=body)}
    if hasattr(s, "orelse"):
        changes["orelse"] = orelse
    return s.with_changes(**changes)

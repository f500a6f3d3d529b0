"""Why an eager region ran eager: each group of operators the compiled run counted outside compiled graphs,
resolved against dynamo's records (the trace's graph breaks and the frames it gave up on, the recompile-limit
hits) into one cause with the line to look at."""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from model_compile.hard.models import EagerCause, RehearsalFacts
from model_compile.hard.rehearsal.reading.sites import TraceScan, site_name

OUTSIDE = "(outside the model)"


def under(name: str, region: str) -> bool:
    """A collapsed module name lies in a region ("" is the whole model)."""
    return region == "" or name == region or name.startswith(region + ".")


@dataclass
class Context:
    """What a cause is resolved against."""

    repo: Path
    scan: TraceScan
    limit_frames: dict[tuple[str, str], int]  # (function, path tail:line) -> the optimizer step it hit at
    checkpointing: str = ""  # where the recipe turns checkpointing on: `file:line: call (when condition)`
    disable_sites: dict[str, str] = field(default_factory=dict)  # a documented eager region -> where it is kept eager


def _tail(path_line: str) -> str:
    """A frame's `file:line` reduced to what two spellings of it share (the path after site-packages, or the
    file name)."""
    text = path_line.replace("<site-packages>/", "site-packages/")
    return text.split("site-packages/", 1)[1] if "site-packages/" in text else text.rsplit("/", 1)[-1]


_LABEL = re.compile(r"^(?P<name>[\w<>.]+) \((?P<where>.+:\d+)\)$")
_LIMIT_FRAME = re.compile(r"function: '(?P<name>[^']+)' \((?P<where>[^)]+:\d+)\)")


def limit_frames(facts: RehearsalFacts) -> dict[tuple[str, str], int]:
    out: dict[tuple[str, str], int] = {}
    for step in facts.steps:
        for hit in step.limit_hits:
            m = _LIMIT_FRAME.search(hit)
            if m:
                out.setdefault((m["name"], _tail(m["where"])), step.step)
    return out


def _site(where: str, ctx: Context) -> str:
    return site_name(where, ctx.repo)


def _limit_step(label: str, ctx: Context) -> int | None:
    """The optimizer step at which the frame `fn (file:line)` hit the recompile limit, or None."""
    frame = _LABEL.match(label)
    if frame is None:
        return None
    name, tail = frame["name"], _tail(frame["where"])
    for (n, t), step in ctx.limit_frames.items():
        if n == name and (tail.endswith(t) or t.endswith(tail)):
            return step
    return None


def _skip_reason(label: str, ctx: Context) -> str | None:
    frame = _LABEL.match(label)
    if frame is None:
        return None
    path, _, first = frame["where"].rpartition(":")
    return ctx.scan.failed.get((frame["name"], path, int(first))) if first.isdigit() else None


def _break_in(frame_site: str, ctx: Context) -> str | None:
    """The site of the break that made dynamo skip a frame: the first break dynamo could not resume from
    (`no resume`) at or after the frame's first line in its file; None when there is none there."""
    path, _, first = frame_site.rpartition(":")
    if not first.isdigit():
        return None
    inside = []
    for brk in ctx.scan.sites:
        file, _, line = brk.site.rpartition(":")
        if file == path and line.isdigit() and int(line) >= int(first) and "no resume" in brk.reason:
            inside.append((int(line), brk.site))
    return min(inside)[1] if inside else None


def _cause(group: dict[str, Any], ctx: Context) -> tuple[str, str, str]:
    """(cause, site, kind) of one group of eager operators.

    Compile is off for a whole call when an enclosing frame turned it off: a torch.compiler.disable wrapper,
    activation checkpointing, or a frame that hit the recompile limit (dynamo then skips it and every call
    under it). The outermost of those below the innermost torch.compile entry is the cause. Otherwise the
    operator's own frame says it: dynamo skipped that frame (a graph break it could not resume from, a break
    in a loop), or the operator ran at a graph break between two graphs of a compiled frame, or no compiled
    call was on the stack at all."""
    markers = list(group.get("markers") or [])
    span = markers[: markers.index("entry")] if "entry" in markers else markers
    code = _LABEL.match(str(group.get("code") or ""))
    lines = group.get("lines") or []
    here = f"{code['where'].rsplit(':', 1)[0]}:{lines[0]}" if code and lines else (code["where"] if code else "")
    if "entry" not in markers:
        # no torch.compile entry on the stack: compile was never on for it, whatever else wraps it (a
        # checkpoint or a disable then is not why it ran eager)
        return (
            "outside every compiled call (not under a compiled target)",
            _site(here, ctx) if here else "-",
            "not-compiled",
        )
    off = [m for m in span if m.startswith(("disable:", "checkpoint:"))]
    off += [m for m in span if m.startswith("skipped:") and _limit_step(m[len("skipped:") :], ctx) is not None]
    if off:
        outer = max(off, key=span.index)
        if outer.startswith("disable:"):
            fn = _LABEL.match(outer[len("disable:") :])
            where, name = (fn["where"], fn["name"]) if fn else (outer, outer)
            applied = next((s for r, s in ctx.disable_sites.items() if under(group.get("collapsed", ""), r)), None)
            if applied:
                return (
                    f"kept eager by torch.compiler.disable on {name} (the compile path disables it)",
                    applied,
                    ("disable"),
                )
            return f"kept eager by torch.compiler.disable on {name}", _site(where, ctx), "disable"
        if outer.startswith("checkpoint:"):
            where = outer[len("checkpoint:") :]
            site = _site(where, ctx) if where != "?" else _site(here, ctx)
            hop = next((g for g in ctx.scan.sites if re.search(r"HOP|checkpoint", g.reason, re.I)), None)
            why = (
                f"; dynamo's attempt to trace it broke: {hop.reason.splitlines()[0][:100]} ({hop.site})" if hop else ""
            )
            enabled = f" (turned on at {ctx.checkpointing})" if ctx.checkpointing else ""
            fsdp = any("distributed/fsdp" in g.site for g in ctx.scan.sites)
            eager = "; FSDP2's hooks break the compiled frame at each block, so the blocks are called from eager code"
            return (
                f"activation checkpointing runs it with compile off{why}{eager if fsdp else ''}{enabled}",
                site,
                "checkpoint",
            )
        label = outer[len("skipped:") :]
        frame = _LABEL.match(label)
        name, where = (frame["name"], frame["where"]) if frame else (label, label)
        return (
            f"the recompile limit was hit in {name} at optimizer step {_limit_step(label, ctx)}: from then on it and "
            "every call under it only reuse what compiled before, and run eager when no compiled variant fits",
            _site(where, ctx),
            "recompile-limit",
        )
    kind = group.get("kind")
    if kind == "skipped" and code:
        reason = _skip_reason(str(group.get("code")), ctx)
        text = (
            f"dynamo skipped {code['name']}: {reason[:200]}"
            if reason
            else (f"dynamo ran {code['name']} as it is (skipped; no reason in the trace)")
        )
        frame_site = _site(code["where"], ctx)
        brk = _break_in(frame_site, ctx)
        if brk is None:
            return text, frame_site, "skipped-frame"
        why = f": {reason[:200]}" if reason else ""
        return (
            f"dynamo skipped {code['name']} at its break at {brk}{why} (the frame starts at {frame_site})",
            brk,
            "skipped-frame",
        )
    if kind == "gap" and code:
        site = _site(here, ctx)
        at = next((g for g in ctx.scan.sites if g.site == site), None)
        why = at.reason.splitlines()[0][:160] if at else "a graph break"
        return f"graph break in {code['name']}: {why}", site, "graph-break"
    where = _site(here, ctx) if here else "-"
    return "ran under a compiled call with compile off (cause not recognised)", where, "unknown"


def causes(name: str, groups: list[dict[str, Any]], ctx: Context, measure: str) -> list[EagerCause]:
    index = 0 if measure == "flops" else 1
    weights: dict[tuple[str, str, str], float] = defaultdict(float)
    for g in groups:
        if g.get("module") == OUTSIDE or not under(g.get("collapsed", ""), name):
            continue
        weights[_cause(g, ctx)] += float(g.get("flops" if index == 0 else "ops") or 0)
    total = sum(weights.values())
    if total <= 0:
        return []
    ranked = sorted(weights.items(), key=lambda kv: -kv[1])[:3]
    return [EagerCause(cause=c, site=s, kind=k, share=round(w / total, 3)) for (c, s, k), w in ranked if w > 0]

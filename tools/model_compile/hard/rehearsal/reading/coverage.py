"""The coverage map: which parts of the model ran compiled, each eager region with its cause, and a verdict.

The twins count the aten operators of the model's forward and backward on the micro-steps of the last
optimizer step (runtime/rehearsal/measure/coverage.py): the eager twin all of them, by module; the compiled twin
those that ran outside compiled graphs, by module, with the user frame they ran in and what dynamo made of it.
A module's compiled share is 1 - (its eager work with compile on) / (its work with compile off), its work
being the FLOPs of its matrix-multiply, convolution and attention operators (torch.utils.flop_counter's
formulas), or its operator count where it has no such operator. Repeated blocks are collapsed (`layers.*`).

The verdict (the thresholds are constants here and documented in references/rehearsal.md): compile has no
effect on a compiled target when one of its repeated-block groups that carries at least HOT_WORK of the
target's forward work, or the target as a whole, runs less than EAGER_BELOW of its work compiled. Regions the
recipe keeps eager on purpose (`torch.compiler.disable`, documented) are left out of the target's work.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from model_compile.hard.models import CoverageEntry, EagerCause, RehearsalFacts
from model_compile.hard.rehearsal.reading.sites import TraceScan, site_name

HOT_WORK = 0.2  # a repeated-block group carrying this share of a target's forward work is its hot path
EAGER_BELOW = 0.5  # ... and compile has no effect on it when less than this share of its work ran compiled
LOST = 0.1  # on a change: a module whose compiled share falls by this much lost compile
LISTED = 0.02  # a module carrying less of the model's forward work is not listed on its own
OWN_LISTED = 0.05  # a module's own code (outside its children: a loss head written in its forward) gets a line
MAX_ENTRIES = 16
ROOT = "(model)"
OUTSIDE = "(outside the model)"


@dataclass
class _Node:
    name: str  # collapsed dotted path ("" the model)
    cls: str = ""
    count: int = 0
    total: list[float] = field(default_factory=lambda: [0.0, 0.0])  # flops, ops with compile off (subtree)
    eager: list[float] = field(default_factory=lambda: [0.0, 0.0])  # flops, ops that ran eager with compile on
    own: list[float] = field(default_factory=lambda: [0.0, 0.0])  # this module's own code, with compile off
    own_eager: list[float] = field(default_factory=lambda: [0.0, 0.0])  # ... and what of it ran eager
    repeated: bool = False


def _collapser(tree: list[list[Any]]) -> dict[str, str]:
    """Each module path -> its collapsed name: the index of a block in a container whose numbered children all
    have one class becomes `*` (`model.layers.3.mlp` -> `model.layers.*.mlp`)."""
    classes = {str(p): str(c) for p, c, _ in tree}
    containers = {str(p) for p, _, is_container in tree if is_container}
    children: dict[str, set[str]] = defaultdict(set)
    for path in classes:
        parent, _, last = path.rpartition(".")
        if parent in containers and last.isdigit():
            children[parent].add(classes[path])
    uniform = {p for p, kinds in children.items() if len(kinds) == 1}
    out: dict[str, str] = {}
    for path in classes:
        parts = path.split(".") if path else []
        for i, seg in enumerate(parts):
            if seg.isdigit() and ".".join(path.split(".")[:i]) in uniform:
                parts[i] = "*"
        out[path] = ".".join(parts)
    return out


def _ancestors(name: str) -> list[str]:
    parts = name.split(".") if name else []
    return [""] + [".".join(parts[: i + 1]) for i in range(len(parts))]


def _nodes(eager_rec: dict[str, Any], compiled_rec: dict[str, Any]) -> dict[str, _Node]:
    tree = compiled_rec.get("tree") or []
    collapse = _collapser(tree)
    nodes: dict[str, _Node] = {}
    for path, cls, _ in tree:
        name = collapse[str(path)]
        node = nodes.setdefault(name, _Node(name=name, cls=str(cls)))
        node.count += 1
        node.repeated = node.repeated or name.endswith("*")
    for side, attr in ((eager_rec.get("forward") or {}, "total"), (compiled_rec.get("forward") or {}, "eager")):
        for path, (flops, ops) in side.items():
            if path == OUTSIDE or path not in collapse:
                continue
            name = collapse[path]
            for up in _ancestors(name):
                if up in nodes:
                    cell = getattr(nodes[up], attr)
                    cell[0] += flops
                    cell[1] += ops
            if name in nodes:
                own = nodes[name].own if attr == "total" else nodes[name].own_eager
                own[0] += flops
                own[1] += ops
    return nodes


def _share(total: list[float], eager: list[float]) -> tuple[float, str]:
    """(compiled share, what it weighs): FLOPs where the module has any, else operators."""
    index, measure = (0, "flops") if total[0] > 0 else (1, "ops")
    if total[index] <= 0:
        return 1.0, measure
    return max(0.0, min(1.0, 1.0 - eager[index] / total[index])), measure


def _under(name: str, region: str) -> bool:
    return region == "" or name == region or name.startswith(region + ".")


@dataclass
class _Context:
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


def _site(where: str, ctx: _Context) -> str:
    return site_name(where, ctx.repo)


def _limit_step(label: str, ctx: _Context) -> int | None:
    """The optimizer step at which the frame `fn (file:line)` hit the recompile limit, or None."""
    frame = _LABEL.match(label)
    if frame is None:
        return None
    name, tail = frame["name"], _tail(frame["where"])
    for (n, t), step in ctx.limit_frames.items():
        if n == name and (tail.endswith(t) or t.endswith(tail)):
            return step
    return None


def _skip_reason(label: str, ctx: _Context) -> str | None:
    frame = _LABEL.match(label)
    if frame is None:
        return None
    path, _, first = frame["where"].rpartition(":")
    return ctx.scan.failed.get((frame["name"], path, int(first))) if first.isdigit() else None


def _break_in(frame_site: str, ctx: _Context) -> Any:
    """The graph break inside a skipped frame: the first break site of its file at or after its first line."""
    path, _, first = frame_site.rpartition(":")
    if not first.isdigit():
        return None
    inside = [
        g
        for g in ctx.scan.sites
        if g.site.rpartition(":")[0] == path
        and g.site.rpartition(":")[2].isdigit()
        and int(g.site.rpartition(":")[2]) >= int(first)
    ]
    return min(inside, key=lambda g: int(g.site.rpartition(":")[2]), default=None)


def _cause(group: dict[str, Any], ctx: _Context) -> tuple[str, str, str]:
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
    off = [m for m in span if m.startswith(("disable:", "checkpoint:"))]
    off += [m for m in span if m.startswith("skipped:") and _limit_step(m[len("skipped:") :], ctx) is not None]
    if off:
        outer = max(off, key=span.index)
        if outer.startswith("disable:"):
            fn = _LABEL.match(outer[len("disable:") :])
            where, name = (fn["where"], fn["name"]) if fn else (outer, outer)
            applied = next((s for r, s in ctx.disable_sites.items() if _under(group.get("collapsed", ""), r)), None)
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
            return f"activation checkpointing runs it with compile off{why}{enabled}", site, "checkpoint"
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
        return text, _site(code["where"], ctx), "skipped-frame"
    if kind == "gap" and code:
        site = _site(here, ctx)
        brk = next((g for g in ctx.scan.sites if g.site == site), None)
        why = brk.reason.splitlines()[0][:160] if brk else "a graph break"
        return f"graph break in {code['name']}: {why}", site, "graph-break"
    where = _site(here, ctx) if here else "-"
    if "entry" not in markers:
        return "outside every compiled call (not under a compiled target)", where, "not-compiled"
    return "ran under a compiled call with compile off (cause not recognised)", where, "unknown"


def _causes(name: str, groups: list[dict[str, Any]], ctx: _Context, measure: str) -> list[EagerCause]:
    index = 0 if measure == "flops" else 1
    weights: dict[tuple[str, str, str], float] = defaultdict(float)
    for g in groups:
        if g.get("module") == OUTSIDE or not _under(g.get("collapsed", ""), name):
            continue
        weights[_cause(g, ctx)] += float(g.get("flops" if index == 0 else "ops") or 0)
    total = sum(weights.values())
    if total <= 0:
        return []
    ranked = sorted(weights.items(), key=lambda kv: -kv[1])[:3]
    return [EagerCause(cause=c, site=s, kind=k, share=round(w / total, 3)) for (c, s, k), w in ranked if w > 0]


def _label(name: str) -> str:
    return name or ROOT


def _role(name: str, targets: list[str], disabled: list[str]) -> str:
    if any(_under(name, d) for d in disabled if d):
        return "kept eager (documented)"
    if any(_target_covers(t, name) for t in targets):
        return "target"
    return "outside the targets"


def _target_covers(pattern: str, name: str) -> bool:
    """A target pattern (`""`, `model.layers.*`, `model.visual`) covers a collapsed module name."""
    if pattern == "":
        return True
    p, n = pattern.split("."), name.split(".")
    return len(n) >= len(p) and all(a == b or a == "*" for a, b in zip(p, n[: len(p)], strict=False))


def _pick(nodes: dict[str, _Node], model_work: list[float]) -> list[str]:
    """The modules worth a line: the model, its direct children, every repeated-block group, the children of a
    module that ran partly compiled, and a module's own code when it carries a visible part of the work."""
    index = 0 if model_work[0] > 0 else 1

    def work(n: _Node) -> float:
        return n.total[index] / model_work[index] if model_work[index] else 0.0

    picked = [""]
    for name, node in sorted(nodes.items(), key=lambda kv: kv[0]):
        if not name or work(node) < LISTED:
            continue
        parent = nodes.get(name.rpartition(".")[0] if "." in name else "")
        mixed = parent is not None and 0.02 < _share(parent.total, parent.eager)[0] < 0.98
        if "." not in name or (node.repeated and name.endswith("*")) or mixed:
            picked.append(name)
    ranked = sorted(picked, key=lambda n: -work(nodes[n]))[:MAX_ENTRIES]
    return sorted(ranked, key=lambda n: n.split("."))


def build(
    facts: RehearsalFacts, recs: dict[str, list[dict[str, Any]]], scan: TraceScan, repo: Path, spec: dict[str, Any]
) -> None:
    """Fill the coverage map, the compiled shares and the coverage problems of `facts` from rank 0's records."""
    eager_rec = (((recs.get("eager") or [{}])[0].get("phases") or {}).get("coverage")) or {}
    compiled_rec = (((recs.get("compiled") or [{}])[0].get("phases") or {}).get("coverage")) or {}
    if spec.get("coverage") is False:
        facts.coverage_note = "not measured (MODEL_COMPILE_COVERAGE=off)"
        return
    if not eager_rec.get("ok") or not compiled_rec.get("ok"):
        if recs.get("compiled"):
            facts.coverage_note = "not measured: the twins did not reach the measured micro-steps"
        return
    nodes = _nodes(eager_rec, compiled_rec)
    root = nodes.get("")
    if root is None or (root.total[0] <= 0 and root.total[1] <= 0):
        facts.coverage_note = "not measured: no operator of the model's forward was seen on the measured micro-steps"
        return
    collapse = _collapser(compiled_rec.get("tree") or [])
    groups = [
        {**g, "collapsed": collapse.get(str(g.get("module")), str(g.get("module")))}
        for g in compiled_rec.get("groups") or []
    ]
    ctx = _Context(
        repo=repo,
        scan=scan,
        limit_frames=limit_frames(facts),
        checkpointing="; ".join(spec.get("checkpointing") or []),
        disable_sites=dict(spec.get("disable_sites") or {}),
    )
    targets = [str(t) for t in spec.get("targets") or [""]]
    disabled = [str(d) for d in spec.get("disabled") or []]
    index = 0 if root.total[0] > 0 else 1
    for name in _pick(nodes, root.total):
        node = nodes[name]
        share, measure = _share(node.total, node.eager)
        facts.coverage.append(
            CoverageEntry(
                module=_label(name),
                count=node.count,
                class_name=node.cls or None,
                compiled=round(share, 3),
                work=round(node.total[index] / root.total[index], 3),
                measure=measure,
                role=_role(name, targets, disabled),
                eager_causes=_causes(name, groups, ctx, measure) if share < 0.995 else [],
            )
        )
    for name, node in sorted(nodes.items()):
        work = node.own[index] / root.total[index]
        if work >= OWN_LISTED and node.own != node.total:
            share, measure = _share(node.own, node.own_eager)
            own_groups = [g for g in groups if g["collapsed"] == name]
            facts.coverage.append(
                CoverageEntry(
                    module=f"{_label(name)} own code",
                    count=node.count,
                    class_name=node.cls or None,
                    compiled=round(share, 3),
                    work=round(work, 3),
                    measure=measure,
                    role=_role(name, targets, disabled),
                    eager_causes=_causes(name, own_groups, ctx, measure) if share < 0.995 else [],
                )
            )
    facts.compiled_share = round(_share(root.total, root.eager)[0], 3)
    for name, node in nodes.items():
        if node.repeated and name.endswith("*") and node.total[index] > 0:
            parts = [
                child
                for child, sub in nodes.items()
                if child.rpartition(".")[0] == name and sub.total[index] >= 0.1 * node.total[index]
            ]
            facts.block_parts[name] = sorted(parts)
    bw_total, bw_eager = eager_rec.get("backward") or [0, 0], compiled_rec.get("backward") or [0, 0]
    if bw_total[0] or bw_total[1]:
        facts.backward_compiled_share = round(_share(list(map(float, bw_total)), list(map(float, bw_eager)))[0], 3)
    micro = compiled_rec.get("micro_steps") or []
    facts.coverage_note = (
        f"measured on micro-step(s) {', '.join(map(str, micro))} (the last optimizer step's), rank 0, in "
        f"{'FLOPs' if index == 0 else 'operators'} of the forward; those micro-steps took {compiled_rec.get('seconds')} s "
        "with the counting on (left out of the steady step)"
    )
    facts.coverage_failures = verdict(nodes, targets, disabled, groups, ctx)


def verdict(
    nodes: dict[str, _Node], targets: list[str], disabled: list[str], groups: list[dict[str, Any]], ctx: _Context
) -> list[str]:
    """`compile has no effect on X (cause)` for each compiled target whose hot path runs eager."""
    out: list[str] = []
    kept = [d for d in disabled if d and d in nodes]
    for pattern in targets:
        for name in [n for n in nodes if n == pattern] or ([""] if pattern == "" else []):
            target = nodes[name]
            total, eager = list(target.total), list(target.eager)
            for d in kept:
                if _under(d, name) and d != name:
                    for i in (0, 1):
                        total[i] -= nodes[d].total[i]
                        eager[i] -= nodes[d].eager[i]
            index = 0 if total[0] > 0 else 1
            if total[index] <= 0:
                continue
            hot = [
                n
                for n, node in nodes.items()
                if node.repeated
                and n.endswith("*")
                and _under(n, name)
                and not any(_under(n, d) for d in kept)
                and node.total[index] >= HOT_WORK * total[index]
            ]
            failed = False
            for n in sorted(hot):
                share, measure = _share(nodes[n].total, nodes[n].eager)
                if share < EAGER_BELOW:
                    failed = True
                    out.append(_no_effect(n, nodes[n], share, measure, groups, ctx))
            share, measure = _share(total, eager)
            if not failed and share < EAGER_BELOW:
                out.append(_no_effect(name, target, share, measure, groups, ctx, whole=True))
    return out


def _no_effect(
    name: str, node: _Node, share: float, measure: str, groups: list[dict[str, Any]], ctx: _Context, whole: bool = False
) -> str:
    """One failure line: the module, how little of it ran compiled, and the main cause with its site."""
    causes = _causes(name, groups, ctx, measure)
    why = f"{causes[0].cause} ({causes[0].site})" if causes else "cause not recognised"
    blocks = f"{node.count} blocks, " if node.count > 1 and not whole else ""
    return f"compile has no effect on {_label(name)} ({blocks}{share:.0%} of its forward {measure} ran compiled): {why}"


def versus(head: RehearsalFacts, base: RehearsalFacts) -> list[str]:
    """Each module's compiled share beside the base's; a module that lost compile is new with the change (the
    innermost listed one: the model itself is named only when no module inside it says where the loss is)."""
    before = {e.module: e.compiled for e in base.coverage}
    lost = []
    for entry in head.coverage:
        if entry.module not in before:
            continue
        entry.base_compiled = before[entry.module]
        if entry.compiled < before[entry.module] - LOST:
            lost.append(entry)

    def inner(a: str, b: str) -> bool:  # b lies inside a
        return a == ROOT and b != ROOT or b.startswith(a + ".")

    out = []
    for entry in lost:
        if any(inner(entry.module, other.module) for other in lost):
            continue
        cause = f": {entry.eager_causes[0].cause} ({entry.eager_causes[0].site})" if entry.eager_causes else ""
        out.append(
            f"{entry.module} ran {before[entry.module]:.0%} of its forward work compiled at the base and "
            f"{entry.compiled:.0%} with the change{cause}"
        )
    return out

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

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from model_compile.hard.models import CoverageEntry, RehearsalFacts
from model_compile.hard.rehearsal.reading.causes import OUTSIDE, Context, causes, limit_frames, under
from model_compile.hard.rehearsal.reading.sites import TraceScan

HOT_WORK = 0.2  # a repeated-block group carrying this share of a target's forward work is its hot path
EAGER_BELOW = 0.5  # ... and compile has no effect on it when less than this share of its work ran compiled
LOST = 0.1  # on a change: a module whose compiled share falls by this much lost compile
LISTED = 0.02  # a module carrying less of the model's forward work is not listed on its own
OWN_LISTED = 0.05  # a module's own code (outside its children: a loss head written in its forward) gets a line
MAX_ENTRIES = 16
ROOT = "(model)"


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


def _label(name: str) -> str:
    return name or ROOT


def _role(name: str, targets: list[str], disabled: list[str]) -> str:
    if any(under(name, d) for d in disabled if d):
        return "kept eager (documented)"
    if any(_target_covers(t, name) for t in targets):
        return "target"
    if any(t and _target_covers(name, t.replace("*", "0")) for t in targets):
        return "holds targets"  # a target lies inside it (`layers.*` holds `layers.*.mlp`)
    return "outside the targets"


def _own_role(name: str, targets: list[str], disabled: list[str]) -> str:
    """The role of a module's own code (its forward outside its children): a target's own code is the target's;
    the own code of a module that only holds targets (a model whose blocks are compiled, its loss head written in
    its forward) lies outside them."""
    role = _role(name, targets, disabled)
    return "outside the targets" if role == "holds targets" else role


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


def unmeasured(facts: RehearsalFacts, records: dict[str, dict[str, Any]]) -> None:
    """`coverage not measured for X (why)`, from each twin's coverage record: a higher-order operator whose body ran
    outside a compiled graph (torch runs it below the dispatch mode, so its operators were not counted), and any
    failure of the meter itself (counted nothing there; the run went on)."""
    for twin, rec in records.items():
        for hop in rec.get("higher_order") or []:
            if not hop.get("eager"):
                continue  # inside a compiled graph: its operators are the graph's, counted as compiled
            module = str(hop.get("module"))
            where = {OUTSIDE: "code outside the model", "(backward)": "the backward pass", "": "the model's own code"}
            line = (
                f"coverage not measured for {where.get(module, f'`{module}`')} inside {hop.get('operator')} "
                f"({hop['eager']} run(s) outside compiled graphs in the {twin} twin): torch runs a higher-order "
                "operator's body below the dispatch mode that counts operators, so its work is not in the shares"
            )
            if line not in facts.coverage_unmeasured:
                facts.coverage_unmeasured.append(line)
        for fault in rec.get("meter_faults") or []:
            facts.coverage_unmeasured.append(
                f"coverage not measured for some operators of the {twin} twin (the meter failed on {fault}); the run "
                "went on unchanged"
            )


def build(
    facts: RehearsalFacts, recs: dict[str, list[dict[str, Any]]], scan: TraceScan, repo: Path, spec: dict[str, Any]
) -> None:
    """Fill the coverage map, the compiled shares and the coverage problems of `facts` from rank 0's records."""
    eager_rec = (((recs.get("eager") or [{}])[0].get("phases") or {}).get("coverage")) or {}
    compiled_rec = (((recs.get("compiled") or [{}])[0].get("phases") or {}).get("coverage")) or {}
    if spec.get("coverage") is False:
        facts.coverage_note = f"not measured ({spec.get('coverage_off') or 'MODEL_COMPILE_COVERAGE=off'})"
        return
    unmeasured(facts, {"eager": eager_rec, "compiled": compiled_rec})
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
    ctx = Context(
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
                eager_causes=causes(name, groups, ctx, measure) if share < 0.995 else [],
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
                    role=_own_role(name, targets, disabled),
                    eager_causes=causes(name, own_groups, ctx, measure) if share < 0.995 else [],
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
    nodes: dict[str, _Node], targets: list[str], disabled: list[str], groups: list[dict[str, Any]], ctx: Context
) -> list[str]:
    """`compile has no effect on X (cause)` for each compiled target whose hot path runs eager."""
    out: list[str] = []
    kept = [d for d in disabled if d and d in nodes]
    for pattern in targets:
        for name in [n for n in nodes if n == pattern] or ([""] if pattern == "" else []):
            target = nodes[name]
            total, eager = list(target.total), list(target.eager)
            for d in kept:
                if under(d, name) and d != name:
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
                and under(n, name)
                and not any(under(n, d) for d in kept)
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
    name: str, node: _Node, share: float, measure: str, groups: list[dict[str, Any]], ctx: Context, whole: bool = False
) -> str:
    """One failure line: the module, how little of it ran compiled, and the main cause with its site."""
    found = causes(name, groups, ctx, measure)
    why = f"{found[0].cause} ({found[0].site})" if found else "cause not recognised"
    blocks = f"{node.count} blocks, " if node.count > 1 and not whole else ""
    return f"compile has no effect on {_label(name)} ({blocks}{share:.0%} of its forward {measure} ran compiled): {why}"


def versus(head: RehearsalFacts, base: RehearsalFacts) -> list[str]:
    """Each module's compiled share beside the base's; a module under a compiled target that lost compile is new
    with the change (the innermost listed one: the model itself is named only when no module inside it says
    where the loss is). A module the change took out of the compiled targets is `moved` (see `moved_out`)."""
    return [line for line, failing in _changes(head, base) if failing]


def moved_out(head: RehearsalFacts, base: RehearsalFacts) -> list[str]:
    """Modules that left compile because the change moved them out of the compiled targets (no failure)."""
    return [line for line, failing in _changes(head, base) if not failing]


def left_with(after: RehearsalFacts, before: RehearsalFacts, what: str) -> list[str]:
    """Modules that ran compiled `before` and leave compile `after` (`what`: "the fix"), whatever the reason."""
    return [line for line, _ in _changes(after, before, f"before {what}", f"with {what}", what)]


def _changes(
    head: RehearsalFacts,
    base: RehearsalFacts,
    then: str = "at the base",
    now: str = "with the change",
    mover: str = "the change",
) -> list[tuple[str, bool]]:
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
        part = f" ({entry.work:.0%} of the model's forward work)" if entry.module != ROOT and entry.work < 1 else ""
        text = (
            f"{entry.module}{part} ran {before[entry.module]:.0%} of its forward work compiled {then} and "
            f"{entry.compiled:.0%} {now}{cause}"
        )
        if entry.role == "outside the targets":
            out.append((text + f" - {mover} moved it out of the compiled targets", False))
        else:
            out.append((text, True))
    return out


def widths_note(facts: RehearsalFacts) -> None:
    """What the shares are of, once every model the run built is known (a child shrinks what it intercepts)."""
    if not facts.coverage_note or facts.coverage_note.startswith("not measured"):
        return
    facts.coverage_note += (
        "; the shares are of the tiny model's work: each stack keeps its depth but its widths are shrunk by their "
        "own rule, so at the real widths the shares differ"
        if facts.shrunk
        else "; the shares are of the model at the widths the stage sets (nothing was shrunk)"
    )

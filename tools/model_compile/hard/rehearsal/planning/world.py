"""How many ranks the rehearsal runs, and the stage's mesh scaled down to them.

By default 2 ranks when the stage's `parallel.mesh` shards or replicates over more than one rank (a size
above 1, or -1: fill the world), else 1; `--world-size N` asks for another. The mesh keeps its shape: a stage
that shards (FSDP2 block by block) shards over the N ranks (`shard: 8` -> N), one that only replicates (DDP)
replicates over them; a tensor-parallel dimension is set to 1 and said so. Ranks run on CPU over gloo.
Pure Python.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

DIMS = ("replicate", "shard", "tensor")
MAX_WORLD = 8


@dataclass
class WorldPlan:
    world_size: int
    reason: str
    overrides: list[str] = field(default_factory=list)
    wrap: str = "the recipe's own (measured when it runs)"
    notes: list[str] = field(default_factory=list)


def _spans(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and (value > 1 or value == -1)


def plan_world(mesh: dict[str, Any], prefix: str, asked: int | None) -> WorldPlan:
    """`mesh`: the stage's `parallel.mesh` values; `prefix`: its dotted path (`parallel.mesh`)."""
    sizes = {k: v for k, v in mesh.items() if k in DIMS and isinstance(v, int) and not isinstance(v, bool)}
    shards, replicates = _spans(sizes.get("shard")), _spans(sizes.get("replicate"))
    dims = ", ".join(f"{k} {v}" for k, v in sizes.items()) or "no parallel.mesh"
    if asked is not None:
        world, reason = asked, f"asked for with --world-size (the stage's mesh: {dims})"
    elif shards or replicates:
        world = 2
        kind = "shards" if shards else "replicates"
        reason = f"the stage's mesh {kind} over more than one rank ({dims}): 2 CPU ranks exercise its wrap"
    else:
        world, reason = 1, f"the stage's mesh is one rank ({dims})"
    plan = WorldPlan(world_size=world, reason=reason)
    if not sizes:
        return plan
    new = dict(sizes)
    if sizes.get("tensor", 1) not in (1,):
        new["tensor"] = 1
        plan.notes.append(f"tensor parallel ({prefix}.tensor {sizes['tensor']}) is not rehearsed: set to 1")
    if world == 1:
        new.update({k: 1 for k in new})
        plan.wrap = "one rank: the recipe's wrap with a world of 1"
    elif shards:
        new["shard"], new["replicate"] = world, 1
        plan.wrap = f"FSDP2 over {world} ranks (shard {sizes.get('shard')} -> {world})"
    else:
        new["replicate"], new["shard"] = world, 1
        plan.wrap = f"data parallel over {world} ranks (replicate {sizes.get('replicate', 1)} -> {world})"
    plan.overrides = [f"{prefix}.{k}={v}" for k, v in new.items() if v != sizes.get(k)]
    return plan

"""What each rank did: graphs and recompiles per rank, parity and keys judged on every rank, and whether
gradient accumulation synced on micro-steps that should not sync."""

from __future__ import annotations

from typing import Any

from model_compile.hard.models import RehearsalFacts


def ranks(facts: RehearsalFacts, recs: dict[str, list[dict[str, Any]]]) -> None:
    rows = recs.get("compiled") or []
    if len(rows) < 2:
        return
    summary = []
    for rank, rec in enumerate(rows):
        micro = rec.get("micro_steps") or []
        graphs = sum(int(m.get("new_graphs") or 0) for m in micro)
        variants = sum(int(r.get("count", 1)) for m in micro for r in m.get("recompiles") or [])
        hits = sum(len(m.get("limit_hits") or []) for m in micro)
        summary.append((graphs, variants, hits))
        facts.ranks.append(f"rank {rank}: {graphs} graphs, {variants} recompiles, {hits} recompile-limit hit(s)")
    if len({s[0] for s in summary}) > 1:
        facts.notes.append(
            "the ranks compiled different numbers of graphs (" + "; ".join(facts.ranks) + "): each rank's batches "
            "have their own shapes; a compiled graph that holds a collective would then mismatch across ranks"
        )


def other_ranks(facts: RehearsalFacts, recs: dict[str, list[dict[str, Any]]]) -> None:
    """Parity and keys are judged on every rank: each compiled rank compared itself with its own twins."""
    from model_compile.runtime.rehearsal.measure.parity import failures

    rows = recs.get("compiled") or []
    for rank, rec in enumerate(rows[1:], start=1):
        phase = (rec.get("phases") or {}).get("parity") or {}
        if not phase.get("ok"):
            continue  # this rank did not get as far as comparing: its record says why (stopped() read it)
        for problem in failures(phase.get("parity") or {}):
            facts.problems.append(f"rank {rank}: {problem}")
        for name, cmp in (phase.get("keys") or {}).items():
            if cmp.get("checked") and not cmp.get("same"):
                facts.problems.append(f"rank {rank}: {name} keys changed")
    if len(rows) > 1:
        facts.notes.append(f"parity and keys judged on each of the {len(rows)} ranks against its own twins")


def sync(facts: RehearsalFacts, recs: dict[str, list[dict[str, Any]]]) -> None:
    def reduced(twin: str) -> list[str]:
        out = []
        for rank, rec in enumerate(recs.get(twin) or []):
            for check in rec.get("sync_checks") or []:
                if check.get("reduced"):
                    out.append(f"micro-step {check.get('micro')} on rank {rank} ({check.get('how')})")
        return out

    checks = [c for rec in recs.get("compiled") or [] for c in rec.get("sync_checks") or []]
    if not checks:
        micro = [m for rec in recs.get("compiled") or [] for m in rec.get("micro_steps") or []]
        if not micro:
            facts.sync = "not checked: the compiled run did not get to a micro-step" if facts.world_size > 1 else None
        elif facts.world_size > 1:
            facts.sync = "not checked: no micro-step skipped its sync (each one stepped the optimizer)"
        return
    known = [c for c in checks if c.get("reduced") is not None]
    if not known:
        facts.sync = f"not checked: {checks[0].get('how')}"
        return
    compiled, eager = reduced("compiled"), reduced("eager")
    if compiled and not eager:
        facts.sync = f"gradients were reduced on {len(compiled)} micro-step(s) that should not sync, with compile on only: {compiled[0]}"
        facts.problems.append(
            f"gradient accumulation syncs every micro-step with compile on (the eager twin does not): {compiled[0]}; "
            "a wrapper that hides the distributed module from the recipe's no-sync context does this"
        )
    elif compiled:
        facts.sync = f"gradients reduced on micro-steps that should not sync, with compile on and off: {compiled[0]} (already so without compile)"
    else:
        facts.sync = f"no gradient sync on the {len(known)} micro-step(s) that should not sync, on every rank ({known[0].get('how')})"

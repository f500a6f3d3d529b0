"""The hard report's verdict, summary and gaps, decided from its layers and runtime record.

`failed` when a layer failed or timed out or a required layer is missing;
`incomplete` when a layer could not run, was skipped or is missing; else
`passed`. The gaps list what the run did not establish, and the runtime costs
(graph breaks, recompiles, compile latency) it measured.
"""

from __future__ import annotations

from pathlib import Path

from model_compile.hard.env.torch_pin import version_note
from model_compile.hard.models import HardReport, RecompileReason, RuntimeRecord
from model_compile.hard.rehearsal.reading.fixes import shorten
from model_compile.hard.rehearsal.render import summary_lines


def judge(report: HardReport) -> None:
    """Set `report.verdict`, `report.summary` and `report.gaps` from what the run recorded."""
    failed = [layer for layer in report.layers if layer.status in ("failed", "timeout")]
    required_missing = [
        layer for layer in report.layers if layer.status == "missing" and not layer.name.startswith("impact")
    ]
    gaps = [
        layer
        for layer in report.layers
        if layer.status in ("not-run", "unavailable", "skipped", "missing", "tool-error")
    ]
    if failed:
        first = failed[0]
        report.verdict = "failed"
        reason = (first.reason or "").strip().splitlines()
        report.summary = f"layer '{first.name}' {first.status}" + (f": {shorten(reason[0], 300)}" if reason else "")
    elif required_missing:
        report.verdict = "failed"
        report.summary = "missing layer(s): " + ", ".join(layer.name for layer in required_missing)
    elif gaps:
        report.verdict = "incomplete"
        report.summary = "; ".join(
            f"{layer.name}: {layer.status}" + (f" ({layer.next_step})" if layer.next_step else "") for layer in gaps
        )
    else:
        report.verdict = "passed"
        report.summary = "every layer passed"
    if report.environment.cpu_only and report.verdict != "failed":
        report.summary += " (cpu-only: rerun the commands on a GPU/NPU machine to check compiled behaviour there)"
    runtime = [
        x for x in report.layers if x.name != "soft" and (x.started or x.status in ("passed", "failed", "timeout"))
    ]
    report.torch_note = version_note(Path(report.repo_root), report.environment.torch) if runtime else None
    report.gaps = find_gaps(report)


def find_gaps(report: HardReport) -> list[str]:
    """What this run did not establish, and the runtime costs it measured."""
    gaps: list[str] = []
    if report.environment.cpu_only:
        gaps.append("no accelerator: runtime results are CPU-only; compiled speed and GPU/NPU numerics not validated")
    if report.torch_note:
        gaps.append(report.torch_note)
    for layer in report.layers:
        if layer.status == "tool-error":
            gaps.append(
                f"{layer.name}: model-compile's own fault, not the recipe's ({(layer.reason or '').splitlines()[0][:200]})"
                + (f" - rerun: {layer.next_step}" if layer.next_step else "")
            )
        elif layer.status in ("not-run", "missing", "skipped", "unavailable"):
            gaps.append(f"{layer.name}: {layer.status}" + (f" - run: {layer.next_step}" if layer.next_step else ""))
    ran = {layer.name for layer in report.layers}
    for name in ("structure", "smoke"):
        if name not in ran and report.verdict == "failed":
            gaps.append(f"{name}: not reached (stopped at the first failure)")
    if report.rehearsal is not None and report.rehearsal.status not in ("not-run", "tool-error"):
        gaps.extend(summary_lines(report.rehearsal))
    rt = report.runtime_record or RuntimeRecord()
    breaks = rt.graph_breaks
    if breaks.total:
        top = sorted(breaks.by_reason.items(), key=lambda kv: -kv[1])[:3]
        gaps.append(f"{breaks.total} graph breaks ({'; '.join(f'{n}x {r}' for r, n in top)})")
    rec = rt.recompiles
    if rec.count:
        first = (rec.reasons or [RecompileReason()])[0].reason.splitlines()
        gaps.append(f"{rec.count} recompiles" + (f" (first: {first[0].strip()[:120]})" if first else ""))
    if rt.recompile_limit.hit:
        gaps.append("recompile_limit hit: frames fell back to eager")
    if report.runtime is None:  # no in-process record (the recipe's asserts are not ours): the trace still counts
        gaps.extend(_trace_gaps(report))
    timing = rt.timing
    if timing.first_step_s is not None:
        gaps.append(
            f"compile latency: first step {timing.first_step_s} s vs steady state {timing.steady_state_s} s"
            + (" (CPU timings; no speedup claimed)" if report.environment.cpu_only else "")
        )
    return gaps


def _trace_gaps(report: HardReport) -> list[str]:
    """Graph breaks, recompiles and recompile-limit hits per traced layer, from TORCH_TRACE (rank 0 first)."""
    out: list[str] = []
    for layer, trace in report.traces.items():
        ranks = sorted(trace.ranks, key=lambda r: r.rank)
        if not ranks:
            continue
        first = ranks[0]
        where = f"{layer}, rank {first.rank} of {len(ranks)} (TORCH_TRACE)"
        if first.graph_breaks:
            out.append(f"{len(first.graph_breaks)} graph breaks [{where}] (first: {first.graph_breaks[0][:120]})")
        if first.recompiles:
            out.append(f"{len(first.recompiles)} recompiles [{where}] (first: {first.recompiles[0][:120]})")
        if first.recompile_limit_hits:
            out.append(f"recompile_limit hit [{where}]: frames fell back to eager")
    return out

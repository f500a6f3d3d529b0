"""Graph-break sites from the compiled twin's TORCH_TRACE (rank 0), named for a reader of the repository."""

from __future__ import annotations

import os
import re
from pathlib import Path

from model_compile.hard.models import GraphBreakSite
from model_compile.hard.trace import break_parts
from model_compile.hard.trace import records as trace_records


def read_trace(trace_dir: Path, repo_root: Path) -> tuple[list[GraphBreakSite], float | None]:
    """Rank 0's graph-break sites (user code relative to the repo, library frames named) and compile seconds."""
    logs = (
        sorted(trace_dir.glob("dedicated_log_torch_trace_rank_0_*.log"))
        or sorted(trace_dir.glob("dedicated_log_torch_trace_*.log"))
        if trace_dir.is_dir()
        else []
    )
    counts: dict[tuple[str, str], int] = {}
    seconds, seen = 0.0, False
    for log in logs:
        for _pid, rec, payload in trace_records(log):
            metrics = rec.get("compilation_metrics")
            if isinstance(metrics, dict) and isinstance(metrics.get("entire_frame_compile_time_s"), (int, float)):
                seconds += float(metrics["entire_frame_compile_time_s"])
                seen = True
            if (rec.get("artifact") or {}).get("name") != "dynamo_graph_break_reason":
                continue
            lines, where, headline, _ = break_parts(payload)
            if not where:
                m = re.search(r"(\S+\.py)\s+line\s+(\d+)", payload)
                where = f"{m.group(1)}:{m.group(2)}" if m else "(no user frame)"
            key = (site_name(where, repo_root), reason_of(headline or (lines[0] if lines else "?"), payload)[:200])
            counts[key] = counts.get(key, 0) + 1
    sites = [GraphBreakSite(site=s, reason=r, count=n) for (s, r), n in counts.items()]
    sites.sort(key=lambda g: (g.site.startswith("library"), -g.count, g.site))
    return sites, (round(seconds, 2) if seen else None)


def site_name(where: str, repo_root: Path) -> str:
    """`recipes/x/model.py:12` for the repository's code; `library transformers/...:34` for installed packages."""
    path, _, line = where.rpartition(":")
    if not path:
        return where
    try:
        rel = os.path.relpath(path, repo_root)
    except ValueError:
        rel = path
    if not rel.startswith("..") and "site-packages" not in rel and ".venv" not in Path(rel).parts:
        return f"{rel}:{line}"
    for marker in ("site-packages/", "dist-packages/"):
        if marker in path:
            return f"library {path.split(marker, 1)[1]}:{line}"
    return f"library {path}:{line}"


_OPERATOR = re.compile(r"Operator `(aten\.[\w.]+)`")
_GRACEFUL = "Failed to handle graph break gracefully"


def reason_of(headline: str, payload: str) -> str:
    """The break's reason as a reader needs it: the operator a dynamic-shape break names (`aten.nonzero`),
    and for a break dynamo could not resume from, the break it met, then that the frame ran eager."""
    reason = headline.strip()
    if reason.startswith(_GRACEFUL):
        after = payload.split("Graph break encountered:", 1)[-1]
        inner = next((ln.strip() for ln in after.splitlines() if ln.strip()), "")
        if inner:
            reason = f"{inner} (no resume: the frame ran eager)"
    op = _OPERATOR.search(payload)
    if op and op.group(1) not in reason:
        reason += f" ({op.group(1).removesuffix('.default')})"
    return reason

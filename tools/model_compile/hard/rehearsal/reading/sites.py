"""Graph-break sites from the compiled twin's TORCH_TRACE (rank 0), named for a reader of the repository."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from model_compile.hard.models import GraphBreakSite
from model_compile.hard.trace import break_parts
from model_compile.hard.trace import records as trace_records


@dataclass
class TraceScan:
    """What rank 0's trace of the compiled twin says, in one pass."""

    sites: list[GraphBreakSite] = field(default_factory=list)
    compile_s: float | None = None
    # frames dynamo gave up on: (co_name, co_filename, co_firstlineno) -> the first lines of its reason
    failed: dict[tuple[str, str, int], str] = field(default_factory=dict)
    # sizes a line of user code fixed to a constant: {"expr", "source", "site", "loc"}, first seen first
    specialized: list[dict[str, str]] = field(default_factory=list)


def _rank0_logs(trace_dir: Path) -> list[Path]:
    if not trace_dir.is_dir():
        return []
    return sorted(trace_dir.glob("dedicated_log_torch_trace_rank_0_*.log")) or sorted(
        trace_dir.glob("dedicated_log_torch_trace_*.log")
    )


def scan(trace_dir: Path, repo_root: Path) -> TraceScan:
    """Graph-break sites (user code relative to the repo, library frames named), compile seconds, the frames
    dynamo failed on and the sizes user code specialized, from rank 0's trace."""
    out = TraceScan()
    counts: dict[tuple[str, str], int] = {}
    seconds, seen = 0.0, False
    for log in _rank0_logs(trace_dir):
        strings: dict[int, str] = {}
        symbols: dict[str, str] = {}
        for _pid, rec, payload in trace_records(log):
            if isinstance(rec.get("str"), list) and len(rec["str"]) == 2:
                strings[int(rec["str"][1])] = str(rec["str"][0])
                continue
            created = rec.get("create_symbol")
            if isinstance(created, dict) and created.get("symbol"):
                symbols[str(created["symbol"])] = str(created.get("source") or "")
                continue
            metrics = rec.get("compilation_metrics")
            if isinstance(metrics, dict):
                if isinstance(metrics.get("entire_frame_compile_time_s"), (int, float)):
                    seconds += float(metrics["entire_frame_compile_time_s"])
                    seen = True
                _failed(out, metrics)
                continue
            guard = rec.get("guard_added_fast") or rec.get("guard_added")
            if isinstance(guard, dict):
                _specialized(out, guard, strings, symbols, repo_root)
                continue
            if (rec.get("artifact") or {}).get("name") != "dynamo_graph_break_reason":
                continue
            lines, where, headline, _ = break_parts(payload)
            if not where:
                m = re.search(r"(\S+\.py)\s+line\s+(\d+)", payload)
                where = f"{m.group(1)}:{m.group(2)}" if m else "(no user frame)"
            key = (site_name(where, repo_root), reason_of(headline or (lines[0] if lines else "?"), payload)[:200])
            counts[key] = counts.get(key, 0) + 1
    out.sites = [GraphBreakSite(site=s, reason=r, count=n) for (s, r), n in counts.items()]
    out.sites.sort(key=lambda g: (g.site.startswith("library"), -g.count, g.site))
    out.compile_s = round(seconds, 2) if seen else None
    return out


def read_trace(trace_dir: Path, repo_root: Path) -> tuple[list[GraphBreakSite], float | None]:
    """Rank 0's graph-break sites and compile seconds (see `scan` for everything the trace says)."""
    found = scan(trace_dir, repo_root)
    return found.sites, found.compile_s


def _failed(out: TraceScan, metrics: dict[str, Any]) -> None:
    reason = metrics.get("fail_reason")
    name, file, line = metrics.get("co_name"), metrics.get("co_filename"), metrics.get("co_firstlineno")
    if not reason or not name or not file or not isinstance(line, int):
        return
    heads = [ln.strip() for ln in str(reason).splitlines() if ln.strip() and not ln.startswith((" ", "\t"))]
    heads = [h for h in heads if not h.startswith(("***", "For more details", "Developer debug"))]
    out.failed.setdefault((str(name), str(file), line), "; ".join(dict.fromkeys(heads[:3])) or str(reason)[:200])


def _specialized(
    out: TraceScan, guard: dict[str, Any], strings: dict[int, str], symbols: dict[str, str], repo_root: Path
) -> None:
    """An `Eq(symbol, constant)` guard added from a line of user code: that line fixed a size (its source, e.g.
    `L['input_ids'].size()[1]`, from the symbol's creation)."""
    expr = str(guard.get("expr") or "")
    m = re.fullmatch(r"Eq\((\w+), -?\d+\)", expr)
    if not m:
        return
    stack = guard.get("user_stack") or []
    if not stack:
        return
    frame = stack[-1]
    file = strings.get(frame.get("filename")) if isinstance(frame.get("filename"), int) else frame.get("filename")
    site = site_name(f"{file}:{frame.get('line')}", repo_root) if file else f"?:{frame.get('line')}"
    entry = {
        "expr": expr,
        "source": symbols.get(m.group(1), ""),
        "site": site,
        "loc": str(frame.get("loc") or "").strip(),
        "function": str(frame.get("name")),
    }
    if not any(e["site"] == site and e["loc"] == entry["loc"] for e in out.specialized):
        out.specialized.append(entry)


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
_BACKEND_FAILED = re.compile(r"Backend compiler `([\w.-]+)` failed with (\w+(?:\.\w+)*)")


def reason_of(headline: str, payload: str) -> str:
    """The break's reason as a reader needs it: the operator a dynamic-shape break names (`aten.nonzero`),
    and for a break dynamo could not resume from, the break it met, then that the frame ran eager."""
    reason = headline.strip()
    if reason.startswith(_GRACEFUL):
        after = payload.split("Graph break encountered:", 1)[-1]
        inner = next((ln.strip() for ln in after.splitlines() if ln.strip()), "")
        if inner:
            reason = f"{inner} (no resume: the frame ran eager)"
    backend = _BACKEND_FAILED.search(payload) if reason.startswith("Backend compiler exception") else None
    if backend:
        # the backend could not compile the graph dynamo gave it (an operator it lacks): dynamo broke there
        failed = f"{backend.group(1)} failed on {backend.group(2).removesuffix('.default')}"
        reason = reason.replace("Backend compiler exception", f"Backend compiler exception ({failed})", 1)
    op = _OPERATOR.search(payload)
    if op and op.group(1) not in reason:
        reason += f" ({op.group(1).removesuffix('.default')})"
    return reason

"""Compile facts from torch's structured trace (TORCH_TRACE), per rank.

The runner sets TORCH_TRACE to a folder per layer; every process torch starts
(spawned ranks included) writes its own `dedicated_log_torch_trace_*.log`
there, whatever the recipe's code does. Each record is a glog prefix and one
JSON object on a line, its payload (if any) on the following tab-indented
lines. This module reads them itself - nothing to install in the repository -
and, where `tlparse` is installed, also has it render its HTML report.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from model_compile.hard.models import FrameCompile, RankTrace, TraceSummary

LOG_GLOB = "dedicated_log_torch_trace_*.log"
_PAYLOAD_ARTIFACTS = ("dynamo_graph_break_reason", "recompile_reasons")
_LIMIT_WORDS = ("recompile limit", "recompile_limit", "cache_size_limit", "cache size limit")


def find_tlparse() -> str | None:
    """tlparse on PATH, or next to the running interpreter (a venv's bin/)."""
    found = shutil.which("tlparse")
    if found:
        return found
    candidate = Path(sys.executable).parent / "tlparse"
    return str(candidate) if candidate.is_file() else None


def records(path: Path) -> Iterator[tuple[str, dict[str, Any], str]]:
    """(pid, record, payload) for each record of one trace log; payload only for the artifacts read here."""
    pid = ""
    current: dict[str, Any] | None = None
    payload: list[str] = []
    keep = False
    with open(path, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            if line.startswith("\t"):
                if keep:
                    payload.append(line[1:].rstrip("\n"))
                continue
            if current is not None:
                yield pid, current, "\n".join(payload)
            current, payload, keep = None, [], False
            brace = line.find("{")
            if brace < 0:
                continue
            try:
                current = json.loads(line[brace:])
            except ValueError:
                continue
            prefix = line[:brace].split()
            pid = prefix[2] if len(prefix) > 2 else pid
            artifact = current.get("artifact") or {}
            keep = artifact.get("name") in _PAYLOAD_ARTIFACTS
    if current is not None:
        yield pid, current, "\n".join(payload)


def break_parts(payload: str) -> tuple[list[str], str, str, str]:
    """(stripped lines, 'file:line' of the user frame or '', headline, explanation) of a dynamo_graph_break_reason
    payload. The headline is what follows "Graph Break Reason:", or the next non-empty line when that says only
    "Encountered graph break"."""
    lines = [ln.strip() for ln in payload.splitlines()]
    where = next((ln.split(" at ", 1)[1] for ln in lines if ln.startswith("Graph break in user code at ")), "")
    headline = explanation = ""
    after = False
    for ln in lines:
        if ln.startswith("Graph Break Reason:"):
            after = True
            rest = ln.split(":", 1)[1].strip()
            if rest and not rest.startswith("Encountered graph break") and not headline:
                headline = rest
            continue
        if after and ln and not headline:
            headline = ln
        elif after and ln.startswith("Explanation:"):
            explanation = ln.split(":", 1)[1].strip()
            break
    return lines, where, headline, explanation


def _break_summary(payload: str) -> str:
    """'file:line: headline - explanation' from a dynamo_graph_break_reason payload."""
    lines, where, headline, explanation = break_parts(payload)
    text = headline + (f" - {explanation}" if explanation else "")
    where = where.rsplit("/", 1)[-1] if where else "?"
    return f"{where}: {text or (lines[0] if lines else '?')}"[:300]


def read_log(path: Path) -> RankTrace:
    """Graph breaks, recompiles (with the failed guard), recompile-limit hits and compile time of one process."""
    rank: str | None = None
    pid = ""
    functions: dict[Any, str] = {}
    breaks: Counter[str] = Counter()
    out = RankTrace(rank="?", log=str(path))
    for pid, rec, payload in records(path):  # noqa: B007 - the last pid names the process
        if rank is None and rec.get("rank") is not None:
            rank = str(rec["rank"])
        artifact = rec.get("artifact") or {}
        if artifact.get("name") == "dynamo_graph_break_reason":
            breaks[_break_summary(payload)] += 1
        metrics = rec.get("compilation_metrics")
        if not isinstance(metrics, dict):
            continue
        frame = rec.get("frame_id")
        name = metrics.get("co_name")
        if name:
            file = str(metrics.get("co_filename") or "").rsplit("/", 1)[-1]
            functions[frame] = f"{name} ({file}:{metrics.get('co_firstlineno')})" if file else name
        function = functions.get(frame, f"frame {frame}")
        compile_id = str(metrics.get("compile_id") or f"{frame}/{rec.get('frame_compile_id')}")
        fail = metrics.get("fail_reason") or None
        reason = metrics.get("recompile_reason") or None
        if fail and any(w in fail.lower() for w in _LIMIT_WORDS):
            last = f" (last failed guard: {_squeeze(reason)})" if reason else ""
            out.recompile_limit_hits.append(f"{function}: {_first_line(fail)}{last}")
        elif reason:
            out.recompiles.append(f"{compile_id} {function}: {_squeeze(reason)}")
        seconds = metrics.get("entire_frame_compile_time_s")
        if not fail:
            out.compiles += 1
        if isinstance(seconds, (int, float)):
            out.compile_time_s += float(seconds)
        out.frames.append(
            FrameCompile(
                compile_id=compile_id,
                function=function,
                time_s=round(float(seconds), 4) if isinstance(seconds, (int, float)) else None,
                backend_time_s=metrics.get("backend_compile_time_s"),
                recompile_reason=reason,
                fail=_first_line(fail) if fail else None,
            )
        )
    out.rank = f"rank {rank}" if rank is not None else f"pid {pid or '?'}"
    out.compile_time_s = round(out.compile_time_s, 3)
    out.graph_breaks = [f"{n}x {text}" for text, n in breaks.most_common()]
    return out


def _squeeze(text: str, limit: int = 240) -> str:
    """A failed guard on one line: its first line, runs of spaces collapsed."""
    return " ".join(_first_line(text, 10_000).split())[:limit]


def _first_line(text: str, limit: int = 200) -> str:
    return next((ln.strip() for ln in text.splitlines() if ln.strip()), "")[:limit]


def read_trace(trace_dir: Path) -> TraceSummary:
    """Every rank's facts from a TORCH_TRACE folder (own reader, no tlparse needed)."""
    logs = sorted(trace_dir.glob(LOG_GLOB)) if trace_dir.is_dir() else []
    summary = TraceSummary(directory=str(trace_dir))
    if not logs:
        summary.note = f"no trace log under {trace_dir} (nothing was compiled, or torch wrote no trace)"
        return summary
    summary.ranks = sorted((read_log(p) for p in logs), key=lambda r: (not r.rank.startswith("rank"), r.rank))
    summary.ranks = [r for r in summary.ranks if r.frames or r.graph_breaks] or summary.ranks[:1]
    first = summary.ranks[0]
    summary.log = first.log
    summary.compiles = first.compiles
    summary.graph_breaks = sum(int(b.split("x ", 1)[0]) for b in first.graph_breaks)
    summary.recompile_reasons = first.recompiles[:30]
    summary.recompile_limit_hits = len(first.recompile_limit_hits)
    return summary


def summarise(trace_dir: Path, out_dir: Path, timeout_s: float = 300.0, html: bool = True) -> TraceSummary:
    """read_trace(), plus tlparse's HTML report of the first rank when tlparse is installed."""
    summary = read_trace(trace_dir)
    if summary.log is None or not html:
        return summary
    tlparse = find_tlparse()
    if tlparse is None:
        summary.note = "tlparse not installed (pip install tlparse): facts read from the raw trace, no HTML report"
        return summary
    try:
        proc = subprocess.run(
            [tlparse, summary.log, "-o", str(out_dir), "--no-browser", "--overwrite"],
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        summary.note = f"tlparse failed: {exc}"
        return summary
    index = out_dir / "index.html"
    if proc.returncode != 0 or not index.is_file():
        summary.note = f"tlparse exited {proc.returncode}: {(proc.stderr or proc.stdout).strip()[-300:]}"
        return summary
    summary.index_html = str(index)
    summary.reader = "json-lines + tlparse"
    return summary


def _fill_counts(summary: TraceSummary, out_dir: Path) -> None:
    """Counts from tlparse's compile_directory.json (kept for reading an existing tlparse output)."""
    directory = out_dir / "compile_directory.json"
    try:
        data = json.loads(directory.read_text())
    except (OSError, ValueError):
        summary.note = "tlparse wrote no compile_directory.json"
        return
    compiles = breaks = 0
    reasons: list[str] = []
    for compile_id, entry in data.items():
        names = [a.get("name", "") for a in entry.get("artifacts", [])]
        if any(n.startswith("dynamo_output_graph") for n in names):
            compiles += 1
        breaks += sum(1 for n in names if n.startswith("dynamo_graph_break_reason"))
        for artifact in entry.get("artifacts", []):
            if artifact.get("name", "").startswith("recompile_reasons") and artifact.get("url"):
                try:
                    raw = (out_dir / artifact["url"]).read_text()
                except OSError:
                    continue
                try:
                    items = json.loads(raw)
                except ValueError:  # some tlparse versions write the reasons as plain text
                    items = [ln for ln in raw.splitlines() if ln.strip()]
                for item in items if isinstance(items, list) else [items]:
                    reasons.append(f"{compile_id}: {str(item).strip()[:300]}")
    summary.compiles = compiles
    summary.graph_breaks = breaks
    summary.recompile_reasons = reasons[:30]

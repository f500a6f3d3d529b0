"""--trace: summarise a TORCH_TRACE directory with tlparse (optional tool)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from model_compile.hard.models import TraceSummary


def find_tlparse() -> str | None:
    """tlparse on PATH, or next to the running interpreter (a venv's bin/)."""
    found = shutil.which("tlparse")
    if found:
        return found
    candidate = Path(sys.executable).parent / "tlparse"
    return str(candidate) if candidate.is_file() else None


def summarise(trace_dir: Path, out_dir: Path, timeout_s: float = 300.0) -> TraceSummary:
    logs = sorted(trace_dir.glob("dedicated_log_torch_trace_*.log")) if trace_dir.is_dir() else []
    if not logs:
        return TraceSummary(note=f"no trace log under {trace_dir} (did the smoke run reach a compile?)")
    log = max(logs, key=lambda p: p.stat().st_size)  # rank 0 compiles the same as others; take the largest
    summary = TraceSummary(log=str(log))
    tlparse = find_tlparse()
    if tlparse is None:
        summary.note = "tlparse not installed (pip install tlparse): raw trace kept, no HTML summary"
        return summary
    try:
        proc = subprocess.run(
            [tlparse, str(log), "-o", str(out_dir), "--no-browser", "--overwrite"],
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
    _fill_counts(summary, out_dir)
    return summary


def _fill_counts(summary: TraceSummary, out_dir: Path) -> None:
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

"""The coverage map's overhead: the compiled twin's steps with the counting on against the same rehearsal with it off.

    python bench/bench_coverage.py                              # the fixture cases, 3 pairs each
    python bench/bench_coverage.py --case vl --pairs 5
    python bench/bench_coverage.py --repo /path/to/mvp-engine --python /path/.venv/bin/python --case qwen3_vl

Each pair runs `model-compile rehearse` twice in fresh processes and fresh output folders, coverage on
(the default) and off (`MODEL_COMPILE_COVERAGE=off`), alternating which goes first. The figure is the compiled
twin's steps on rank 0 (the sum of its micro-steps' seconds, compile included), so the overhead is the
counting's share of the compiled twin's steps, the issue's measure; the eager twin's steps are printed beside
it. Printed per case: min/median/max of both and of the overhead, the measured micro-steps' own seconds, and
the machine's load average before each run. Target: the overhead within 10% of the compiled twin's steps.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "tests" / "hard" / "fixtures" / "rehearsal_repo"
CASES = {
    "vl stage on 2 ranks (qwen3_vl 2+2 layers, FSDP2, tower eager)": (
        FIX / "recipes" / "vlm3_kit",
        ["--model-config", str(FIX / "shallow_qwen3_vl_config.json")],
    ),
    "lm per block, 2 ranks DDP (qwen3 10 layers, bf16, accumulation)": (FIX / "recipes" / "lm_blocks", []),
}
REFERENCE_CASES = {
    "qwen3_vl (FSDP2 2 ranks, checkpointing: its layers eager)": ("recipes/qwen3_vl", []),
    "qwen3 (FSDP2 2 ranks)": ("recipes/qwen3", []),
}


def _steps(out: Path, twin: str) -> tuple[float, float, float]:
    """(seconds of the twin's micro-steps on rank 0, of them the coverage-measured ones, and the counting's own
    cost in this run: the measured micro-steps less as many quiet micro-steps of the same run (median))."""
    try:
        record = json.loads((out / f"record-{twin}-rank0.json").read_text())
    except (OSError, ValueError):
        return float("nan"), float("nan"), float("nan")
    micro = record.get("micro_steps") or []
    total = sum(float(m.get("seconds") or 0) for m in micro)
    measured = [float(m.get("seconds") or 0) for m in micro if m.get("coverage")]
    quiet = [
        float(m.get("seconds") or 0)
        for m in micro
        if not m.get("coverage") and int(m.get("step") or 0) > 0 and not m.get("recompiles") and not m.get("new_graphs")
    ]
    cost = sum(measured) - len(measured) * statistics.median(quiet) if quiet and measured else float("nan")
    return total, sum(measured), cost


def _run(recipe: Path, extra: list[str], python: str | None, coverage: bool) -> dict[str, float]:
    out = Path(tempfile.mkdtemp(prefix="bench-coverage-"))
    env = {**os.environ, "MODEL_COMPILE_COVERAGE": "on" if coverage else "off"}
    cmd = [sys.executable, "-m", "model_compile.cli", "rehearse", str(recipe), "--out", str(out), "--format", "json"]
    cmd += ["--python", python] if python else []
    load = os.getloadavg()[0]
    subprocess.run(cmd + extra, env=env, capture_output=True, text=True, check=False)
    compiled, measured, cost = _steps(out, "compiled")
    eager, _, _ = _steps(out, "eager")
    return {"compiled": compiled, "measured": measured, "cost": cost, "eager": eager, "load": load}


def _mmm(values: list[float], fmt: str = "{:.2f}") -> str:
    return "/".join(fmt.format(v) for v in (min(values), statistics.median(values), max(values)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--case", default="", help="run the cases whose name contains this")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--repo", help="the reference repository (its recipes as cases)")
    parser.add_argument("--python", help="the repository's interpreter")
    args = parser.parse_args()
    cases = {k: v for k, v in CASES.items()} if not args.repo else {}
    if args.repo:
        cases = {k: (Path(args.repo) / rel, extra) for k, (rel, extra) in REFERENCE_CASES.items()}
    for name, (recipe, extra) in cases.items():
        if args.case not in name:
            continue
        on, off = [], []
        for i in range(args.pairs):
            order = (True, False) if i % 2 == 0 else (False, True)
            for coverage in order:
                (on if coverage else off).append(_run(recipe, extra, args.python, coverage))
        overhead = [(a["compiled"] - b["compiled"]) / b["compiled"] for a, b in zip(on, off, strict=True)]
        print(f"{name}")
        print(f"  compiled twin's steps, coverage on  (min/median/max s): {_mmm([r['compiled'] for r in on])}")
        print(f"  compiled twin's steps, coverage off (min/median/max s): {_mmm([r['compiled'] for r in off])}")
        print(f"  overhead, paired (min/median/max): {_mmm(overhead, '{:+.1%}')}  (target: within +10%)")
        print(f"  the measured micro-steps with the counting on (s): {_mmm([r['measured'] for r in on])}")
        within = [r["cost"] / r["compiled"] for r in on]
        print(f"  the counting's cost within each run, share of its compiled steps: {_mmm(within, '{:+.1%}')}")
        print(
            f"  eager twin's steps, coverage on/off (median s): {statistics.median(r['eager'] for r in on):.2f} / "
            f"{statistics.median(r['eager'] for r in off):.2f}"
        )
        print(f"  load average before the runs: {_mmm([r['load'] for r in on + off])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

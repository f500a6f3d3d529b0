"""Wall time and peak memory of the rehearsal, per recipe of the bundled example and per architecture family.

    python bench/bench_rehearsal.py                         # aot_eager, every case
    python bench/bench_rehearsal.py --backend inductor      # the same with inductor
    python bench/bench_rehearsal.py --case qwen3 --runs 3   # one case, min/median/max of 3 runs

Each run is a fresh `model-compile rehearse` process with a fresh output folder
(so a fresh TORCHINDUCTOR_CACHE_DIR: cold compile caches). Printed per case:
wall time; the steps themselves (eager twin + compiled, summed over the steps);
set-up inside the child (tiny checkpoint, engine, both prepare_model() calls);
the tool's overhead (wall minus the child's phases and steps: preflight, static
plan, probe, interpreter start and torch import, reading the record and trace);
its share of the steps; the child's CPU seconds (on a shared machine the steadier
figure: compile with aot_eager is mostly one thread); the child's peak RSS; and the verdict. Targets on a
2-core machine: a vision-language recipe under 90 s with aot_eager; the tool's
overhead under 20% of the steps.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "tests" / "hard" / "fixtures" / "rehearsal_repo" / "recipes"
CASES = {
    "demo:vlm_kit (qwen2_vl, kit)": ROOT / "examples" / "demo_repo" / "recipes" / "vlm_kit",
    "demo:vlm_regional (qwen2_vl, regional)": ROOT / "examples" / "demo_repo" / "recipes" / "vlm_regional",
    "demo:vlm_recompile (qwen2_vl, kit)": ROOT / "examples" / "demo_repo" / "recipes" / "vlm_recompile",
    "qwen3 (per block)": FIX / "lm_blocks",
    "qwen3_vl (whole model, tower eager)": FIX / "vlm3_kit",
    "vit (per block)": FIX / "vit_blocks",
}


def one(recipe: Path, backend: str, steps: int, python: str) -> dict:
    out = Path(tempfile.mkdtemp(prefix="bench-rehearsal-"))
    cmd = [
        sys.executable,
        "-m",
        "model_compile.cli",
        "rehearse",
        str(recipe),
        "--python",
        python,
        "--backend",
        backend,
        "--steps",
        str(steps),
        "--out",
        str(out),
        "--format",
        "json",
    ]
    start = time.monotonic()
    proc = subprocess.run(
        cmd, capture_output=True, text=True, env={**__import__("os").environ, "PYTHONPATH": str(ROOT / "tools")}
    )
    wall = time.monotonic() - start
    data = json.loads(proc.stdout)
    record = json.loads((out / "rehearsal.json").read_text()) if (out / "rehearsal.json").is_file() else {}
    phases = record.get("phases") or {}
    setup = sum(float(p.get("seconds") or 0) for p in phases.values() if isinstance(p, dict))
    step_s = sum(float(s.get("eager_s") or 0) + float(s.get("compiled_s") or 0) for s in record.get("steps") or [])
    overhead = wall - setup - step_s
    return {
        "wall": wall,
        "steps": step_s,
        "setup": setup,
        "overhead": overhead,
        "rss": data.get("peak_rss_mb"),
        "cpu": data.get("cpu_s"),
        "status": data.get("status"),
        "reason": (data.get("reason") or "")[:100],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="aot_eager")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--case", action="append", help="substring of a case name (repeatable)")
    parser.add_argument("--python", default=sys.executable, help="interpreter of the rehearsed repository")
    args = parser.parse_args(argv)
    print(f"backend {args.backend}, {args.steps} steps, {args.runs} run(s) each; figures are min/median/max")
    print(
        f"{'case':<42} {'wall s':>20} {'child CPU s':>11} {'steps s':>8} {'setup s':>8} {'overhead s':>10} {'of steps':>8} {'RSS MB':>7}  status"
    )
    for name, recipe in CASES.items():
        if args.case and not any(c in name for c in args.case):
            continue
        runs = [one(recipe, args.backend, args.steps, args.python) for _ in range(args.runs)]
        walls = sorted(r["wall"] for r in runs)
        mid = runs[[r["wall"] for r in runs].index(statistics.median_low(walls))]
        share = mid["overhead"] / mid["steps"] if mid["steps"] else float("nan")
        spread = f"{walls[0]:.1f}/{statistics.median(walls):.1f}/{walls[-1]:.1f}"
        print(
            f"{name:<42} {spread:>20} {mid['cpu'] or 0:>11.1f} {mid['steps']:>8.1f} {mid['setup']:>8.1f} {mid['overhead']:>10.1f} {share:>8.0%} "
            f"{mid['rss'] or 0:>7.0f}  {mid['status']} {mid['reason']}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

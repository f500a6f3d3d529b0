"""Wall time, the steps and the tool's overhead of the rehearsal, per case.

    python bench/bench_rehearsal.py                          # aot_eager, every case
    python bench/bench_rehearsal.py --case vl --runs 3       # the cases whose name has "vl", 3 runs each
    python bench/bench_rehearsal.py --repo /path/to/mvp-engine --python /path/.venv/bin/python --case openbee

Each run is a fresh `model-compile rehearse` process with a fresh output folder (a fresh
TORCHINDUCTOR_CACHE_DIR: cold compile caches). Printed per case (min/median/max of the wall; the rest from the
median run): the wall time; the steps (every twin's micro-steps on rank 0, summed: forward, backward and the
optimizer, compile included in the compiled twin's first step); the recipe's own set-up (its engine and its
`before_train` outside the steps); the tool's overhead (the wall less those two: process starts and imports,
the tiny checkpoint and rows, reading records and the trace) and its share of the steps; of that, the import
(the fork server's start: Python and one import of torch and transformers, which every twin shares and which a
run of the recipe itself pays once too) and the share of the steps the overhead is without it; the starts
(each twin's own start on rank 0 after its fork, summed); the children's CPU seconds; the peak RSS; the
verdict. Targets on a 2-core machine with aot_eager and cold caches: a VL recipe at
depth (10 text layers, 10 vision blocks) within 180 s, a 2-rank VL stage (FSDP2) within 300 s, the tool's
overhead under 15% of the steps.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "tests" / "hard" / "fixtures" / "rehearsal_repo" / "recipes"
# name -> (recipe folder, extra rehearse options)
CASES = {
    "vl at depth, 1 rank (qwen3_vl 10+10 layers, whole model, tower eager)": (FIX / "vlm3_kit", ["--world-size", "1"]),
    "vl stage on 2 ranks (qwen3_vl 10+10 layers, FSDP2)": (FIX / "vlm3_kit", ["--world-size", "2"]),
    "vl at real depth, 1 rank (Qwen3-VL-2B's 28+24 layers, tiny width)": (
        FIX / "vlm3_kit",
        ["--world-size", "1", "--model-config", str(ROOT / "bench" / "configs" / "qwen3_vl_2b_depth.json")],
    ),
    "lm per block, 2 ranks DDP (qwen3 10 layers, bf16, accumulation)": (FIX / "lm_blocks", []),
    "demo:vlm_kit (own builder, own data)": (ROOT / "examples" / "demo_repo" / "recipes" / "vlm_kit", []),
}
REFERENCE_CASES = {  # with --repo: the reference repository's recipes
    "openbee stage2 (qwen3_vl, FSDP2 2 ranks)": ("recipes/openbee", ["--config-name", "stage2"]),
    "qwen3_vl (best-fit packing, FSDP2 2 ranks)": ("recipes/qwen3_vl", []),
    "qwen3 (LLM packer, FSDP2 2 ranks)": ("recipes/qwen3", []),
    "qwen3_vl at Qwen3-VL-8B's real depth (36+27 layers, FSDP2 2 ranks)": (
        "recipes/qwen3_vl",
        ["--model-config", str(ROOT / "bench" / "configs" / "qwen3_vl_8b_depth.json")],
    ),
}


def _records(out: Path) -> list[dict]:
    found = []
    for path in sorted(out.glob("record-*-rank0.json")):
        try:
            found.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue
    return found


def one(recipe: Path, extra: list[str], backend: str, steps: int, python: str) -> dict:
    out = Path(tempfile.mkdtemp(prefix="bench-rehearsal-"))
    cmd = [sys.executable, "-m", "model_compile.cli", "rehearse", str(recipe), "--python", python]
    cmd += ["--backend", backend, "--steps", str(steps), "--out", str(out), "--format", "json", *extra]
    start = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT / "tools")})
    wall = time.monotonic() - start
    data = (
        json.loads(proc.stdout)
        if proc.stdout.strip().startswith("{")
        else {"status": "?", "reason": proc.stderr[-200:]}
    )
    steps_s, setup_s, starts_s = 0.0, 0.0, 0.0
    for record in _records(out):
        starts_s += float(record.get("started_s") or 0)
        micro = sum(float(m.get("seconds") or 0) for m in record.get("micro_steps") or [])
        steps_s += micro
        phases = record.get("phases") or {}
        train = float((phases.get("train") or {}).get("seconds") or 0)
        setup_s += float((phases.get("engine") or {}).get("seconds") or 0) + max(train - micro, 0.0)
    return {
        "wall": wall,
        "steps": steps_s,
        "setup": setup_s,
        "starts": starts_s,
        "overhead": wall - steps_s - setup_s,
        "import": float(data.get("server_start_s") or 0),
        "rss": data.get("peak_rss_mb"),
        "cpu": data.get("cpu_s"),
        "status": data.get("status"),
        "reason": (data.get("reason") or "")[:100],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="aot_eager")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--case", action="append", help="substring of a case name (repeatable)")
    parser.add_argument("--python", default=sys.executable, help="interpreter of the rehearsed repository")
    parser.add_argument("--repo", type=Path, help="a copy of the reference repository: bench its recipes instead")
    args = parser.parse_args(argv)
    cases = {n: (args.repo / r, e) for n, (r, e) in REFERENCE_CASES.items()} if args.repo else CASES
    print(f"backend {args.backend}, {args.steps} optimizer steps, {args.runs} run(s) each; load {os.getloadavg()}")
    print(
        f"{'case':<68} {'wall s min/med/max':>20} {'CPU s':>7} {'steps s':>8} {'setup s':>8} {'tool s':>7} {'of steps':>8} "
        f"{'import s':>8} {'less it':>7} {'starts s':>8} {'RSS MB':>7}  status"
    )
    for name, (recipe, extra) in cases.items():
        if args.case and not any(c in name for c in args.case):
            continue
        runs = [one(recipe, extra, args.backend, args.steps, args.python) for _ in range(args.runs)]
        walls = sorted(r["wall"] for r in runs)
        mid = runs[[r["wall"] for r in runs].index(statistics.median_low(walls))]
        share = mid["overhead"] / mid["steps"] if mid["steps"] else float("nan")
        less = (mid["overhead"] - mid["import"]) / mid["steps"] if mid["steps"] else float("nan")
        spread = f"{walls[0]:.1f}/{statistics.median(walls):.1f}/{walls[-1]:.1f}"
        print(
            f"{name:<68} {spread:>20} {mid['cpu'] or 0:>7.1f} {mid['steps']:>8.1f} {mid['setup']:>8.1f} {mid['overhead']:>7.1f} "
            f"{share:>8.0%} {mid['import']:>8.1f} {less:>7.0%} {mid['starts']:>8.1f} {mid['rss'] or 0:>7.0f}  "
            f"{mid['status']} {mid['reason']}"
        )
    print(f"load after: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

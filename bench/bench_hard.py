"""Overhead of `review RECIPE --hard`: the tool's wall time against the bare layer commands it runs.

    python bench/bench_hard.py RECIPE [--python PATH] [--runs N]

One tool run first (JSON) gives the layers that were started here and their exact commands (each run from
its `cwd`, the repository root). Then, N times in turn, the tool (`model-compile review RECIPE --hard`) and the
bare layer commands one after the other: paired runs, so a drift of the shared machine hits both sides.
Prints min / median / max of each side (wall and CPU seconds, children included) and of the overhead
(tool - bare) as a share of the bare layers - CPU time is the steadier figure on a shared machine;
the target is under 20 % (issue 19, item 12). Layers that the tool does not start (a smoke run the
repository's helper refuses on this machine) cost neither side anything.
"""

from __future__ import annotations

import argparse
import json
import resource
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path


def _tool(recipe: Path, python: str | None) -> list[str]:
    cmd = [sys.executable, "-m", "model_compile.cli", "review", str(recipe), "--hard", "--format", "json"]
    return cmd + (["--python", python] if python else [])


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _timed(cmd: list[str] | str, cwd: Path | None = None, shell: bool = False) -> tuple[float, float, str]:
    """(wall s, CPU s of the process and its children, stdout)."""
    start, cpu = time.perf_counter(), _cpu()
    proc = subprocess.run(cmd, cwd=cwd, shell=shell, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    return time.perf_counter() - start, _cpu() - cpu, proc.stdout


def _layers(report: dict) -> list[tuple[str, str, Path]]:
    """(name, command, cwd) of every runtime layer the tool started."""
    out = []
    for recipe in report.get("recipes", []):
        for layer in (recipe.get("hard") or {}).get("layers", []):
            if layer.get("started") and layer.get("command") and layer.get("cwd"):
                out.append((layer["name"], layer["command"], Path(layer["cwd"])))
    return out


def _stats(values: list[float]) -> str:
    return f"min {min(values):7.2f}  median {statistics.median(values):7.2f}  max {max(values):7.2f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("recipe", type=Path)
    parser.add_argument("--python", help="the repository's interpreter (passed to the tool as --python)")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    seconds, _, out = _timed(_tool(args.recipe, args.python))
    report = json.loads(out)
    layers = _layers(report)
    if not layers:
        print("the tool started no runtime layer: nothing to compare", file=sys.stderr)
        return 1
    print(f"warm-up tool run {seconds:.2f} s; layers started: {', '.join(n for n, _, _ in layers)}")
    for name, command, cwd in layers:
        print(f"  bare {name}: cd {shlex.quote(str(cwd))} && {command}")
    figures: dict[str, list[float]] = {
        k: [] for k in ("tool wall", "bare wall", "tool cpu", "bare cpu", "wall %", "cpu %")
    }
    for _ in range(args.runs):
        t_wall, t_cpu, _ = _timed(_tool(args.recipe, args.python))
        bare = [_timed(command, cwd, shell=True) for _, command, cwd in layers]
        b_wall, b_cpu = sum(b[0] for b in bare), sum(b[1] for b in bare)
        for key, value in (
            ("tool wall", t_wall),
            ("bare wall", b_wall),
            ("tool cpu", t_cpu),
            ("bare cpu", b_cpu),
            ("wall %", (t_wall - b_wall) / b_wall * 100),
            ("cpu %", (t_cpu - b_cpu) / b_cpu * 100),
        ):
            figures[key].append(value)
    for key, values in figures.items():
        unit = "" if key.endswith("%") else " s"
        label = f"overhead, {key.split()[0]} % of bare" if key.endswith("%") else f"{key}{unit}"
        print(f"{label:<24}: {_stats(values)}" + ("  (target < 20)" if key.endswith("%") else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())

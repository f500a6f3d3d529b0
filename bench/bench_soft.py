"""Soft-validation speed on a large synthetic repository, against the floor of parsing it.

Generates N recipes (default 615) from the rule scaffold with varied
prepare_model bodies. Each repeat runs three fresh processes in turn:

- floor: parse every Python file with ast.parse and every stage YAML with the
  C YAML loader (yaml.CSafeLoader when built), the least any static review
  must do;
- soft, one process: `analyze_path` with MODEL_COMPILE_JOBS=1;
- soft, default: `analyze_path` as the CLI runs it (forked workers when the
  repository is large and the machine has more than one processor).

It prints, for each, the median time inside the process (after imports) and
of the whole process (interpreter start and imports included), and the
median of the ratios pair by pair (each repeat's soft run over the same
repeat's floor run), which holds when a shared machine's speed drifts.

    python bench/bench_soft.py [--recipes 615] [--repeat 7]
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TOOLS = Path(__file__).resolve().parents[1] / "tools"
sys.path.insert(0, str(TOOLS))

KIT = "class MLLMModelKit:\n    def apply_model_compile(self, model, backend, mode):\n        model.compile(backend=backend, mode=mode)\n        return model\n"


def make_repo(root: Path, n: int) -> list[Path]:
    from model_compile.rules.base import Example
    from model_compile.rules.path import DIRECT_BODY, REGIONAL_BODY
    from model_compile.rules.scaffold import CANONICAL_BODY, example_files

    bodies = [CANONICAL_BODY, REGIONAL_BODY, DIRECT_BODY]
    (root / "bench_engine" / "kit").mkdir(parents=True)
    (root / "bench_engine" / "kit" / "model.py").write_text(KIT)
    for i in range(n):
        files = example_files(Example(body=bodies[i % len(bodies)]), prefix=f"recipes/r{i:04d}")
        for rel, text in files.items():
            p = root / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text)
    return repo_files(root)


def repo_files(root: Path) -> list[Path]:
    return sorted(root.rglob("*.py")) + sorted(root.rglob("*.yaml"))


def parse_floor(files: list[Path]) -> None:
    """Read and parse every file once."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    for f in files:
        if f.suffix == ".py":
            ast.parse(f.read_text(), filename=str(f))
        else:
            yaml.load(f.read_text(), Loader=loader)


def _child(kind: str, root: Path) -> None:
    if kind == "floor":
        files = repo_files(root)  # listing is outside the timed part: the floor is parsing alone
        t = time.perf_counter()
        parse_floor(files)
        print(json.dumps({"seconds": time.perf_counter() - t}))
        return
    from model_compile.analyze import analyze_path

    t = time.perf_counter()
    report = analyze_path(root)  # listing included: the analysis finds its own files
    seconds = time.perf_counter() - t
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux; this process, not its workers
    print(json.dumps({"seconds": seconds, "findings": len(report.all_findings()), "peak_mib": peak}))


def _run(kind: str, root: Path, jobs: str | None) -> tuple[float, float, dict[str, float]]:
    env = dict(os.environ)
    env.pop("MODEL_COMPILE_JOBS", None)
    if jobs is not None:
        env["MODEL_COMPILE_JOBS"] = jobs
    t = time.perf_counter()
    out = subprocess.run(
        [sys.executable, __file__, "--child", kind, str(root)], env=env, capture_output=True, text=True, check=True
    )
    wall = time.perf_counter() - t
    data = json.loads(out.stdout.strip().splitlines()[-1])
    return data["seconds"], wall, data


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--recipes", type=int, default=615)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--child", nargs=2, metavar=("KIND", "ROOT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        _child(args.child[0], Path(args.child[1]))
        return
    variants = {"floor": None, "soft, one process": "1", "soft, default": None}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        files = make_repo(root, args.recipes)
        _run("soft", root, None)  # warm-up: page cache, bytecode
        inner: dict[str, list[float]] = {k: [] for k in variants}
        whole: dict[str, list[float]] = {k: [] for k in variants}
        info: dict[str, float] = {}
        for i in range(args.repeat):
            order = list(variants)[i % 3 :] + list(variants)[: i % 3]  # rotate: no variant always runs first
            for name in order:
                seconds, wall, data = _run("floor" if name == "floor" else "soft", root, variants[name])
                inner[name].append(seconds)
                whole[name].append(wall)
                info.update({k: v for k, v in data.items() if k != "seconds"})
    n_py = sum(1 for f in files if f.suffix == ".py")
    print(
        f"recipes: {args.recipes}  python files: {n_py}  yaml files: {len(files) - n_py}  "
        f"findings: {int(info.get('findings', 0))}  processors: {len(os.sched_getaffinity(0))}  repeats: {args.repeat}"
    )
    print(f"{'':20s} {'in process':>12s} {'ratio':>7s} {'whole process':>14s} {'ratio':>7s}")
    for name in variants:
        ratio_in = statistics.median(a / b for a, b in zip(inner[name], inner["floor"], strict=True))
        ratio_whole = statistics.median(a / b for a, b in zip(whole[name], whole["floor"], strict=True))
        print(
            f"{name:20s} {statistics.median(inner[name]):10.3f} s {ratio_in:6.2f}x "
            f"{statistics.median(whole[name]):12.3f} s {ratio_whole:6.2f}x"
        )
    print("ratio: median over repeats of the soft run / the same repeat's floor run")
    print(f"peak resident memory of the analysing process: {info.get('peak_mib', 0):.0f} MiB")


if __name__ == "__main__":
    main()

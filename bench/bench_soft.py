"""Soft-validation speed on a large synthetic repository.

Generates N recipes (default 500) from the rule scaffold with varied
prepare_model bodies, then prints the time to soft-validate them against the
floor of merely parsing the same files - every Python file with ast.parse and
every stage YAML with the C YAML loader (yaml.CSafeLoader when built) - plus
peak memory.

    python bench/bench_soft.py [--recipes 500] [--repeat 3]
"""

from __future__ import annotations

import argparse
import ast
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))

from model_compile.analyze import analyze_path  # noqa: E402
from model_compile.rules.base import Example  # noqa: E402
from model_compile.rules.path import DIRECT_BODY, REGIONAL_BODY  # noqa: E402
from model_compile.rules.scaffold import CANONICAL_BODY, example_files  # noqa: E402

KIT = "class MLLMModelKit:\n    def apply_model_compile(self, model, backend, mode):\n        model.compile(backend=backend, mode=mode)\n        return model\n"
BODIES = [CANONICAL_BODY, REGIONAL_BODY, DIRECT_BODY]


def make_repo(root: Path, n: int) -> list[Path]:
    (root / "bench_engine" / "kit").mkdir(parents=True)
    (root / "bench_engine" / "kit" / "model.py").write_text(KIT)
    for i in range(n):
        files = example_files(Example(body=BODIES[i % len(BODIES)]), prefix=f"recipes/r{i:04d}")
        for rel, text in files.items():
            p = root / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text)
    return sorted(root.rglob("*.py")) + sorted(root.rglob("*.yaml"))


_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def parse_floor(files: list[Path]) -> None:
    """Read and parse every file once: the least any static review must do."""
    for f in files:
        if f.suffix == ".py":
            ast.parse(f.read_text(), filename=str(f))
        else:
            yaml.load(f.read_text(), Loader=_LOADER)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--recipes", type=int, default=500)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        files = make_repo(root, args.recipes)
        parse_times, soft_times = [], []
        for _ in range(args.repeat):
            t = time.perf_counter()
            parse_floor(files)
            parse_times.append(time.perf_counter() - t)
            t = time.perf_counter()
            report = analyze_path(root)
            soft_times.append(time.perf_counter() - t)
        tracemalloc.start()
        analyze_path(root)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    findings = len(report.all_findings())
    parse, soft = statistics.median(parse_times), statistics.median(soft_times)
    n_py = sum(1 for f in files if f.suffix == ".py")
    print(f"recipes: {args.recipes}  python files: {n_py}  yaml files: {len(files) - n_py}  findings: {findings}")
    print(
        f"parse floor:          {parse:.3f} s  ({parse / args.recipes * 1000:.2f} ms/recipe; ast.parse + {_LOADER.__name__})"
    )
    print(f"soft validation:      {soft:.3f} s  ({soft / args.recipes * 1000:.2f} ms/recipe)")
    print(f"ratio soft/parse:     {soft / parse:.2f}x")
    print(f"peak traced memory:   {peak / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()

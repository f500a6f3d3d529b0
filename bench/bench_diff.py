"""Benchmark `model-compile diff` on a generated repository.

Builds a git repo with 50 recipes (a kit, stage YAMLs, README) and 100
commits that each touch one to three recipes (compile moved around the
wrapper, stage YAML flipped, README edits, model code added); every tenth
commit also changes the shared engine module every recipe's run imports (code
and a comment in turn: scope by what runs brings all 50 recipes into scope),
then times:

* one diff across the whole range (base = first commit, head = last),
* a sweep: base = first commit, head = each of the 100 commits,
* one step diff per commit (parent .. commit),
* the CLI end to end once (process start included),
* the import closure alone (parse/imports.py) of every recipe at the last commit.

Usage: PYTHONPATH=tools python bench/bench_diff.py [--recipes 50] [--commits 100] [--keep DIR]
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tools"))
sys.path.insert(0, str(HERE.parent / "tests" / "review"))
sys.path.insert(0, str(HERE.parent / "tests"))  # git_helpers

from fixture_repo import base_files, commit, engine, git, init_repo, recipe_files, write  # noqa: E402

from model_compile.review.run import review  # noqa: E402


def build(root: Path, n_recipes: int, n_commits: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    names = [f"r{i:02d}" for i in range(n_recipes)]
    files = base_files()
    for i, name in enumerate(names):
        files.update(recipe_files(name, compile_at=None if i % 3 == 2 else "before_wrap"))
    init_repo(root, files)
    commits = [git(root, "rev-parse", "HEAD")]
    for k in range(n_commits):
        for name in rng.sample(names, rng.randint(1, 3)):
            action = rng.choice(["move", "yaml", "readme", "model"])
            cls = name.capitalize()
            if action == "move":
                at = rng.choice(["before_wrap", "after_wrap", None])
                write(root, {f"recipes/{name}/engine/{name}_engine.py": engine(cls, at)})
            elif action == "yaml":
                p = root / f"recipes/{name}/configs/train.yaml"
                text = p.read_text()
                if "enabled: false" in text:
                    p.write_text(text.replace("enabled: false", "enabled: true"))
                else:
                    p.write_text(text.replace("enabled: true", "enabled: false"))
            elif action == "readme":
                p = root / f"recipes/{name}/README.md"
                p.write_text(p.read_text() + f"\nnote {k}\n")
            else:
                write(root, {f"recipes/{name}/model/part{k}.py": f"def part_{k}(x):\n    return x + {k}\n"})
        if k % 10 == 9:  # the shared engine module every recipe imports: code, then a comment only
            p = root / "pkg/engine.py"
            extra = f"\n\ndef helper_{k}():\n    return {k}\n" if k % 20 == 9 else f"\n# note {k}\n"
            p.write_text(p.read_text() + extra)
        commits.append(commit(root, f"change {k}"))
    return commits


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--recipes", type=int, default=50)
    ap.add_argument("--commits", type=int, default=100)
    ap.add_argument("--keep", help="build the repo in this folder and keep it")
    a = ap.parse_args()
    tmp = Path(a.keep) if a.keep else Path(tempfile.mkdtemp(prefix="bench-diff-"))
    root = tmp / "repo"
    t0 = time.perf_counter()
    commits = build(root, a.recipes, a.commits)
    print(f"built {a.recipes} recipes, {len(commits) - 1} commits in {time.perf_counter() - t0:.1f} s ({root})")

    t = time.perf_counter()
    whole = review(root, base=commits[0], head=commits[-1])
    dt = time.perf_counter() - t
    print(
        f"range diff first..last: {dt * 1000:.0f} ms  recipes={len(whole.recipes)} "
        f"new={len(whole.new)} fixed={len(whole.fixed)} unchanged={whole.unchanged_count}"
    )

    sweep, step, touched = [], [], []
    for i in range(1, len(commits)):
        t = time.perf_counter()
        review(root, base=commits[0], head=commits[i])
        sweep.append(time.perf_counter() - t)
        t = time.perf_counter()
        r = review(root, base=commits[i - 1], head=commits[i])
        step.append(time.perf_counter() - t)
        touched.append(len(r.recipes))
    for label, xs in (("sweep first..commit[i]", sweep), ("step commit[i-1]..commit[i]", step)):
        print(
            f"{label}: n={len(xs)} total={sum(xs):.2f} s  median={statistics.median(xs) * 1000:.0f} ms  "
            f"p90={sorted(xs)[int(len(xs) * 0.9) - 1] * 1000:.0f} ms  max={max(xs) * 1000:.0f} ms"
        )
    print(f"recipes in scope per step diff: mean={statistics.mean(touched):.1f} max={max(touched)}")
    shared = [x for i, x in enumerate(step) if i % 10 == 9]
    print(
        f"step diffs that change the shared module (every recipe in scope): n={len(shared)} "
        f"median={statistics.median(shared) * 1000:.0f} ms max={max(shared) * 1000:.0f} ms"
    )

    t = time.perf_counter()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "model_compile.cli",
            "diff",
            str(root),
            "--base",
            commits[0],
            "--head",
            commits[-1],
            "--format",
            "json",
        ],
        capture_output=True,
        env={"PYTHONPATH": str(HERE.parent / "tools"), "PATH": "/usr/bin:/bin"},
    )
    print(
        f"CLI end to end (range, json): {(time.perf_counter() - t) * 1000:.0f} ms, exit {proc.returncode}, {len(proc.stdout)} bytes"
    )
    import git as gitpython

    from model_compile.parse.imports import ImportGraph, clear_cache
    from model_compile.review.gittree import GitTree
    from model_compile.review.scope import recipe_roots

    runs = []
    clear_cache()
    with gitpython.Repo(root) as repo:
        for _ in range(3):
            t = time.perf_counter()
            graph = ImportGraph(GitTree(repo.commit(commits[-1])))
            sizes = [
                len(graph.closure(recipe_roots(graph, name)))
                for name in sorted({f.split("/")[1] for f in graph.py if f.startswith("recipes/")})
            ]
            runs.append(time.perf_counter() - t)
    print(
        f"import closure of {len(sizes)} recipes at the last commit: first {runs[0] * 1000:.0f} ms (parsing), "
        f"then {min(runs[1:]) * 1000:.0f} ms (parsed once per content); {statistics.mean(sizes):.1f} files a recipe"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

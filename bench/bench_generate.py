"""`generate` time and memory against engine file size.

Copies the bundled example, grows the `vlm_plain` engine with ordinary helper
functions to each size, and runs `model-compile generate --format json` (a
dry run: plan, diff and the soft review of the planned files) in a fresh
process per size, reporting wall time and peak RSS. Proportional means the
per-MB columns stay roughly flat as the file grows.

    python bench/bench_generate.py [--sizes 0.25 0.5 1 2] [--max-file-bytes N]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "examples" / "demo_repo"
ENGINE = Path("recipes/vlm_plain/engine/vlm_plain_engine.py")
HELPER = (
    "\n\ndef helper_{i}(batch, scale={i}):\n"
    '    """An ordinary helper: a loop, a comprehension, a call."""\n'
    "    total = 0\n"
    "    for item in batch:\n"
    "        total += item * scale\n"
    "    return [total for _ in range(3)]\n"
)


def grow(engine: Path, size: int) -> int:
    """Append helpers until the engine is about `size` bytes; its final size."""
    base = engine.read_text()
    per = len(HELPER.format(i=100000))
    count = max(0, (size - len(base)) // per)
    engine.write_text(base + "".join(HELPER.format(i=i) for i in range(count)))
    return engine.stat().st_size


def run_once(repo: Path) -> tuple[float, float, int]:
    """(wall seconds, peak RSS MiB, exit status) of one dry-run generate in a fresh process."""
    code = (
        "import resource, sys\n"
        "from model_compile.cli import main\n"
        f"rc = main(['generate', {str(repo / ENGINE.parent.parent)!r}, '--format', 'json'])\n"
        "sys.stderr.write(f'\\nmaxrss_kib={resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}\\n')\n"
        "sys.exit(rc)\n"
    )
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", code],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={"PYTHONPATH": str(ROOT / "tools"), "PATH": "/usr/bin:/bin"},
    )
    wall = time.perf_counter() - start
    lines = proc.stderr.strip().splitlines()
    rss = int(lines[-1].split("=", 1)[1]) / 1024 if lines and lines[-1].startswith("maxrss_kib=") else float("nan")
    if proc.returncode:
        print(f"  exit {proc.returncode}: {' '.join(lines[:-1])[:200]}")
    return wall, rss, proc.returncode


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=float, nargs="+", default=[0.25, 0.5, 1.0, 2.0], help="engine sizes in MB")
    ap.add_argument("--max-file-bytes", type=int, default=None, help="set [tool.model-compile] max-file-bytes")
    args = ap.parse_args()
    print(f"{'engine bytes':>12} {'wall s':>8} {'s/MB':>7} {'peak RSS MiB':>13} {'rc':>3}")
    rows = []
    for mb in sorted(args.sizes):
        with tempfile.TemporaryDirectory() as tmp:
            repo = Path(tmp) / "repo"
            shutil.copytree(DEMO, repo)
            if args.max_file_bytes:
                (repo / "pyproject.toml").write_text(f"[tool.model-compile]\nmax-file-bytes = {args.max_file_bytes}\n")
            size = grow(repo / ENGINE, int(mb * 1_000_000))
            wall, rss, rc = run_once(repo)
        rows.append((size, wall, rss))
        print(f"{size:>12,} {wall:>8.2f} {wall / (size / 1e6):>7.2f} {rss:>13.0f} {rc:>3}")
    if len(rows) > 1:
        (s0, w0, _), (s1, w1, _) = rows[0], rows[-1]
        print(f"time grows {w1 / w0:.1f}x for a {s1 / s0:.1f}x larger file (proportional: about {s1 / s0:.1f}x)")


if __name__ == "__main__":
    main()

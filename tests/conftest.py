"""Shared test setup: make the package importable from a source checkout."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "tools") not in sys.path:
    sys.path.insert(0, str(ROOT / "tools"))
# Helpers shared by test folders (git_helpers.py).
if str(ROOT / "tests") not in sys.path:
    sys.path.insert(0, str(ROOT / "tests"))

# Fixture repositories are data: their conftest.py and tests (booby-trapped ones
# included) must never be collected or imported by this suite.
collect_ignore_glob = ["fixtures/*"]


def pytest_configure(config):
    """Keep what the tools cache for the user (the hard-validation probe) out of the real home."""
    import os
    import tempfile

    os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="model-compile-test-cache-")
    # The rehearsal layer (a tiny model, eager vs compiled: tens of seconds) is listed as not run in the
    # suite's --hard runs; tests/hard/test_rehearsal*.py run it on purpose.
    os.environ.setdefault("MODEL_COMPILE_REHEARSAL", "off")
    # -n auto runs one worker a core, and each worker's child processes (pytest in a fixture repository, the
    # rehearsal's ranks) would start one OpenMP thread a core more: on 2 cores, 4+ threads spinning for 2.
    # Tiny models gain nothing from a second thread; one a process keeps the cores busy with work.
    os.environ.setdefault("OMP_NUM_THREADS", "1")

    # With --dist loadfile, xdist hands out whole files, by default the files with the most tests first: the
    # many small rule cases went first and the few long runtime files last, so one of them ran alone at the
    # end. Keep the order below instead (pytest_collection_modifyitems): the long files are handed out first
    # and the short ones fill the workers' tails.
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(session, config, items):
    """Modules marked `hard` (real torch.compile in child processes: most of the suite's time) run first."""
    items.sort(key=lambda item: item.get_closest_marker("hard") is None)

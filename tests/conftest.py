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

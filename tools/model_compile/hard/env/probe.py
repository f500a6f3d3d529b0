"""The self-contained probe put first on the child's PYTHONPATH.

Recipe tests may import `model_compile.runtime.dynamo_adapter` (asserts generated before
they became self-contained, or tests written against it; today's generated asserts load
their own `compile_checks.py` and need no probe). When
the repository's own environment has no model-compile installed (the usual
case), the runner copies the tool's `runtime/` package - which imports only
torch and itself - into a probe folder (`~/.cache/model-compile/probe-<hash>/model_compile/runtime/`, subpackages included,
stable so printed commands stay valid; `<out>/probe` when the cache is not
writable) next to a minimal `model_compile/__init__.py`, and puts it on PYTHONPATH.
The asserts then import the very code the tool ships, with the same API, and
nothing is installed in the repository.

The tool's own site-packages is never put on the child's path: it holds
another Python's compiled extensions (torch among them).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
from pathlib import Path

import model_compile
from model_compile import runtime

PROBE_INIT = '''"""model-compile probe (runtime hooks only), put on PYTHONPATH by `model-compile validate --hard`.

Only `model_compile.runtime` is here; the static tools (`model_compile.api`)
are not: asserts that need them skip, as they do without model-compile.
"""

__version__ = "{version}"
PROBE = True
'''


def runtime_dir() -> Path:
    """The tool's own runtime package folder (the probe's source)."""
    return Path(runtime.__file__).resolve().parent


def _digest() -> str:
    """A short hash of the runtime sources: a new tool version or an edit gets its own probe folder."""
    h = hashlib.sha1(model_compile.__version__.encode())
    for source in sorted(runtime_dir().rglob("*.py")):
        h.update(str(source.relative_to(runtime_dir())).encode() + b"\0" + source.read_bytes())
    return h.hexdigest()[:12]


def cache_root() -> Path:
    """Where probes are kept between runs: `$XDG_CACHE_HOME/model-compile` (default `~/.cache/model-compile`)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "model-compile"


def _write(root: Path) -> None:
    package = root / "model_compile"
    (package / "runtime").mkdir(parents=True)
    (package / "__init__.py").write_text(PROBE_INIT.format(version=model_compile.__version__), encoding="utf-8")
    for source in sorted(runtime_dir().rglob("*.py")):
        target = package / "runtime" / source.relative_to(runtime_dir())
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)


def build(out_dir: Path) -> Path:
    """The probe folder (the PYTHONPATH entry): a stable one in the user cache, so the commands the report
    prints still work after this run; under `out_dir`/probe when the cache cannot be written."""
    stable = cache_root() / f"probe-{_digest()}"
    if (stable / "model_compile" / "runtime" / "dynamo_adapter.py").is_file():
        return stable
    try:
        stable.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".probe-", dir=stable.parent))
        _write(staging)
        try:
            staging.rename(stable)  # atomic: a concurrent run that won the race leaves its own, identical copy
        except OSError:
            shutil.rmtree(staging, ignore_errors=True)
        if (stable / "model_compile" / "runtime" / "dynamo_adapter.py").is_file():
            return stable
    except OSError:
        pass
    root = out_dir / "probe"
    if root.exists():
        shutil.rmtree(root)
    _write(root)
    return root


def on_path(env: dict[str, str], probe_dir: Path) -> dict[str, str]:
    """`env` with the probe folder first on PYTHONPATH (unchanged when it is first already)."""
    current = env.get("PYTHONPATH", "")
    if current.split(os.pathsep)[0] == str(probe_dir):
        return env
    return {**env, "PYTHONPATH": os.pathsep.join(p for p in (str(probe_dir), current) if p)}


def used_by(recipe_root: Path) -> bool:
    """Whether the recipe's tests import `model_compile.runtime`, the one package the probe provides."""
    for path in (recipe_root / "tests").rglob("*.py"):
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if re.search(r"^\s*(?:from|import)\s+model_compile\.runtime\b", text, re.M):
            return True
    return False


def needed(tool_runtime_seen_by_child: str | None) -> bool:
    """Whether the child must get the probe: it cannot import model_compile.runtime, or imports another copy."""
    if not tool_runtime_seen_by_child:
        return True
    return Path(tool_runtime_seen_by_child).resolve().parent != runtime_dir()

"""Which Python runs the recipe's tests, and why.

The recipe's tests belong to the repository: they must run in the
repository's own environment, not in whatever environment model-compile was
installed into. Resolution order (first match wins):

1. ``--python PATH``;
2. ``$MODEL_COMPILE_PYTHON`` (the older spelling of the same choice);
3. the repository's own environment: ``.venv/bin/python`` or ``venv/bin/python``
   at the repository root;
4. an active ``VIRTUAL_ENV`` or conda env (``CONDA_PREFIX``) that is not the
   tool's own;
5. the tool's own interpreter.

Nothing here runs a program: no ``uv run``, no network.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from model_compile.errors import InputError

PYTHON_ENV = "MODEL_COMPILE_PYTHON"
REPO_ENV_DIRS = (".venv", "venv")


@dataclass(frozen=True)
class Interpreter:
    """The interpreter the tests run with."""

    path: str  # absolute, symlinks kept (a venv's python is a link to its base)
    source: str  # "--python", "MODEL_COMPILE_PYTHON", "repo", "VIRTUAL_ENV", "CONDA_PREFIX", "tool"
    reason: str
    env_root: str | None = None  # the environment's prefix when it is a venv/conda env

    @property
    def is_tool(self) -> bool:
        """True when the tests run in the tool's own interpreter."""
        return _same_file(self.path, sys.executable)


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b) and Path(a).absolute().parent == Path(b).absolute().parent
    except OSError:
        return False


def _python_in(prefix: Path) -> Path | None:
    for name in ("bin/python", "bin/python3", "Scripts/python.exe"):
        candidate = prefix / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def _env_root_of(python: Path) -> str | None:
    """The prefix of the venv/conda env `python` lives in, if it is one."""
    prefix = python.parent.parent
    if (prefix / "pyvenv.cfg").is_file() or (prefix / "conda-meta").is_dir():
        return str(prefix)
    return None


def _tool_prefixes() -> set[Path]:
    return {Path(p).resolve() for p in (sys.prefix, os.path.dirname(os.path.dirname(sys.executable)))}


def _explicit(path: str, source: str) -> Interpreter:
    python = Path(os.path.abspath(os.path.expanduser(path)))
    if python.is_dir():
        found = _python_in(python)
        if found is None:
            raise InputError(f"{source} {path}: no bin/python in that folder")
        python = found
    if not python.is_file() or not os.access(python, os.X_OK):
        raise InputError(f"{source} {path}: not an executable file")
    return Interpreter(str(python), source, f"given with {source}", _env_root_of(python))


def resolve(
    repo_root: Path,
    python: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> Interpreter:
    """The interpreter for the recipe tests of `repo_root`, with the reason it was chosen."""
    environ = os.environ if environ is None else environ
    if python:
        return _explicit(python, "--python")
    if environ.get(PYTHON_ENV):
        return _explicit(environ[PYTHON_ENV], PYTHON_ENV)
    for name in REPO_ENV_DIRS:
        found = _python_in(repo_root / name)
        if found is not None:
            return Interpreter(
                str(found), "repo", f"the repository's own environment ({name}/ at {repo_root})", str(repo_root / name)
            )
    tool = _tool_prefixes()
    for var in ("VIRTUAL_ENV", "CONDA_PREFIX"):
        prefix = environ.get(var)
        if not prefix or Path(prefix).resolve() in tool:
            continue
        found = _python_in(Path(prefix))
        if found is not None:
            return Interpreter(str(found), var, f"the active environment ${var}={prefix}", prefix)
    looked = " or ".join(f"{d}/" for d in REPO_ENV_DIRS)
    return Interpreter(
        sys.executable,
        "tool",
        f"model-compile's own interpreter (no {looked} at {repo_root}, no other active environment; "
        "pass --python to choose one)",
        _env_root_of(Path(sys.executable)),
    )


def child_environ(interp: Interpreter, base: Mapping[str, str]) -> dict[str, str]:
    """`base` as if `interp`'s environment were activated (helpers that call `python` find the right one)."""
    env = dict(base)
    if interp.is_tool:
        return env
    for var in ("VIRTUAL_ENV", "CONDA_PREFIX", "PYTHONHOME"):
        env.pop(var, None)
    if interp.env_root:
        root = Path(interp.env_root)
        env["CONDA_PREFIX" if (root / "conda-meta").is_dir() else "VIRTUAL_ENV"] = str(root)
    bin_dir = str(Path(interp.path).parent)
    env["PATH"] = os.pathsep.join(p for p in (bin_dir, base.get("PATH", "")) if p)
    return env

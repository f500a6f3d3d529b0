"""Shared helpers for the hostile-input tests: repos on disk, exact tree state, CLI runs."""

from __future__ import annotations

import io
import os
import signal
import stat
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from pathlib import Path

import git

from model_compile.rules.base import Example
from model_compile.rules.scaffold import example_files

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "demo_repo"
RECIPE = "recipes/example"
ENGINE = f"{RECIPE}/engine/example_engine.py"


def write_files(root: Path, files: dict[str, str | bytes]) -> Path:
    """Write `files` (relative path -> text or bytes) under `root`, byte for byte."""
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return root


def commit_all(root: Path, message: str = "fixture") -> None:
    """`git init` (when needed), add everything, commit."""
    repo = git.Repo.init(root)
    with repo.config_writer() as cw:
        cw.set_value("user", "name", "t")
        cw.set_value("user", "email", "t@example.com")
    repo.git.add(A=True)
    repo.index.commit(message)


def scaffold_repo(root: Path, ex: Example | None = None, *, use_git: bool = True) -> Path:
    """The rule scaffold's kit recipe (`recipes/example`) as a repository on disk."""
    write_files(root, example_files(ex or Example()))
    if use_git:
        commit_all(root)
    return root


def tree_state(root: Path) -> dict[str, tuple[str, int, bytes | str]]:
    """Every entry under `root` (not .git): kind, permission bits, and bytes (files) or
    link target. Equal states mean a byte-identical tree, modes included."""
    out: dict[str, tuple[str, int, bytes | str]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for name in [*dirnames, *filenames]:
            path = Path(dirpath) / name
            st = os.lstat(path)
            rel = path.relative_to(root).as_posix()
            mode = stat.S_IMODE(st.st_mode)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", mode, os.readlink(path))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", mode, "")
            elif stat.S_ISREG(st.st_mode):
                out[rel] = ("file", mode, path.read_bytes())
            else:
                out[rel] = ("special", mode, "")
    return out


def leftovers(root: Path) -> list[str]:
    """Temp or backup files a write left behind."""
    return [p.name for p in root.rglob("*") if p.name.endswith((".mc-tmp", ".mc-bak"))]


def cli(*argv: str) -> tuple[int, str, str]:
    """`model-compile ARGV` in this process, as the console script runs it (exit code, stdout, stderr)."""
    from model_compile.cli import main

    out, err = io.StringIO(), io.StringIO()
    env_debug = os.environ.pop("MODEL_COMPILE_DEBUG", None)
    try:
        with redirect_stdout(out), redirect_stderr(err):
            try:
                code = main(list(argv))
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 2
    finally:
        if env_debug is not None:
            os.environ["MODEL_COMPILE_DEBUG"] = env_debug
    return code, out.getvalue(), err.getvalue()


def cli_subprocess(*argv: str, cwd: Path | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """`model-compile ARGV` in a fresh interpreter (for crashes and hangs), under a wall-clock limit."""
    env = {"PYTHONPATH": str(ROOT / "tools"), "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    return subprocess.run(
        [sys.executable, "-m", "model_compile.cli", *argv],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd or ROOT,
        timeout=timeout,
    )


def assert_one_line_error(code: int, err: str, needle: str = "") -> None:
    """Exit 2, one line on stderr, no traceback, `needle` in it."""
    assert code == 2, err
    assert "Traceback" not in err and "internal error" not in err, err
    assert err.strip().count("\n") == 0, err
    assert needle in err, err


@contextmanager
def time_limit(seconds: int) -> Iterator[None]:
    """Fail (instead of hanging the suite) when the body runs longer than `seconds`."""

    def _expired(signum: int, frame: object) -> None:
        raise TimeoutError(f"took longer than {seconds} s: a read blocked or ran away")

    previous = signal.signal(signal.SIGALRM, _expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)

"""Run one command in its own process group, with a timeout that kills the whole group."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass
class ProcResult:
    exit_status: int | None
    duration_s: float
    timed_out: bool
    output: str


def _kill_group(proc: subprocess.Popen, grace_s: float = 5.0) -> None:
    try:
        pgid = os.getpgid(proc.pid)
    except ProcessLookupError:
        pgid = None
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 10.0)):
        if pgid is not None:
            try:
                os.killpg(pgid, sig)
            except ProcessLookupError:
                pass
        try:
            proc.wait(timeout=wait)
            break
        except subprocess.TimeoutExpired:
            continue
    # The leader may be gone while group members live on: make sure of them too.
    if pgid is not None:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def run(cmd: list[str], cwd: Path, env: dict[str, str], timeout_s: float, log_path: Path) -> ProcResult:
    """Run `cmd`, stdout+stderr into `log_path`; kill the process group on timeout or Ctrl-C."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    timed_out = False
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            cmd,
            cwd=cwd,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc)
        except KeyboardInterrupt:
            _kill_group(proc, grace_s=2.0)
            raise
        else:
            # pytest exited: reap anything it left behind in its group (spawned workers).
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    duration = time.monotonic() - start
    output = log_path.read_text(encoding="utf-8", errors="replace")
    return ProcResult(None if timed_out else proc.returncode, duration, timed_out, output)


def tail(text: str, lines: int = 40, chars: int = 4000) -> str:
    out = "\n".join(text.rstrip().splitlines()[-lines:])
    return out[-chars:]

"""Run one command in its own process group, with a timeout that kills the whole group."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

_LOCAL = threading.local()


def cancel_with(*events: threading.Event | None) -> None:
    """The events that end this thread's processes (a run in a thread of its own - a recipe's, the base's beside
    the head's - is ended by them, since signals reach the main thread only): any of them set."""
    _LOCAL.cancel = tuple(e for e in events if e is not None)


def cancel_events() -> tuple[threading.Event, ...]:
    """This thread's cancel events (a thread it starts inherits them)."""
    return tuple(getattr(_LOCAL, "cancel", ()) or ())


def cancelled() -> bool:
    return any(e.is_set() for e in cancel_events())


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
            deadline = start + timeout_s
            while proc.poll() is None:  # polled: a thread of its own is ended by its cancel event, not a signal
                if time.monotonic() >= deadline:
                    raise subprocess.TimeoutExpired(cmd, timeout_s)
                if cancelled():
                    raise KeyboardInterrupt
                time.sleep(0.2)
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


@dataclass
class RankResult:
    rank: int
    exit_status: int | None
    log: str
    killed: str = ""  # why the tool ended it: "timeout", "rank <r> exited <code>", "interrupted", "memory: ..."
    last_rss_mb: float | None = None  # resident memory (its process tree) at the last sample, when watched
    peak_rss_mb: float | None = None
    exit_peak_rss_mb: float | None = None  # the kernel's peak for the rank's own process, read when it was reaped


Watch = Callable[[dict[int, int]], "str | None"]  # {rank: pid} -> a reason to end every rank, or None


def take_rss(results: list[RankResult], watch: Watch | None) -> None:
    """Copy a memory watch's samples onto the ranks' results."""
    sampled = getattr(watch, "rss", None)
    if callable(sampled):
        for result in results:
            result.last_rss_mb, result.peak_rss_mb = sampled(result.rank)


def run_ranks(
    cmd: list[str],
    cwd: Path,
    envs: list[dict[str, str]],
    timeout_s: float,
    logs: list[Path],
    grace_s: float = 20.0,
    watch: Watch | None = None,
) -> tuple[list[RankResult], float, bool]:
    """One process group per rank, started together. When a rank exits non-zero the others get `grace_s` to
    finish (they would wait in a collective for it forever), then are ended; on timeout or Ctrl-C every group
    is ended; when `watch` gives a reason (the machine runs out of memory) every group is ended with it.
    Returns (per-rank results, seconds, timed out)."""
    start = time.monotonic()
    procs: list[subprocess.Popen] = []
    handles = []
    results = [RankResult(rank=i, exit_status=None, log=str(log)) for i, log in enumerate(logs)]
    try:
        for env, log in zip(envs, logs, strict=True):
            log.parent.mkdir(parents=True, exist_ok=True)
            handle = open(log, "wb")  # noqa: SIM115 - closed in finally
            handles.append(handle)
            procs.append(
                subprocess.Popen(
                    cmd,
                    cwd=cwd,
                    env=env,
                    stdout=handle,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                )
            )
        deadline = start + timeout_s
        failed_at: float | None = None
        while True:
            codes = [p.poll() for p in procs]
            if all(c is not None for c in codes):
                break
            now = time.monotonic()
            bad = [i for i, c in enumerate(codes) if c not in (None, 0)]
            if bad and failed_at is None:
                failed_at = now
            short = watch({i: p.pid for i, p in enumerate(procs) if codes[i] is None}) if watch else None
            short = "interrupted" if cancelled() else short
            if short:
                for i, p in enumerate(procs):
                    if p.poll() is None:
                        _kill_group(p, grace_s=2.0)
                        results[i].killed = short
                break
            if now >= deadline or (failed_at is not None and now - failed_at > grace_s):
                why = "timeout" if now >= deadline else f"rank {bad[0]} exited {codes[bad[0]]}"
                for i, p in enumerate(procs):
                    if p.poll() is None:
                        _kill_group(p, grace_s=2.0)
                        results[i].killed = why
                break
            time.sleep(0.2)
    except KeyboardInterrupt:
        for i, p in enumerate(procs):
            if p.poll() is None:
                _kill_group(p, grace_s=2.0)
                results[i].killed = "interrupted"
        raise
    finally:
        for p in procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)  # whatever a rank left in its group
            except (ProcessLookupError, PermissionError):
                pass
        for handle in handles:
            handle.close()
    for i, p in enumerate(procs):
        results[i].exit_status = p.returncode if not results[i].killed else None
    take_rss(results, watch)
    timed_out = any(r.killed == "timeout" for r in results)
    return results, time.monotonic() - start, timed_out

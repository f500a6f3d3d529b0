"""The parent's side of the rehearsal's fork server (`model_compile.runtime.rehearsal.zygote`).

One server a rehearsal, in the repository's interpreter, in its own process group: it imports torch and
transformers once, then forks every rank of every twin on request, each in its own session (process group).
`run_ranks` has the semantics of `proc.run_ranks`: the ranks of one twin start together; a rank that exits
non-zero gives the others `grace_s`, then every group is ended; a timeout or Ctrl-C ends every group. Closing
the server ends it and any child it still has. Where the server cannot start (no `os.fork`, or it dies before
it is ready) the caller falls back to one process per rank.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from model_compile.hard.env.proc import RankResult, Watch, cancelled, take_rss

READY_S = 120.0


class ForkServerError(Exception):
    """The server did not start (the reason is the message)."""


def _kill(pid: int, grace_s: float = 0.5) -> None:
    """TERM, then KILL, the session `pid` leads; each waits (polling) up to `grace_s` for the group to be gone."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        end = time.monotonic() + grace_s
        while time.monotonic() < end:
            try:
                os.killpg(pid, 0)
            except (ProcessLookupError, PermissionError):
                return
            time.sleep(0.02)


class ForkServer:
    def __init__(self, python: str, cwd: Path, env: dict[str, str], log: Path) -> None:
        if not hasattr(os, "fork"):
            raise ForkServerError("this platform has no fork")
        log.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(log, "wb")  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen(
            [python, "-m", "model_compile.runtime.rehearsal.zygote"],
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            start_new_session=True,
            text=True,
            bufsize=1,
        )
        self.messages: queue.Queue[dict[str, Any]] = queue.Queue()
        self.live: set[int] = set()
        threading.Thread(target=self._read, daemon=True).start()
        started = time.monotonic()
        try:
            first = self.messages.get(timeout=READY_S)
        except queue.Empty:
            self.close()
            raise ForkServerError(f"the fork server was not ready after {READY_S:g} s") from None
        if "ready" not in first:
            self.close()
            raise ForkServerError(f"the fork server did not start (see {log})")
        self.ready_s = round(time.monotonic() - started, 2)  # its interpreter's start and the shared imports

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                self.messages.put(json.loads(line))
            except ValueError:
                continue
        self.messages.put({"gone": True})

    def run_ranks(
        self,
        argv: list[str],
        envs: list[dict[str, str]],
        timeout_s: float,
        logs: list[Path],
        grace_s: float = 20.0,
        watch: Watch | None = None,
    ) -> tuple[list[RankResult], float, bool]:
        start = time.monotonic()
        results = [RankResult(rank=i, exit_status=None, log=str(log)) for i, log in enumerate(logs)]
        pids: dict[int, int] = {}  # rank -> pid
        exited: dict[int, int] = {}  # rank -> exit code
        assert self.proc.stdin is not None
        try:
            for rank, (env, log) in enumerate(zip(envs, logs, strict=True)):
                log.parent.mkdir(parents=True, exist_ok=True)
                request = {"spawn": rank, "argv": argv, "env": env, "log": str(log)}
                self.proc.stdin.write(json.dumps(request) + "\n")
                self.proc.stdin.flush()
            deadline = start + timeout_s
            failed_at: float | None = None
            while len(exited) < len(logs):
                now = time.monotonic()
                short = watch({r: p for r, p in pids.items() if r not in exited}) if watch else None
                short = "interrupted" if cancelled() else short
                if short:
                    for rank, pid in pids.items():
                        if rank not in exited:
                            _kill(pid)
                            results[rank].killed = short
                    break
                if now >= deadline or (failed_at is not None and now - failed_at > grace_s):
                    why = "timeout" if now >= deadline else "a rank failed"
                    bad = next((r for r, c in exited.items() if c != 0), None)
                    if bad is not None:
                        why = f"rank {bad} exited {exited[bad]}"
                    for rank, pid in pids.items():
                        if rank not in exited:
                            _kill(pid)
                            results[rank].killed = "timeout" if now >= deadline else why
                    break
                try:
                    message = self.messages.get(timeout=0.2)
                except queue.Empty:
                    continue
                if message.get("gone"):
                    for rank in range(len(logs)):
                        if rank not in exited:
                            results[rank].killed = "the fork server died"
                    break
                if "spawned" in message:
                    pids[int(message["spawned"])] = int(message["pid"])
                    self.live.add(int(message["pid"]))
                elif "exited" in message:
                    rank = int(message["exited"])
                    exited[rank] = int(message["code"])
                    if message.get("maxrss_mb") is not None:
                        results[rank].exit_peak_rss_mb = float(message["maxrss_mb"])
                    self.live.discard(int(message["pid"]))
                    if exited[rank] != 0 and failed_at is None:
                        failed_at = time.monotonic()
        except KeyboardInterrupt:
            for rank, pid in pids.items():
                if rank not in exited:
                    _kill(pid)
                    results[rank].killed = "interrupted"
            raise
        finally:
            for pid in pids.values():
                try:
                    os.killpg(pid, signal.SIGKILL)  # whatever a rank left in its session
                except (ProcessLookupError, PermissionError):
                    pass
        for rank in range(len(logs)):
            results[rank].exit_status = exited.get(rank) if not results[rank].killed else None
        take_rss(results, watch)
        timed_out = any(r.killed == "timeout" for r in results)
        return results, time.monotonic() - start, timed_out

    def close(self) -> None:
        """End the server and every session it still has."""
        for pid in list(self.live):
            _kill(pid)
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        self._log.close()

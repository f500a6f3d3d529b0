"""A fork server for the rehearsal's children: torch and transformers imported once, each child forked from it.

`python -m model_compile.runtime.rehearsal.zygote` imports torch and transformers (in the repository's
interpreter, with the environment every child shares), says `{"ready": ...}` on stdout, then reads one JSON
command a line on stdin: `{"spawn": ID, "argv": [SPEC, TWIN], "env": {...}, "log": PATH}` forks a child that
starts its own session (its process group, which the parent ends), writes to PATH, takes the environment given
and runs `child.main(argv)`; the server answers `{"spawned": ID, "pid": PID}` and, when the child exits,
`{"exited": ID, "pid": PID, "code": CODE, "maxrss_mb": MB}` (the kernel's peak of its resident memory). End of stdin ends the server. Each child is still a fresh run of
the recipe: nothing of the repository, and no compile, happens before the fork; what is shared is only the
import of torch and transformers, which costs each child seconds otherwise.

Environment that torch or transformers read at import (thread counts, the hub's offline switch) is the
server's and so the same for every child; TORCH_TRACE, read when torch sets its logging up, is set up again in
a child that has it.
"""

from __future__ import annotations

import json
import os
import select
import signal
import sys
from typing import Any

_WAKE: list[int] = []  # the server's wake-up pipe (read end, write end), closed in each child


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 512):
            pass
    except BlockingIOError:
        pass


def _say(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def _retrace() -> None:
    """torch's structured trace handler is made once, at import, from TORCH_TRACE: make it again for a child."""
    if not os.environ.get("TORCH_TRACE"):
        return
    from torch._logging import _internal

    _internal.LOG_TRACE_HANDLER = None
    _internal._init_logs()


def _run_child(message: dict[str, Any]) -> None:
    """In the forked child: its session, its log, its environment, then the rehearsal child itself."""
    code = 3
    try:
        signal.set_wakeup_fd(-1)  # the server's wake-up pipe and SIGCHLD handler are not the child's
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for wake in _WAKE:
            os.close(wake)
        os.setsid()
        fd = os.open(message["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.environ.clear()
        os.environ.update(message["env"])
        _retrace()
        from model_compile.runtime.rehearsal.child import main

        code = main(list(message["argv"]))
    except BaseException as exc:  # noqa: BLE001 - the exit code says it; the child's own record says more
        try:
            sys.stderr.write(f"model-compile zygote child: {type(exc).__name__}: {exc}\n")
            sys.stderr.flush()
        except OSError:
            pass
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except OSError:
            pass
        os._exit(code if isinstance(code, int) else 3)


def main() -> int:
    import torch  # noqa: F401 - imported once here, for every child
    import torch.distributed  # noqa: F401
    import transformers  # noqa: F401
    from transformers import modeling_utils  # noqa: F401

    from model_compile.runtime.rehearsal import child  # noqa: F401 - the child's own imports, too

    # a child's exit wakes the loop at once (SIGCHLD writes a byte to a pipe select watches): the parent hears
    # of it without waiting out a poll interval, a fifth of a second each twin otherwise
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    _WAKE.extend((wake_r, wake_w))
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_w)
    _say({"ready": os.getpid()})
    children: dict[int, Any] = {}
    open_input = True
    pending = b""  # stdin read raw: a buffered readline would keep a second request where select cannot see it
    fd = sys.stdin.fileno()
    while open_input or children:
        if open_input:
            ready, _, _ = select.select([fd, wake_r], [], [], 0.2)
            if wake_r in ready:
                _drain(wake_r)
            if fd in ready:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    open_input = False
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    if not line.strip():
                        continue
                    message = json.loads(line)
                    sys.stdout.flush()
                    pid = os.fork()
                    if pid == 0:
                        _run_child(message)
                    children[pid] = message["spawn"]
                    _say({"spawned": message["spawn"], "pid": pid})
        else:
            # the parent is gone (its end of stdin closed) with children left: end their sessions, reap them
            for pid in list(children):
                try:
                    os.killpg(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            if select.select([wake_r], [], [], 0.2)[0]:
                _drain(wake_r)
        while children:
            try:
                pid, status, usage = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                children.clear()
                break
            if pid == 0:
                break
            ident = children.pop(pid, None)
            code = os.waitstatus_to_exitcode(status)
            # the kernel's own peak of the child's resident memory (KB on Linux): known even for a child a
            # signal ended before the parent's memory watch first sampled it
            _say({"exited": ident, "pid": pid, "code": code, "maxrss_mb": round(usage.ru_maxrss / 1024, 1)})
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    # every child is reaped and said: skip the interpreter's teardown of torch (half a second the parent waits)
    os._exit(code)

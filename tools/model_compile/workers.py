"""Run a function over chunks of work in forked processes, results in order.

Soft validation of a large repository is CPU-bound pure Python, one recipe
independent of the next; the chunks after the first go to forked children
while this process does the first, and each child sends its results back
pickled through a pipe. Forking shares everything already built (the file
listing, the kit facts, the imported rules) without pickling it.

Used only where forking is safe and pays: Linux, a single Python thread, not
inside a daemonic multiprocessing worker, and more than one processor.
`MODEL_COMPILE_JOBS=N` caps the processes (1: never fork). A child that dies
or cannot send its results has its chunk redone here; an exception raised in
a child is raised here.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")

ENV = "MODEL_COMPILE_JOBS"
MAX_JOBS = 8


def job_count(items: int, min_per_job: int) -> int:
    """How many processes to use for `items` pieces of work (1: stay in this process)."""
    raw = os.environ.get(ENV, "").strip()
    try:
        cap = int(raw) if raw else MAX_JOBS
    except ValueError:
        cap = 1  # an unreadable setting is not a reason to fork
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    jobs = min(cap, cpus, items // max(1, min_per_job))
    if jobs <= 1 or not _fork_is_safe():
        return 1
    return jobs


def _fork_is_safe() -> bool:
    return (
        sys.platform == "linux"
        and hasattr(os, "fork")
        and threading.active_count() == 1
        and not multiprocessing.current_process().daemon
    )


def split(items: Sequence[T], jobs: int) -> list[Sequence[T]]:
    """`jobs` contiguous chunks, sizes differing by at most one; their concatenation is `items`."""
    size, extra = divmod(len(items), jobs)
    out, start = [], 0
    for i in range(jobs):
        end = start + size + (1 if i < extra else 0)
        out.append(items[start:end])
        start = end
    return out


def map_chunks(fn: Callable[[Sequence[T]], list[R]], chunks: list[Sequence[T]]) -> list[R]:
    """`fn` over every chunk, the first here and the rest in forked children; results concatenated in order."""
    if len(chunks) <= 1:
        return fn(chunks[0]) if chunks else []
    for stream in (sys.stdout, sys.stderr):  # a child must not write out what this process buffered
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
    children: list[tuple[int, int, Sequence[T]]] = []  # (pid, read end, chunk), not yet collected
    try:
        for chunk in chunks[1:]:
            children.append((*_fork(fn, chunk), chunk))
        results = fn(chunks[0])
        while children:
            pid, fd, chunk = children.pop(0)
            results.extend(_collect(pid, fd, fn, chunk))
        return results
    finally:
        for pid, fd, _ in children:  # only after an exception: stop the children not yet collected
            _close(fd)
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except OSError:
                pass


def _fork(fn: Callable[[Sequence[T]], list[R]], chunk: Sequence[T]) -> tuple[int, int]:
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        code = 0
        try:
            os.close(read_fd)
            try:
                payload = pickle.dumps(("ok", fn(chunk)), protocol=pickle.HIGHEST_PROTOCOL)
            except BaseException as exc:  # noqa: BLE001 - sent to the parent, raised there
                try:
                    payload = pickle.dumps(("error", exc), protocol=pickle.HIGHEST_PROTOCOL)
                except Exception:  # noqa: BLE001 - an exception that does not pickle: the parent redoes the chunk
                    payload = b""
            with os.fdopen(write_fd, "wb") as out:
                out.write(payload)
        except BaseException:  # noqa: BLE001 - nothing may escape a forked child
            code = 1
        finally:
            os._exit(code)
    os.close(write_fd)
    return pid, read_fd


def _collect(pid: int, fd: int, fn: Callable[[Sequence[T]], list[R]], chunk: Sequence[T]) -> list[R]:
    with os.fdopen(fd, "rb") as stream:
        payload = stream.read()
    os.waitpid(pid, 0)
    try:
        status, value = pickle.loads(payload) if payload else (None, None)
    except Exception:  # noqa: BLE001 - a truncated payload: redo the chunk here
        status, value = None, None
    if status == "ok" and isinstance(value, list):
        return value
    if status == "error" and isinstance(value, BaseException):
        raise value
    return fn(chunk)  # the child died or could not send: redo its chunk here


def _close(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass

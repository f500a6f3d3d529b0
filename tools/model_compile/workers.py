"""Run a function over chunks of work in forked processes, results in order.

Soft validation of a large repository is CPU-bound pure Python, one recipe
independent of the next. This process and its forked children claim chunks
of the work one by one from a shared pipe, and each child sends its results
back pickled through a pipe of its own. Forking shares everything already
built (the file listing, the kit facts, the imported rules) without pickling
it.

Used only where forking is safe and pays: Linux, a single Python thread, not
inside a daemonic multiprocessing worker, and more than one processor.
`MODEL_COMPILE_JOBS=N` caps the processes (1: never fork). A child that dies
or cannot send its results has its chunks redone here; an exception raised in
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


def split(items: Sequence[T], count: int) -> list[Sequence[T]]:
    """`count` contiguous chunks, sizes differing by at most one; their concatenation is `items`."""
    size, extra = divmod(len(items), count)
    out, start = [], 0
    for i in range(count):
        end = start + size + (1 if i < extra else 0)
        out.append(items[start:end])
        start = end
    return out


def chunk_count(items: int, jobs: int) -> int:
    """Chunks for `jobs` processes: several each, so one on a slower processor takes fewer (at most 255)."""
    return 1 if jobs <= 1 else max(1, min(MAX_CHUNKS, items, jobs * CHUNKS_PER_JOB))


CHUNKS_PER_JOB = 8
MAX_CHUNKS = 255  # a chunk is claimed by reading its one-byte index from a pipe


def map_chunks(fn: Callable[[Sequence[T]], list[R]], chunks: list[Sequence[T]], jobs: int) -> list[R]:
    """`fn` over every chunk in `jobs` processes (this one and forked children); results concatenated in order.

    Every process claims the next chunk by reading its index from a shared pipe
    until the pipe is empty, so a process on a busy processor simply claims fewer.
    """
    if jobs <= 1 or len(chunks) <= 1:
        return [r for chunk in chunks for r in fn(chunk)]
    if len(chunks) > MAX_CHUNKS:
        raise ValueError(f"at most {MAX_CHUNKS} chunks, got {len(chunks)}")
    for stream in (sys.stdout, sys.stderr):  # a child must not write out what this process buffered
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
    claims_r, claims_w = os.pipe()
    os.write(claims_w, bytes(range(len(chunks))))  # far below a pipe's buffer: never blocks
    os.close(claims_w)  # once the indices are read, the next read sees the end: no more work
    children: list[tuple[int, int]] = []  # (pid, read end), not yet collected
    try:
        for _ in range(jobs - 1):
            children.append(_fork(fn, chunks, claims_r))
        done = _claim_and_run(fn, chunks, claims_r)
        while children:
            pid, fd = children.pop(0)
            done.update(_collect(pid, fd))
        for i, chunk in enumerate(chunks):  # claimed by a child that died: redo here
            if i not in done:
                done[i] = fn(chunk)
        return [r for i in range(len(chunks)) for r in done[i]]
    finally:
        _close(claims_r)
        for pid, fd in children:  # only after an exception: stop the children not yet collected
            _close(fd)
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except OSError:
                pass


def _claim_and_run(fn: Callable[[Sequence[T]], list[R]], chunks: list[Sequence[T]], claims: int) -> dict[int, list[R]]:
    done: dict[int, list[R]] = {}
    while True:
        index = os.read(claims, 1)  # one byte: atomic between the processes sharing the pipe
        if not index:
            return done
        done[index[0]] = fn(chunks[index[0]])


def _fork(fn: Callable[[Sequence[T]], list[R]], chunks: list[Sequence[T]], claims: int) -> tuple[int, int]:
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        code = 0
        try:
            os.close(read_fd)
            try:
                payload = pickle.dumps(("ok", _claim_and_run(fn, chunks, claims)), protocol=pickle.HIGHEST_PROTOCOL)
            except BaseException as exc:  # noqa: BLE001 - sent to the parent, raised there
                try:
                    payload = pickle.dumps(("error", exc), protocol=pickle.HIGHEST_PROTOCOL)
                except Exception:  # noqa: BLE001 - an exception that does not pickle: the parent redoes the chunks
                    payload = b""
            with os.fdopen(write_fd, "wb") as out:
                out.write(payload)
        except BaseException:  # noqa: BLE001 - nothing may escape a forked child
            code = 1
        finally:
            os._exit(code)
    os.close(write_fd)
    return pid, read_fd


def _collect(pid: int, fd: int) -> dict[int, list[R]]:
    """The chunks a child finished ({} when it died or could not send them); its exception raised here."""
    with os.fdopen(fd, "rb") as stream:
        payload = stream.read()
    os.waitpid(pid, 0)
    try:
        status, value = pickle.loads(payload) if payload else (None, None)
    except Exception:  # noqa: BLE001 - a truncated payload: its chunks are redone here
        status, value = None, None
    if status == "ok" and isinstance(value, dict):
        return value
    if status == "error" and isinstance(value, BaseException):
        raise value
    return {}


def _close(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass

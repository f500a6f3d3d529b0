"""Run a function over chunks of work in forked processes, results in order.

Soft validation of a large repository is CPU-bound pure Python, one recipe
independent of the next. This process and its forked children claim chunks
of the work one by one from a shared pipe, and each child sends each
chunk's results back pickled, through a pipe of its own, as soon as they are
done. Forking shares everything already
built (the file listing, the kit facts, the imported rules) without pickling
it.

Used only where forking is safe and pays: Linux, a single Python thread, not
inside a daemonic multiprocessing worker, and more than one processor.
`MODEL_COMPILE_JOBS=N` caps the processes (1: never fork). A child that dies
or cannot send its results has its chunks redone here; an exception raised in
a child is raised here.
"""

from __future__ import annotations

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
    # A daemonic multiprocessing worker has imported multiprocessing; importing it here would only cost time.
    mp = sys.modules.get("multiprocessing")
    return (
        sys.platform == "linux"
        and hasattr(os, "fork")
        and threading.active_count() == 1
        and not (mp is not None and mp.current_process().daemon)
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
    A child sends each chunk's results as soon as they are done, and this
    process takes them in between its own chunks: encoding and decoding
    results overlap with the work instead of following it.
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
    inboxes: list[_Inbox] = []  # children not yet collected
    done: dict[int, list[R]] = {}
    try:
        for _ in range(jobs - 1):
            inboxes.append(_fork(fn, chunks, claims_r))
        while True:
            index = os.read(claims_r, 1)  # one byte: atomic between the processes sharing the pipe
            if not index:
                break
            done[index[0]] = fn(chunks[index[0]])
            for inbox in inboxes:
                inbox.take(done, wait=False)
        while inboxes:
            inboxes[0].take(done, wait=True)
            inboxes.pop(0).reap()
        for i, chunk in enumerate(chunks):  # claimed by a child that died: redo here
            if i not in done:
                done[i] = fn(chunk)
        return [r for i in range(len(chunks)) for r in done[i]]
    finally:
        _close(claims_r)
        for inbox in inboxes:  # only after an exception: stop the children not yet collected
            inbox.kill()


_HEADER = 8  # bytes of a message's length, before the message
PIPE_BYTES = 1 << 20  # a result pipe's size, where Linux allows it


def _fork(fn: Callable[[Sequence[T]], list[R]], chunks: list[Sequence[T]], claims: int) -> _Inbox:
    import fcntl  # Linux only, as forking is

    read_fd, write_fd = os.pipe()
    try:  # room for a few chunks' results, so a child seldom waits for this process to read them
        fcntl.fcntl(read_fd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
    except (AttributeError, OSError):
        pass
    pid = os.fork()
    if pid == 0:  # the child: never returns
        code = 0
        try:
            os.close(read_fd)
            _serve(fn, chunks, claims, write_fd)
        except BaseException:  # noqa: BLE001 - nothing may escape a forked child
            code = 1
        finally:
            os._exit(code)
    os.close(write_fd)
    return _Inbox(pid, read_fd)


def _serve(fn: Callable[[Sequence[T]], list[R]], chunks: list[Sequence[T]], claims: int, out: int) -> None:
    """In a child: claim chunks and send each one's results, or the exception it raised, then stop."""
    while True:
        index = os.read(claims, 1)
        if not index:
            return
        i = index[0]
        failed = False
        try:
            message = pickle.dumps(("ok", i, fn(chunks[i])), protocol=pickle.HIGHEST_PROTOCOL)
        except BaseException as exc:  # noqa: BLE001 - sent to the parent, raised there
            failed = True
            try:
                message = pickle.dumps(("error", i, exc), protocol=pickle.HIGHEST_PROTOCOL)
            except Exception:  # noqa: BLE001 - an exception that does not pickle: the parent redoes the chunk
                return
        _send(out, message)
        if failed:
            return


def _send(fd: int, message: bytes) -> None:
    view = memoryview(len(message).to_bytes(_HEADER, "little") + message)
    while view:
        view = view[os.write(fd, view) :]


class _Inbox:
    """The results a child sends, read as they arrive: length-prefixed pickles of (status, chunk, value)."""

    def __init__(self, pid: int, fd: int):
        self.pid = pid
        self.fd = fd
        self.buffer = bytearray()
        self.open = True
        os.set_blocking(fd, False)

    def take(self, done: dict[int, list[R]], wait: bool) -> None:
        """Decode every whole message that has arrived into `done` (wait: until the child closes its end).

        A child's exception is raised here; a message cut short by a child
        that died is dropped, and its chunk is redone by the caller.
        """
        if wait and self.open:
            os.set_blocking(self.fd, True)
        while self.open:
            try:
                data = os.read(self.fd, PIPE_BYTES)
            except BlockingIOError:
                break
            if not data:
                self.open = False
                break
            self.buffer += data
            self._decode(done)
            if not wait:
                break  # read again between the next chunks: this process has its own to do

    def _decode(self, done: dict[int, list[R]]) -> None:
        buffer = self.buffer
        start = 0
        while len(buffer) - start >= _HEADER:
            size = int.from_bytes(buffer[start : start + _HEADER], "little")
            end = start + _HEADER + size
            if len(buffer) < end:
                break
            try:
                status, index, value = pickle.loads(buffer[start + _HEADER : end])
            except Exception:  # noqa: BLE001 - a message that does not decode: its chunk is redone
                status = None
            start = end
            if status == "ok" and isinstance(value, list):
                done[index] = value
            elif status == "error" and isinstance(value, BaseException):
                del buffer[:start]
                raise value
        del buffer[:start]

    def reap(self) -> None:
        _close(self.fd)
        os.waitpid(self.pid, 0)

    def kill(self) -> None:
        _close(self.fd)
        try:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        except OSError:
            pass


def _close(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass

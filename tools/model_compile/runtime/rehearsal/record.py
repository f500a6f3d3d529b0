"""A rehearsal child's record, written after every phase, and how a failure is told: the recipe's or the tool's."""

from __future__ import annotations

import contextlib
import json
import os
import resource
import sys
import time
import traceback
from pathlib import Path
from typing import Any


class Record:
    """The record the parent reads; written after every phase."""

    def __init__(self, path: Path, twin: str, rank: int) -> None:
        self.path = path
        self.twin = twin
        self._t0 = time.perf_counter()
        self.data: dict[str, Any] = {
            "schema": "model-compile-rehearsal/2",
            "twin": twin,
            "rank": rank,
            "phases": {},
            "status": "running",
        }

    def phase(self, name: str, **facts: Any) -> None:
        self.data["phases"][name] = {"ok": True, **facts, "at_s": self.age()}
        self.flush()

    def stop(self, phase: str, status: str, reason: str, detail: str = "", fault: str = "recipe") -> None:
        self.data["phases"][phase] = {"ok": False, "reason": reason, "detail": detail[-4000:], "at_s": self.age()}
        self.data.update(status=status, stopped_at=phase, reason=reason, fault=fault)
        self.flush()

    def age(self) -> float:
        """Seconds since this record was made (phases carry it as `at_s`: where a child's time went)."""
        return round(time.perf_counter() - self._t0, 3)

    def flush(self) -> None:
        self.data["flushed_s"] = self.age()
        own = resource.getrusage(resource.RUSAGE_SELF)
        kids = resource.getrusage(resource.RUSAGE_CHILDREN)
        scale = 1024 * 1024 if sys.platform == "darwin" else 1024
        self.data["peak_rss_mb"] = round(max(own.ru_maxrss, kids.ru_maxrss) / scale, 1)
        self.data["cpu_s"] = round(own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime, 2)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=2, default=str))
        tmp.replace(self.path)


def process_age_s() -> float | None:
    """Seconds since this process was created (Linux /proc; None elsewhere): the interpreter's start and imports."""
    try:
        ticks = int(open("/proc/self/stat", encoding="ascii").read().rsplit(")", 1)[1].split()[19])
        uptime = float(open("/proc/uptime", encoding="ascii").read().split()[0])
        return round(uptime - ticks / os.sysconf("SC_CLK_TCK"), 2)
    except (OSError, ValueError, IndexError):
        return None


def short_error(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    return " ".join(text.splitlines()[0].split())[:400]


_REPO_ROOT: list[str] = []


def tool_frame(tb: Any) -> str | None:
    """`file:line in function` when the error is the tool's own: the innermost frame that is either the tool's
    code or the repository's is the tool's (library frames are attributed to whoever called them)."""
    tool_dir = str(Path(__file__).resolve().parents[1])
    repo = _REPO_ROOT[0] if _REPO_ROOT else None
    for frame in reversed(traceback.extract_tb(tb)):
        path = str(Path(frame.filename).resolve()) if frame.filename and not frame.filename.startswith("<") else ""
        if path.startswith(tool_dir):
            rel = path[len(str(Path(tool_dir).parents[1])) :].lstrip("/")
            return f"{rel}:{frame.lineno} in {frame.name}"
        if repo and path.startswith(repo + os.sep):
            return None
    return None


class NotHere(Exception):
    """Something the recipe's run needs is not on this machine (a model's config, the memory a model needs): the
    rehearsal is not run, with this reason (the option or change that supplies it); never the recipe's failure."""

    fault = "environment"


def not_here(exc: BaseException | None) -> NotHere | None:
    """The NotHere an exception is, or was raised from (a recipe may wrap it in its own error)."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, NotHere):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


class Stop(Exception):
    """A phase could not be done: status not-run (set-up), failed (compile's fault) or tool-error."""

    def __init__(self, phase: str, status: str, reason: str, detail: str = "", fault: str = "recipe") -> None:
        super().__init__(reason)
        self.phase, self.status, self.reason, self.detail, self.fault = phase, status, reason, detail, fault


@contextlib.contextmanager
def guarded(phase: str, status: str, what: str) -> Any:
    """Any exception of the block becomes Stop(phase, ...); one raised in the tool's own frames is a tool error."""
    try:
        yield
    except Stop:
        raise
    except Exception as exc:  # noqa: BLE001 - the reason goes into the record
        missing = not_here(exc)
        if missing is not None:
            raise Stop(phase, "not-run", str(missing), traceback.format_exc(), fault=missing.fault) from exc
        frame = tool_frame(exc.__traceback__)
        if frame:
            raise Stop(
                phase,
                "tool-error",
                f"model-compile's own code failed at {frame}: {short_error(exc)}",
                traceback.format_exc(),
                fault="tool",
            ) from exc
        raise Stop(phase, status, f"{what}: {short_error(exc)}", traceback.format_exc()) from exc


def set_repo_root(path: str) -> None:
    _REPO_ROOT[:] = [path]

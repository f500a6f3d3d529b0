"""A rehearsal child's record, written after every phase, and how a failure is told: the recipe's or the tool's."""

from __future__ import annotations

import contextlib
import json
import os
import re
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

    def stop(
        self, phase: str, status: str, reason: str, detail: str = "", fault: str = "recipe", frames: Any = None
    ) -> None:
        self.data["phases"][phase] = {"ok": False, "reason": reason, "detail": detail[-4000:], "at_s": self.age()}
        self.data.update(status=status, stopped_at=phase, reason=reason, fault=fault)
        if frames:
            self.data["raised_in"] = frames  # what raised: the parent's evidence of whose failure it is
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
    """`Type: the first line of its message that says something` (a message may start with a blank line)."""
    first = next((line for line in str(exc).splitlines() if line.strip()), "")
    return " ".join(f"{type(exc).__name__}: {first}".split())[:400]


_REPO_ROOT: list[str] = []
_PASS_THROUGH = (os.sep + os.path.join("models", "intercept.py"),)  # the hooks around the recipe's own calls


def tool_frame(tb: Any) -> str | None:
    """`file:line in function` when the error is the tool's own: the innermost frame that is either the tool's
    code or the repository's is the tool's (library frames are attributed to whoever called them)."""
    tool_dir = str(Path(__file__).resolve().parents[1])
    repo = _REPO_ROOT[0] if _REPO_ROOT else None
    for frame in reversed(traceback.extract_tb(tb)):
        path = str(Path(frame.filename).resolve()) if frame.filename and not frame.filename.startswith("<") else ""
        if path.endswith(_PASS_THROUGH) and frame.name in ("from_pretrained", "__init__"):
            continue  # a hook that only passes the recipe's call on (the error is of what it called)
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
    part = ""


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
        self.frames: dict[str, Any] | None = None

    def because(self, exc: BaseException) -> Stop:
        """The same stop, with what raised `exc` (its frames, told by where they lie) for the parent."""
        from model_compile.runtime.rehearsal.blame import raised_in

        try:
            self.frames = raised_in(exc, _REPO_ROOT[0] if _REPO_ROOT else None)
            missing = not_here(exc)
            if missing is not None and missing.part:
                self.frames["part"] = missing.part  # which stand-in: its model or its config
        except Exception:  # noqa: BLE001, S110 - the evidence is missing, the stop is not
            pass
        return self


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
            raise Stop(phase, "not-run", str(missing), traceback.format_exc(), fault=missing.fault).because(
                exc
            ) from exc
        frame = tool_frame(exc.__traceback__)
        if frame:
            raise Stop(
                phase,
                "tool-error",
                f"model-compile's own code failed at {frame}: {short_error(exc)}",
                traceback.format_exc(),
                fault="tool",
            ).because(exc) from exc
        raise Stop(phase, status, f"{what}: {short_error(exc)}", traceback.format_exc()).because(exc) from exc


def set_repo_root(path: str) -> None:
    _REPO_ROOT[:] = [path]


def not_on_machine(exc: BaseException, spec: dict[str, Any]) -> str | None:
    """What a recipe's error says is missing from this machine, not wrong in the recipe: a package it imports
    (an ImportError), or a file the stage config names (a FileNotFoundError of a path under a config value,
    with the key to set). None for anything else."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if _package_missing(exc, spec):
            return f"{short_error(exc)} (a package missing from this environment, not a fault of the recipe)"
        for missing in _missing_paths(exc):
            key = _config_key_of(missing, spec)
            if key:
                return (
                    f"{short_error(exc)}: a path of the stage config ({key[0]}: {key[1]}) that is not on this "
                    f"machine; make it exist, set it with --config-override {key[0]}=..., or rehearse another stage"
                )
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
    return None


def _config_key_of(missing: str, spec: dict[str, Any]) -> tuple[str, str] | None:
    """(key, value) of the stage config whose path value the missing file is, or lies under."""
    try:
        import yaml

        data = yaml.safe_load(Path(spec["config_file"]).read_text(encoding="utf-8"))
    except (OSError, KeyError, ValueError, ImportError):
        return None
    root = str(spec.get("repo_root") or os.getcwd())
    wanted = os.path.normpath(os.path.join(root, missing))
    stack: list[tuple[str, Any]] = [("", data)]
    while stack:
        prefix, node = stack.pop()
        if isinstance(node, dict):
            stack += [(f"{prefix}{k}.", v) for k, v in node.items()]
        elif isinstance(node, str) and ("/" in node or os.sep in node):
            value = os.path.normpath(os.path.join(root, node))
            if wanted == value or wanted.startswith(value.rstrip(os.sep) + os.sep):
                return prefix.rstrip("."), node
    return None


def _package_missing(exc: BaseException, spec: dict[str, Any]) -> bool:
    """A package this environment lacks: a module not found that is not the repository's own, or a library's
    own "requires X: pip install X" error."""
    if isinstance(exc, ModuleNotFoundError) and exc.name:
        top = exc.name.split(".")[0]
        root = Path(str(spec.get("repo_root") or os.getcwd()))
        return not ((root / top).is_dir() or (root / f"{top}.py").is_file())
    return isinstance(exc, ImportError) and "pip install" in str(exc)


def _missing_paths(exc: BaseException) -> list[str]:
    """The paths a "not found" error names: its `filename`, or every path written in its message (a library may
    raise FileNotFoundError("Checkpoint metadata not found at PATH or PATH") without one)."""
    if not isinstance(exc, OSError):  # FileNotFoundError among them
        return []
    if isinstance(exc, FileNotFoundError) and exc.filename:
        return [str(exc.filename)]
    return [m.rstrip(".,;:") for m in re.findall(r"(?<![\w.])(?:\.{0,2}/)[^\s'\"]+", str(exc))]

"""SIGINT, SIGTERM and SIGHUP during hard validation: one path for all three.

A CI system cancels a job with SIGTERM (a closed terminal sends SIGHUP); the
tool must then do what it does on Ctrl-C. While `on_signals()` is active each
of these signals raises `Interrupted` (a KeyboardInterrupt) in the main
thread: `proc.run` ends the running layer's whole process group (pytest, its
spawn workers, the resource tracker) and re-raises, and `on_signals` writes
the partial report, marked interrupted, and sets the exit status 128+signal.
Further signals during that clean-up are ignored so it cannot be cut short;
a signal already ignored when the run starts (nohup) stays ignored.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from model_compile.hard.console import say
from model_compile.hard.models import HardReport

SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))


class Interrupted(KeyboardInterrupt):
    """Hard validation was stopped by a signal."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@dataclass
class Run:
    """What `on_signals` saw: the report being built and the signal that stopped it."""

    fmt: str = "text"
    report: HardReport | None = None
    signum: int | None = None

    @property
    def interrupted(self) -> bool:
        return self.signum is not None

    @property
    def exit_code(self) -> int:
        return 128 + (self.signum or 0)


_current: list[Run] = []


def track(report: HardReport) -> None:
    """Register the report being built, so an interruption can still write it."""
    if _current:
        _current[-1].report = report


def _raise(signum: int, frame: FrameType | None) -> None:
    for sig in SIGNALS:  # clean-up runs once, to the end
        signal.signal(sig, signal.SIG_IGN)
    raise Interrupted(signum)


@contextmanager
def on_signals(fmt: str = "text") -> Iterator[Run]:
    """Turn SIGINT/SIGTERM/SIGHUP into `Interrupted`; on one, write the partial report."""
    run = Run(fmt=fmt)
    previous = {}
    for sig in SIGNALS:
        if signal.getsignal(sig) == signal.SIG_IGN:
            continue  # ignored by whoever started us (nohup, a background job): keep it so
        try:
            previous[sig] = signal.signal(sig, _raise)
        except (ValueError, OSError):  # not the main thread: leave signals alone
            pass
    _current.append(run)
    try:
        yield run
    except Interrupted as exc:
        run.signum = exc.signum
        finish(run)
    finally:
        _current.remove(run)
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def mark_interrupted(report: HardReport, signum: int) -> None:
    """Verdict incomplete, with the signal and what did not run."""
    name = signal.Signals(signum).name
    done = ", ".join(f"{layer.name} {layer.status}" for layer in report.layers) or "none"
    report.interrupted = name
    report.verdict = "incomplete"
    report.summary = f"interrupted by {name}: the running layer's process group was ended; layers finished: {done}"
    report.gaps.insert(0, f"interrupted by {name}: the layer that was running and every later one did not finish")


def finish(run: Run) -> None:
    """Write the partial report (report.json in the out folder, and stdout) and say so on stderr."""
    from model_compile.hard.layers import render

    name = signal.Signals(run.signum or signal.SIGINT).name
    report = run.report
    if report is None:
        say(f"model-compile: interrupted by {name} before hard validation started")
        return
    mark_interrupted(report, run.signum or signal.SIGINT)
    path = Path(report.out_dir) / "report.json"
    try:
        path.write_text(report.model_dump_json(indent=2))
        sys.stdout.write(render.emit(report, run.fmt))
        sys.stdout.flush()
    except (OSError, ValueError) as exc:
        say(f"model-compile: interrupted by {name}; the partial report could not be written: {exc}")
        return
    say(f"model-compile: interrupted by {name}: every process group it started was ended; partial report: {path}")

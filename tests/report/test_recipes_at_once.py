"""The runtime layers of several recipes run two at a time; a recipe asking the same question as another takes its
answer after it; an interruption ends the processes of every thread (signals reach the main thread only)."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from model_compile.hard.env import proc
from model_compile.report.runtime import run_hard


def test_recipes_run_two_at_a_time_and_a_shared_question_waits_for_its_answer(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    spans: dict[str, tuple[float, float]] = {}
    handed: dict[str, Any] = {}

    def validate_hard(recipe_dir: Path, **kwargs: Any) -> Any:
        start = time.monotonic()
        time.sleep(0.3)
        spans[recipe_dir.name] = (start, time.monotonic())
        handed[recipe_dir.name] = kwargs["answered_by"]
        return SimpleNamespace(rehearsal=SimpleNamespace(steps=[1], name=recipe_dir.name))

    monkeypatch.setattr("model_compile.hard.layers.runner.validate_hard", validate_hard)
    monkeypatch.setenv("MODEL_COMPILE_RECIPES_AT_ONCE", "2")
    dirs = {name: tmp_path / name for name in ("a", "b", "c")}
    for d in dirs.values():
        d.mkdir()
    reports, notes = run_hard(dirs, None, False, None, questions={"a": "q", "b": None, "c": "q"})
    assert list(reports) == ["a", "b", "c"] and notes == {}
    assert spans["a"][0] < spans["b"][1] and spans["b"][0] < spans["a"][1]  # a and b at once
    assert spans["c"][0] >= spans["a"][1]  # c after a, whose rehearsal answers it
    assert handed["c"] == ("recipes/a", reports["a"].rehearsal) and handed["a"] is None and handed["b"] is None


def test_a_thread_s_process_ends_when_its_cancel_event_is_set(tmp_path: Path) -> None:
    stop = threading.Event()
    seen: list[BaseException] = []

    def work() -> None:
        proc.cancel_with(stop)
        try:
            proc.run([sys.executable, "-c", "import time; time.sleep(60)"], tmp_path, {}, 120, tmp_path / "log")
        except BaseException as exc:  # noqa: BLE001 - what the thread saw
            seen.append(exc)

    thread = threading.Thread(target=work)
    started = time.monotonic()
    thread.start()
    time.sleep(0.5)
    stop.set()
    thread.join(timeout=30)
    assert not thread.is_alive() and time.monotonic() - started < 20
    assert len(seen) == 1 and isinstance(seen[0], KeyboardInterrupt)
    assert not proc.cancelled()  # the main thread's own events are untouched

"""Forked workers: results in order, errors raised here, a dead child's chunk redone, same report as one process."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest

from model_compile import workers
from model_compile.analyze import analyze_path
from model_compile.errors import InputError

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="workers fork only on Linux")

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("n,jobs", [(0, 1), (5, 1), (5, 2), (7, 3), (10, 4), (3, 3)])
def test_split_is_contiguous_and_even(n: int, jobs: int) -> None:
    chunks = workers.split(list(range(n)), jobs)
    assert len(chunks) == jobs
    assert [x for c in chunks for x in c] == list(range(n))
    assert max(map(len, chunks)) - min(map(len, chunks)) <= 1


def _pids(chunk):
    return [(x, os.getpid()) for x in chunk]


def test_map_chunks_keeps_order_and_runs_in_children() -> None:
    out = workers.map_chunks(_pids, workers.split(list(range(9)), 3))
    assert [x for x, _ in out] == list(range(9))
    pids = {pid for _, pid in out}
    assert os.getpid() in pids and len(pids) == 3, "the first chunk here, the others in two children"


def _fail_in_child(chunk):
    if os.getpid() != PARENT:
        raise InputError(f"bad input in chunk {list(chunk)}")
    return list(chunk)


def _die_in_child(chunk):
    if os.getpid() != PARENT:
        os.kill(os.getpid(), signal.SIGKILL)
    return list(chunk)


PARENT = os.getpid()


def test_an_exception_in_a_child_is_raised_here() -> None:
    with pytest.raises(InputError, match=r"bad input in chunk \[2, 3\]"):
        workers.map_chunks(_fail_in_child, workers.split([0, 1, 2, 3], 2))


def test_a_child_that_dies_has_its_chunk_redone_here() -> None:
    assert workers.map_chunks(_die_in_child, workers.split(list(range(6)), 3)) == list(range(6))


def test_job_count_follows_the_setting_and_the_work(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 1, 2, 3})
    monkeypatch.setenv(workers.ENV, "1")
    assert workers.job_count(1000, 10) == 1
    monkeypatch.setenv(workers.ENV, "3")
    assert workers.job_count(1000, 10) == 3
    assert workers.job_count(25, 10) == 2, "at least min_per_job items each"
    monkeypatch.setenv(workers.ENV, "lots")
    assert workers.job_count(1000, 10) == 1, "an unreadable setting never forks"
    monkeypatch.delenv(workers.ENV)
    assert workers.job_count(1000, 10) == 4, "default: every processor this process may use"


def test_forked_analysis_reports_exactly_what_one_process_reports(monkeypatch: pytest.MonkeyPatch) -> None:
    import model_compile.analyze as analyze

    repo = ROOT / "tests" / "fixtures" / "soft_repo"
    monkeypatch.setenv(workers.ENV, "1")
    serial = analyze_path(repo).model_dump_json()
    monkeypatch.setenv(workers.ENV, "3")
    monkeypatch.setattr(analyze, "MIN_RECIPES_PER_JOB", 1)
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 1, 2})
    calls: list[int] = []
    real = workers.map_chunks
    monkeypatch.setattr(analyze, "map_chunks", lambda fn, chunks: calls.append(len(chunks)) or real(fn, chunks))
    forked = analyze_path(repo).model_dump_json()
    assert calls == [3], "the analysis was split over three processes"
    assert forked == serial

"""Forked workers: results in order, errors raised here, a dead child's chunk redone, same report as one process."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest

from model_compile import workers
from model_compile.analyze import analyze_path
from model_compile.errors import InputError

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="workers fork only on Linux")

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def one_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process as if it had one thread: an earlier test in the same worker may have left a daemon thread
    running (any in-process compile starts tqdm's monitor, through torch.fx's Interpreter), which rightly stops
    forking; the tests of how many processes to use ask that question alone."""
    import threading

    monkeypatch.setattr(threading, "active_count", lambda: 1)


@pytest.mark.parametrize("n,jobs", [(0, 1), (5, 1), (5, 2), (7, 3), (10, 4), (3, 3)])
def test_split_is_contiguous_and_even(n: int, jobs: int) -> None:
    chunks = workers.split(list(range(n)), jobs)
    assert len(chunks) == jobs
    assert [x for c in chunks for x in c] == list(range(n))
    assert max(map(len, chunks)) - min(map(len, chunks)) <= 1


PARENT = os.getpid()


def _wait_for_a_child(marker: Path) -> None:
    """In this process: wait until a child has claimed a chunk, so every test sees children work."""
    deadline = time.monotonic() + 20
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.01)


def _worker(marker: Path, action: str):
    def fn(chunk):
        if os.getpid() == PARENT:
            _wait_for_a_child(marker)
        else:
            marker.touch()
            if action == "raise":
                raise InputError(f"bad input in chunk {list(chunk)}")
            if action == "die":
                os.kill(os.getpid(), signal.SIGKILL)
        return [(x, os.getpid()) for x in chunk]

    return fn


def test_map_chunks_keeps_order_and_runs_in_children(tmp_path: Path) -> None:
    out = workers.map_chunks(_worker(tmp_path / "m", "run"), workers.split(list(range(20)), 10), 3)
    assert [x for x, _ in out] == list(range(20))
    assert {pid for _, pid in out} - {PARENT}, "children did some of the chunks"


def test_an_exception_in_a_child_is_raised_here(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"bad input in chunk \["):
        workers.map_chunks(_worker(tmp_path / "m", "raise"), workers.split(list(range(8)), 4), 2)


def test_a_child_that_dies_has_its_chunks_redone_here(tmp_path: Path) -> None:
    out = workers.map_chunks(_worker(tmp_path / "m", "die"), workers.split(list(range(12)), 6), 3)
    assert [x for x, _ in out] == list(range(12))
    assert {pid for _, pid in out} == {PARENT}, "every chunk a dead child claimed was redone here"


def test_results_a_child_sent_before_dying_are_kept(tmp_path: Path) -> None:
    """Each chunk's results are sent when done: a child killed on its second chunk loses only that one."""

    def fn(chunk):
        if os.getpid() == PARENT:
            deadline = time.monotonic() + 20
            while not (tmp_path / "second").exists() and time.monotonic() < deadline:
                time.sleep(0.01)
        elif (tmp_path / "first").exists():
            (tmp_path / "second").touch()
            os.kill(os.getpid(), signal.SIGKILL)
        else:
            (tmp_path / "first").touch()
        return [(x, os.getpid()) for x in chunk]

    out = workers.map_chunks(fn, workers.split(list(range(12)), 6), 2)
    assert [x for x, _ in out] == list(range(12))
    by_child = [x for x, pid in out if pid != PARENT]
    assert len(by_child) == 2, f"the child's first chunk came back from it: {out}"


def test_results_larger_than_the_pipe_arrive_whole(tmp_path: Path) -> None:
    """Messages span many reads: each chunk sends a few MiB, more than the pipe holds."""
    big = workers.PIPE_BYTES * 3

    def fn(chunk):
        if os.getpid() == PARENT:
            _wait_for_a_child(tmp_path / "m")
        else:
            (tmp_path / "m").touch()
        return [(x, os.getpid(), str(x) * big) for x in chunk]

    out = workers.map_chunks(fn, workers.split(list(range(6)), 6), 2)
    assert [x for x, _, _ in out] == list(range(6))
    assert all(text == str(x) * big for x, _, text in out)
    assert {pid for _, pid, _ in out} - {PARENT}, "a child sent some of them"


def test_chunks_per_process_and_their_limit() -> None:
    assert workers.chunk_count(615, 1) == 1
    assert workers.chunk_count(615, 2) == 2 * workers.CHUNKS_PER_JOB
    assert workers.chunk_count(5, 2) == 5
    assert workers.chunk_count(100_000, 64) == workers.MAX_CHUNKS


def test_job_count_follows_the_setting_and_the_work(monkeypatch: pytest.MonkeyPatch, one_thread: None) -> None:
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


def test_forked_analysis_reports_exactly_what_one_process_reports(
    monkeypatch: pytest.MonkeyPatch, one_thread: None
) -> None:
    import model_compile.analyze as analyze

    repo = ROOT / "tests" / "fixtures" / "soft_repo"
    monkeypatch.setenv(workers.ENV, "1")
    serial = analyze_path(repo).model_dump_json()
    monkeypatch.setenv(workers.ENV, "3")
    monkeypatch.setattr(analyze, "MIN_RECIPES_PER_JOB", 1)
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 1, 2})
    calls: list[int] = []
    real = workers.map_chunks
    monkeypatch.setattr(analyze, "map_chunks", lambda fn, chunks, jobs: calls.append(jobs) or real(fn, chunks, jobs))
    forked = analyze_path(repo).model_dump_json()
    assert calls == [3], "the analysis was split over three processes"
    assert forked == serial


def test_forked_review_of_a_working_tree_matches_one_process(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, one_thread: None
) -> None:
    """A working tree is listed through git and read from disk: forked children read it like one process."""
    import shutil
    import subprocess

    import model_compile.analyze as analyze
    from model_compile.review.gittree import WorkTree, open_repo

    repo = tmp_path / "repo"
    shutil.copytree(ROOT / "tests" / "fixtures" / "soft_repo", repo)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    tree = WorkTree(open_repo(repo))
    monkeypatch.setenv(workers.ENV, "1")
    serial = analyze.analyze_tree(tree).model_dump_json()
    monkeypatch.setenv(workers.ENV, "2")
    monkeypatch.setattr(analyze, "MIN_RECIPES_PER_JOB", 1)
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 1})
    calls: list[int] = []
    real = workers.map_chunks
    monkeypatch.setattr(analyze, "map_chunks", lambda fn, chunks, jobs: calls.append(jobs) or real(fn, chunks, jobs))
    forked = analyze.analyze_tree(WorkTree(open_repo(repo))).model_dump_json()
    assert calls == [2]
    assert forked == serial


def _jobs_in_this_process(_: int) -> int:
    os.sched_getaffinity = lambda _pid: {0, 1, 2, 3}  # type: ignore[assignment]  # a forked pool worker: its own copy
    os.environ.pop(workers.ENV, None)
    return workers.job_count(1000, 10)


def test_a_daemonic_multiprocessing_worker_never_forks() -> None:
    """A daemonic process may not have children: there the analysis stays in one process."""
    import multiprocessing

    with multiprocessing.get_context("fork").Pool(1) as pool:
        assert pool.map(_jobs_in_this_process, [0]) == [1]


def test_a_second_thread_running_never_forks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Forking copies one thread: a lock another thread holds would stay held in the child."""
    import threading

    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 1, 2, 3})
    monkeypatch.setenv(workers.ENV, "3")
    stop = threading.Event()
    other = threading.Thread(target=stop.wait, daemon=True)
    other.start()
    try:
        assert workers.job_count(1000, 10) == 1
    finally:
        stop.set()
        other.join()

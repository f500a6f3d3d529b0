"""SIGTERM, SIGHUP and SIGINT during hard validation: every process group it started is
ended, the partial report is written (marked interrupted), exit 128+signal."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SLEEPY = Path(__file__).parent / "fixtures" / "repo" / "recipes" / "sleepy"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie waiting for init to reap it is gone for our purpose
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return True


def _as_from_a_terminal() -> None:
    """SIGINT and SIGHUP at their defaults, as a terminal starts the tool: a background job has SIGINT ignored and
    one under nohup SIGHUP, and the tool keeps an ignored signal ignored (documented), so the test would wait."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_signal_ends_every_group_and_writes_the_partial_report(tmp_path, sig):
    pid_file = tmp_path / "child.pid"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "tools"), "FIXTURE_PID_FILE": str(pid_file)}
    out = tmp_path / "out"
    tool = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "model_compile.cli",
            "validate",
            "--hard",
            str(SLEEPY),
            "--out",
            str(out),
            "--format",
            "json",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=_as_from_a_terminal,
    )
    try:
        deadline = time.monotonic() + 90
        while not (pid_file.is_file() and pid_file.read_text().strip()):
            assert tool.poll() is None and time.monotonic() < deadline, (
                tool.stderr.read() if tool.poll() is not None else "no smoke"
            )
            time.sleep(0.2)
        grandchild = int(pid_file.read_text())
        group = os.getpgid(grandchild)
        tool.send_signal(sig)
        stdout, stderr = tool.communicate(timeout=60)
    finally:
        if tool.poll() is None:
            tool.kill()
    assert tool.returncode == 128 + sig, stderr
    assert "Traceback" not in stderr and f"interrupted by {sig.name}" in stderr
    for _ in range(50):
        if not _alive(grandchild):
            break
        time.sleep(0.1)
    else:
        os.killpg(group, signal.SIGKILL)
        pytest.fail(f"{sig.name}: the smoke layer's process group {group} survived")
    report = json.loads((out / "report.json").read_text())
    assert report["interrupted"] == sig.name and report["verdict"] == "incomplete"
    assert [layer["name"] for layer in report["layers"]] == ["soft", "structure"]
    assert json.loads(stdout)["interrupted"] == sig.name


def test_an_ignored_signal_stays_ignored():
    from model_compile.hard.layers import interrupt

    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        with interrupt.on_signals() as run:
            assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN  # nohup keeps working
            assert signal.getsignal(signal.SIGTERM) is interrupt._raise
        assert not run.interrupted
        assert signal.getsignal(signal.SIGTERM) != interrupt._raise  # restored afterwards
    finally:
        signal.signal(signal.SIGHUP, previous)

"""The rehearsal's life cycle: a hung child times out, a signal ends every rank, and the layer's place in
`validate --hard`. Split from test_rehearsal_runs.py so the two spread over the suite's workers.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("omegaconf")

from model_compile.hard.layers.runner import validate_hard  # noqa: E402
from model_compile.hard.rehearsal.command import Options, standalone  # noqa: E402

pytestmark = pytest.mark.hard

RECIPES = Path(__file__).parent / "fixtures" / "rehearsal_repo" / "recipes"
PY = sys.executable


@pytest.mark.parametrize("fork_server", ["on", "off"])
def test_a_child_that_hangs_times_out_and_leaves_no_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fork_server: str
) -> None:
    monkeypatch.setenv("MODEL_COMPILE_FORK_SERVER", fork_server)  # off: one process a rank
    facts, _, _ = standalone(RECIPES / "lm_hang", PY, Options(timeout_s=8), tmp_path)
    # it hangs with compile off: not compile's doing, so not a failure of it
    assert facts.status == "not-run" and facts.fault == "environment"
    assert "(compile off) gave no result after 8 s" in (facts.reason or "")
    left = subprocess.run(["pgrep", "-f", str(tmp_path / "spec.json")], capture_output=True, text=True)
    assert left.stdout.strip() == ""
    zygote = subprocess.run(["pgrep", "-P", str(os.getpid()), "-f", "rehearsal.zygote"], capture_output=True, text=True)
    assert zygote.stdout.strip() == ""  # the fork server is gone too


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_ends_every_rank(tmp_path: Path, sig: int) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "tools")}
    cmd = [PY, "-m", "model_compile.cli", "rehearse", str(RECIPES / "lm_hang"), "--python", PY, "--out", str(tmp_path)]
    proc = subprocess.Popen(
        cmd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # as from a terminal: a job started in the background by a shell without job control (CI scripts) has
        # SIGINT ignored, and the tool, like Python, keeps ignoring it there
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (tmp_path / "record-reference-rank0.json").exists():
        time.sleep(0.5)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and "every process group it started was ended" in err
    assert f"interrupted ({signal.Signals(sig).name})" in err
    left = subprocess.run(["pgrep", "-f", str(tmp_path / "spec.json")], capture_output=True, text=True)
    assert left.stdout.strip() == ""


def test_the_layer_sits_after_structure_in_validate_hard(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MODEL_COMPILE_REHEARSAL", raising=False)
    report = validate_hard(RECIPES / "lm_blocks", out=tmp_path, python=PY, steps=2, rehearsal_world_size=1)
    names = [(layer.name, layer.status) for layer in report.layers]
    assert names[:3] == [("soft", names[0][1]), ("structure", "passed"), ("rehearsal", "passed")]
    assert report.rehearsal is not None and report.rehearsal.status == "passed"
    row = next(layer for layer in report.layers if layer.name == "rehearsal")
    assert row.where.startswith("cpu-only (tiny model), backend aot_eager (not the stage's inductor), 1 rank(s), ")
    assert any("parity over 2 optimizer steps" in g for g in report.gaps)

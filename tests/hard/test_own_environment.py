"""Hard validation in a repository's own environment (a `.venv` that has torch and pytest, not model-compile)."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from model_compile.cli import main
from model_compile.hard.layers.runner import validate_hard

FIXTURE = Path(__file__).parent / "fixtures" / "ownenv"


@pytest.fixture(scope="session")
def repo_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv whose site-packages path line reaches this one's torch and pytest, but not the editable model-compile.

    A `.pth` line that names a folder adds it to sys.path without running that folder's own `.pth` files,
    so the editable finder of model-compile is not installed there: the child cannot import model_compile
    unless the runner's probe provides it.
    """
    pytest.importorskip("torch")
    root = tmp_path_factory.mktemp("repo-venv") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    python = root / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    (Path(site) / "tool_site.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    probe = subprocess.run([str(python), "-c", "import model_compile"], capture_output=True, text=True)
    assert probe.returncode != 0, "the fixture venv must not see model-compile"
    return root


@pytest.fixture
def repo(tmp_path: Path, repo_venv: Path) -> Path:
    """A copy of the fixture repository with its own `.venv`."""
    dest = tmp_path / "repo"
    shutil.copytree(FIXTURE, dest)
    (dest / ".venv").symlink_to(repo_venv, target_is_directory=True)
    return dest


def layer(report, name):
    return next(item for item in report.layers if item.name == name)


def test_repo_venv_is_chosen_and_a_missing_dependency_is_not_a_failure(repo: Path, tmp_path: Path, monkeypatch):
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    monkeypatch.delenv("CONDA_PREFIX", raising=False)
    monkeypatch.delenv("MODEL_COMPILE_PYTHON", raising=False)
    report = validate_hard(repo / "recipes" / "needs_dep", out=tmp_path / "out")
    env = report.environment
    assert env.executable == str(repo / ".venv" / "bin" / "python")
    assert "the repository's own environment (.venv/" in env.interpreter_reason
    assert env.pytest and env.torch
    assert [(x.name, x.status) for x in report.layers] == [
        ("soft", "passed"),
        ("structure", "not-run"),
        ("smoke", "not-run"),
        ("impact", "missing"),
    ]
    structure = layer(report, "structure")
    assert structure.reason.startswith(
        "environment: fixture_dependency_not_installed (imported by recipes/needs_dep/configs/schema.py) [not declared "
        "by the repository] in " + str(repo / ".venv" / "bin" / "python")
    )
    assert "-m pip install fixture_dependency_not_installed" in structure.reason
    assert structure.command.startswith(shlex.quote(str(repo / ".venv" / "bin" / "python")) + " -m pytest")
    assert report.verdict == "incomplete" and report.exit_code == 0
    report.require_complete = True
    assert report.exit_code == 1


def test_opt_in_smoke_refusing_cpu_is_not_run_with_the_accelerator_command(repo: Path, tmp_path: Path, monkeypatch):
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    report = validate_hard(repo / "recipes" / "gpu_only", out=tmp_path / "out")
    assert layer(report, "structure").status == "passed"
    smoke = layer(report, "smoke")
    if not report.environment.cpu_only:
        pytest.skip("this machine has an accelerator")
    python = shlex.quote(str(repo / ".venv" / "bin" / "python"))
    # ran here with the opt-in switch and one rank, refused, and says how to run it where it can
    assert smoke.command == (
        f"{python} -m pytest recipes/gpu_only/tests/test_smoke.py -q --run-smoke --world-size 1 "
        "--config-override model.compile.enabled=true"
    )
    assert smoke.status == "not-run" and smoke.reason.startswith("needs an accelerator: RuntimeError: Distributed")
    assert smoke.next_step == (  # no path of this machine: that machine's own `python`, from the repository root
        "on a machine with GPUs/NPUs, from the repository root: python -m pytest recipes/gpu_only/tests/test_smoke.py "
        "-q --run-smoke --world-size 8 --config-override model.compile.enabled=true"
    )
    assert report.verdict == "incomplete"


def test_python_flag_wins_and_config_name_is_not_passed_when_unregistered(repo: Path, tmp_path: Path, capsys):
    rc = main(
        [
            "validate",
            "--hard",
            str(repo / "recipes" / "needs_dep"),
            "--python",
            sys.executable,
            "--config-name",
            "stage2",
            "--out",
            str(tmp_path / "o"),
            "--require-complete",
        ]
    )
    text = capsys.readouterr().out
    assert f"interpreter: {sys.executable} - given with --python" in text
    assert "--config-name" not in next(ln for ln in text.splitlines() if "test_structure.py" in ln and "$" in ln)
    assert "option: --config-name stage2 not passed: the recipe's conftest.py does not register it" in text
    assert "drop --python to use the repository's own" in text
    assert rc == 1  # incomplete (environment lacks a module) with --require-complete


@pytest.mark.hard
def test_spawned_ranks_report_compile_facts_through_trace_and_probe(repo: Path, tmp_path: Path, monkeypatch):
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    report = validate_hard(repo / "recipes" / "optin", out=tmp_path / "out", world_size=2, timeout_s=300)
    smoke = layer(report, "smoke")
    assert smoke.status == "passed", (smoke.reason, smoke.output_tail)
    # its test imports model_compile.runtime: the pasteable command carries the probe
    assert smoke.command.startswith(f"PYTHONPATH={report.probe} ") and "--run-smoke --world-size 2" in smoke.command
    # model-compile is not installed in the repo's venv: the probe on PYTHONPATH served the hooks
    assert report.probe and (Path(report.probe) / "model_compile" / "runtime" / "dynamo_adapter.py").is_file()
    assert sorted(Path(p).name for p in report.runtime_files) == ["runtime-rank0.json", "runtime-rank1.json"]
    assert report.runtime["timing"]["steps"] == 3
    trace = report.traces["smoke"]
    assert len(trace.ranks) == 2  # one TORCH_TRACE log per spawned rank
    for rank in trace.ranks:
        assert rank.compiles >= 2 and rank.compile_time_s > 0
        assert any("test_smoke.py:18" in b and "print" in b for b in rank.graph_breaks), rank.graph_breaks
        assert any("size mismatch" in r for r in rank.recompiles), rank.recompiles
        assert not rank.recompile_limit_hits

"""No static command imports or runs anything from the target repository.

tests/fixtures/booby_trap: its engine, schema, kit, conftest.py and recipe
tests write TRIGGERED at the fixture root when imported, and a stage YAML
runs `touch TRIGGERED` if a loader constructs Python objects.
"""

from __future__ import annotations

import json
import runpy
import shutil
from pathlib import Path

import pytest
from hostile_helpers import ROOT, cli_subprocess, commit_all

FIXTURE = ROOT / "tests" / "fixtures" / "booby_trap"
RECIPE = "recipes/trap"


@pytest.fixture
def trap(tmp_path) -> Path:
    root = tmp_path / "booby_trap"
    shutil.copytree(FIXTURE, root)
    commit_all(root)
    return root


def test_the_trap_is_armed(trap):
    """Importing any trapped file really leaves the marker (else the test below proves nothing)."""
    with pytest.raises(SystemExit, match="booby trap imported"):
        runpy.run_path(str(trap / RECIPE / "engine" / "trap_engine.py"))
    assert (trap / "TRIGGERED").is_file()


def test_no_static_command_springs_the_trap(trap):
    marker = trap / "TRIGGERED"
    recipe = str(trap / RECIPE)

    def run(*argv: str) -> int:
        proc = cli_subprocess(*argv, cwd=trap, timeout=120)  # cwd: where `touch TRIGGERED` would land
        assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr
        assert not marker.exists(), (
            f"`model-compile {' '.join(argv)}` imported or ran target code: {marker.read_text()}"
        )
        return proc.returncode

    assert run("inspect", str(trap), "--format", "json") == 0
    assert run("validate", str(trap), "--format", "json") in (0, 1)
    assert run("validate", "--soft", recipe, "--format", "sarif") in (0, 1)
    # evil.yaml is a stage the edit cannot parse safely: generate refuses, constructing nothing
    assert run("generate", recipe) == 2
    (trap / RECIPE / "configs" / "evil.yaml").unlink()
    commit_all(trap, "without evil.yaml")
    assert run("generate", recipe, "--format", "json") == 0
    assert (
        run("generate", recipe, "--path", "regional", "--target", "model.layers", "--reason", "blocks are the hot path")
        == 0
    )
    assert run("generate", recipe, "--write") in (0, 1)
    assert "apply_model_compile" in (trap / RECIPE / "engine" / "trap_engine.py").read_text()
    proc = cli_subprocess("diff", str(trap), "--format", "json", cwd=trap, timeout=120)
    assert proc.returncode in (0, 1) and json.loads(proc.stdout), proc.stderr
    assert not marker.exists()

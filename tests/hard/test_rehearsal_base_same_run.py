"""A base that differs from the head only in documentation, Python comments or docstrings, or a stage's compile
switch is the same rehearsal."""

from __future__ import annotations

from pathlib import Path

import pytest
from git_helpers import git

from model_compile.hard.rehearsal.base import only_the_switch

STAGE = """model:
  name: tiny
  compile:
    enabled: false  # off for now
    backend: inductor
data:
  max_seq_len: 512
"""


def _repo(tmp_path: Path, stage: str = STAGE) -> tuple[Path, str]:
    repo = tmp_path / "repo"
    (repo / "recipes" / "r" / "configs").mkdir(parents=True)
    (repo / "recipes" / "r" / "configs" / "stage2.yaml").write_text(stage)
    (repo / "recipes" / "r" / "README.md").write_text("# r\n")
    (repo / "recipes" / "r" / "engine.py").write_text("x = 1\n")
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    return repo, git(repo, "rev-parse", "HEAD").strip()


def _edit(repo: Path, rel: str, text: str) -> None:
    (repo / rel).write_text(text)


@pytest.mark.parametrize(
    ("edits", "same"),
    [
        ({}, []),  # nothing changed: the same tree
        (
            {"recipes/r/configs/stage2.yaml": STAGE.replace("enabled: false  # off for now", "enabled: true  # on")},
            ["recipes/r/configs/stage2.yaml"],
        ),
        (
            {"recipes/r/configs/stage2.yaml": STAGE.replace("false", "true"), "recipes/r/README.md": "# r\ncompile\n"},
            ["recipes/r/README.md", "recipes/r/configs/stage2.yaml"],
        ),
        # near misses: another value of the stage, the backend, code, a new file that is not documentation
        ({"recipes/r/configs/stage2.yaml": STAGE.replace("512", "1024")}, None),
        ({"recipes/r/configs/stage2.yaml": STAGE.replace("inductor", "aot_eager")}, None),
        # a comment or a docstring in Python is the same code: the same run
        ({"recipes/r/engine.py": "x = 1  # the one\n"}, ["recipes/r/engine.py"]),
        ({"recipes/r/engine.py": '"""The engine."""\nx = 1\n'}, ["recipes/r/engine.py"]),
        ({"recipes/r/engine.py": "x = 2\n"}, None),
        ({"recipes/r/engine.py": "x = 1\ny = x\n"}, None),
        ({"recipes/r/tests/test_x.py": "def test(): pass\n"}, None),
        ({"recipes/r/configs/stage3.yaml": STAGE}, None),
    ],
)
def test_only_the_compile_switch_or_docs_changed(tmp_path: Path, edits: dict[str, str], same: list[str] | None) -> None:
    repo, commit = _repo(tmp_path)
    for rel, text in edits.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        _edit(repo, rel, text)
    assert only_the_switch(repo, commit) == same


def test_the_flat_switch_and_a_deleted_stage(tmp_path: Path) -> None:
    flat = "model:\n  compile: false\n  name: tiny\n"
    repo, commit = _repo(tmp_path, flat)
    _edit(repo, "recipes/r/configs/stage2.yaml", "model:\n  compile: true\n  name: tiny\n")
    assert only_the_switch(repo, commit) == ["recipes/r/configs/stage2.yaml"]
    (repo / "recipes/r/configs/stage2.yaml").unlink()
    assert only_the_switch(repo, commit) is None  # a stage gone is not a switch
    git(repo, "checkout", "-q", "--", ".")
    _edit(repo, "recipes/r/configs/stage2.yaml", "model: [unclosed\n")
    assert only_the_switch(repo, commit) is None  # YAML that does not parse: rehearse the base

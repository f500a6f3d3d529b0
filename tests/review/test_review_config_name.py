"""`review --hard --config-name STAGE`: the stage each recipe in scope runs its runtime layers (and rehearsal) with."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_import_scope import BRANCH, _edit, _repo

from model_compile.cli import main
from model_compile.errors import InputError
from model_compile.report.models import ReviewReport


def _branch(tmp_path: Path) -> tuple[Path, str]:
    root = _repo(tmp_path)
    stage2 = root / "recipes/vlm/configs/stage2.yaml"
    stage2.write_text((root / "recipes/vlm/configs/train.yaml").read_text())
    head = _edit(root, "pkg/kit/loss/token.py", BRANCH.splitlines(True)[0], BRANCH, "branch")
    return root, head


def test_the_stage_reaches_each_recipe_that_has_it_and_the_others_say_why_not(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, _ = _branch(tmp_path)
    calls: dict[str, dict[str, object]] = {}

    def fake(recipe_dir: Path, **kwargs: object) -> object:
        calls[Path(recipe_dir).name] = kwargs
        raise InputError("stopped here by the test")

    monkeypatch.setattr("model_compile.hard.layers.runner.validate_hard", fake)
    code = main(["review", str(root), "--base", "HEAD~1", "--hard", "--config-name", "stage2", "--format", "json"])
    report = ReviewReport.model_validate_json(capsys.readouterr().out)
    assert code == 0 and sorted(calls) == ["vlm"] and calls["vlm"]["config_name"] == "stage2"
    bad = next(r for r in report.recipes if r.name == "bad")
    note = "--config-name stage2: the recipe has no configs/stage2.yaml (its stages: train)"
    assert any(note in (row.reason or "") for row in bad.validation if row.name == "rehearsal")


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--config-name", "stage2"], "--config-name needs --hard"),
        (
            ["--hard", "--config-name", "nope"],
            "no recipe in scope has configs/nope.yaml (bad: train; vlm: stage2, train)",
        ),
    ],
)
def test_bad_config_name_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    root, _ = _branch(tmp_path)
    code = main(["review", str(root), "--base", "HEAD~1", *argv])
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1

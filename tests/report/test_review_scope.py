"""Scope of `review`: a recipe given explicitly is always reviewed; which merge base a branch is compared with."""

from __future__ import annotations

from pathlib import Path

import pytest
from report_helpers import git, git_repo

from model_compile.cli import main
from model_compile.report.models import ReviewReport


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, ReviewReport]:
    code = main(["review", *argv, "--format", "json"])
    out, _ = capsys.readouterr()
    return code, ReviewReport.model_validate_json(out)


def _clone_ahead(tmp_path: Path) -> Path:
    """A clone whose main is one local commit (README.md only) ahead of origin/main."""
    origin = git_repo(tmp_path / "origin")
    git(tmp_path, "clone", "-q", str(origin), "clone")
    clone = tmp_path / "clone"
    (clone / "README.md").write_text((clone / "README.md").read_text() + "\nlocal note\n")
    git(clone, "commit", "-qam", "local note")
    return clone


def test_explicit_recipe_untouched_by_the_change_is_reviewed_whole(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    clone = _clone_ahead(tmp_path)
    code, report = _json(capsys, str(clone / "recipes" / "vlm_kit"))
    assert code == 0 and report.verdict == "not validated", report.verdict_reason
    assert report.scope.kind == "change" and report.scope.recipes == ["vlm_kit"]
    section = report.recipes[0]
    assert section.change == "untouched" and section.compile_path.path == "kit"
    assert any("does not touch recipe vlm_kit" in n for n in report.scope.notes)
    code, report = _json(capsys, str(clone / "recipes" / "vlm_plain"))
    findings = report.recipes[0].findings
    assert [f.rule for f in findings] == ["MC100"] and {f.status for f in findings} == {"existing"}


def test_change_that_touches_no_recipe_is_nothing_to_review(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    clone = _clone_ahead(tmp_path)
    code, report = _json(capsys, str(clone))
    assert code == 0 and report.verdict == "nothing to review" and not report.recipes
    assert report.verdict_reason.startswith("the change touches no recipe")
    main(["review", str(clone)])
    first = capsys.readouterr().out.splitlines()[0]
    assert "nothing to review" in first and "ready" not in first


def test_base_head_and_hard_never_give_ready_for_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    clone = _clone_ahead(tmp_path)
    code, report = _json(capsys, str(clone / "recipes" / "vlm_kit"), "--base", "HEAD")
    assert report.verdict == "not validated" and [r.name for r in report.recipes] == ["vlm_kit"]
    calls: list[list[str]] = []

    def refuse(dirs: dict[str, Path], *_: object, **__: object) -> tuple[dict, dict]:
        calls.append(sorted(dirs))
        return {}, {name: "hard validation refused: test" for name in dirs}

    monkeypatch.setattr("model_compile.report.runtime.run_hard", refuse)
    code, report = _json(capsys, str(clone / "recipes" / "vlm_kit"), "--hard")
    assert calls == [["vlm_kit"]]  # the recipe given is in scope for the runtime layers too
    assert report.verdict == "not validated" and report.hard
    assert "need `--hard`" not in report.validation and "no runtime layer ran" in report.validation
    code, report = _json(capsys, str(clone), "--hard")
    assert report.verdict == "nothing to review" and "no recipe in scope" in report.validation


def test_branch_from_a_local_main_ahead_of_origin_uses_the_nearer_base(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(git_repo(tmp_path / "origin")), "clone")
    plain = clone / "recipes" / "vlm_plain" / "README.md"
    plain.write_text(plain.read_text() + "\nlocal main's own commit\n")
    git(clone, "commit", "-qam", "local main ahead of origin/main")
    local_main = git(clone, "rev-parse", "HEAD").strip()
    origin_main = git(clone, "rev-parse", "origin/main").strip()
    git(clone, "checkout", "-q", "-b", "feature")
    kit = clone / "recipes" / "vlm_kit" / "README.md"
    kit.write_text(kit.read_text() + "\nthe branch's commit\n")
    git(clone, "commit", "-qam", "feature")
    code, report = _json(capsys, str(clone))
    assert report.scope.recipes == ["vlm_kit"]  # as `git diff main...HEAD`: not local main's vlm_plain commit
    assert report.scope.base and report.scope.base.startswith(local_main[:12])
    note = next(n for n in report.scope.notes if n.startswith("base is the merge base"))
    assert "with main" in note and origin_main[:12] in note and "origin/HEAD" in note
    assert main(["diff", str(clone), "--format", "json"]) == 0
    out, _ = capsys.readouterr()
    assert '"vlm_plain"' not in out and '"vlm_kit"' in out  # `diff` picks the same base


def test_verdict_names_the_other_layers_not_validated() -> None:
    from model_compile.findings.models import RecipeReport
    from model_compile.report.build import _verdict
    from model_compile.report.hardfacts import HardFacts
    from model_compile.report.models import LayerRow

    rows = [
        LayerRow(name="soft", status="passed", where="static"),
        LayerRow(name="smoke", status="not-run", where="-", reason="needs an accelerator"),
        LayerRow(name="impact", status="missing", where="-"),
    ]
    facts = HardFacts(where="cpu-only", cpu_only=True, interpreter=None, verdict="incomplete", summary="", layers=rows)
    recipe = RecipeReport(name="r", path=".", compile_path="kit")
    verdict, reason = _verdict(recipe, [], rows, facts, "")
    assert verdict == "not validated"
    assert reason == "smoke not-run: needs an accelerator (also not validated: impact missing)"


def test_a_failure_on_the_base_too_comes_after_what_the_change_still_lacks() -> None:
    from model_compile.findings.models import RecipeReport
    from model_compile.report.build import _verdict
    from model_compile.report.hardfacts import HardFacts
    from model_compile.report.models import LayerRow

    old = "existing: it failed on the base abc too. test_structure: AssertionError: utils/__init__.py does not exist"
    rows = [
        LayerRow(name="soft", status="passed", where="static"),
        LayerRow(name="structure", status="failed", where="cpu-only", reason=old, existing=True),
        LayerRow(name="rehearsal", status="passed", where="cpu-only (tiny model)"),
        LayerRow(name="smoke", status="not-run", where="-", reason="needs an accelerator"),
    ]
    facts = HardFacts(where="cpu-only", cpu_only=True, interpreter=None, verdict="incomplete", summary="", layers=rows)
    recipe = RecipeReport(name="r", path=".", compile_path="kit")
    verdict, reason = _verdict(recipe, [], rows, facts, "")
    assert verdict == "not validated"
    assert reason == f"smoke not-run: needs an accelerator; also layer structure failed: {old}"
    # the near miss: the same failure, caused by the change, is the verdict and leads
    rows[1].existing = False
    assert _verdict(recipe, [], rows, facts, "") == ("needs changes", f"layer structure failed: {old}")
    # and with nothing else missing on an accelerator, the existing failure alone is the reason
    rows[1].existing, rows[3].status = True, "passed"
    facts.cpu_only = False
    assert _verdict(recipe, [], rows, facts, "") == ("not validated", f"layer structure failed: {old}")


def test_a_recipe_in_scope_but_not_in_the_tree_they_run_on_is_said_so_and_not_run(tmp_path) -> None:
    from model_compile.report.runtime import run_hard

    reports, notes = run_hard({"openbee": tmp_path / "recipes" / "openbee"}, None, False, None)
    assert reports == {}
    assert (
        notes["openbee"] == f"runtime layers not run: {tmp_path / 'recipes' / 'openbee'} is not in the tree they run on"
    )

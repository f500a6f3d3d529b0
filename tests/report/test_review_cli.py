"""`model-compile review`: scope (change vs tree), exit codes, formats, --out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from report_helpers import KIT_ENGINE, demo_copy, git, git_repo, move_compile_after_wrap

from model_compile.cli import main
from model_compile.report.build import build_tree
from model_compile.report.hardfacts import read_hard
from model_compile.report.models import ReportFinding, ReviewReport, Scope
from model_compile.report.render import github, sarif_log
from model_compile.rules.finding import Suppressed


def _review(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["review", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_branch_that_moves_compile_after_wrap(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = git_repo(tmp_path / "r")
    git(repo, "checkout", "-q", "-b", "feature")
    move_compile_after_wrap(repo)
    git(repo, "commit", "-qam", "compile the wrapped model")
    code, out, _ = _review(capsys, str(repo), "--format", "json")
    report = ReviewReport.model_validate_json(out)
    assert code == 1 and report.exit_code == 1 and report.verdict == "needs changes"
    assert report.scope.kind == "change" and report.scope.recipes == ["vlm_kit"]
    section = report.recipes[0]
    assert section.change == "modified"
    assert "before wrap" in (section.placement.before or "") and "wrap" in (section.placement.after or "")
    new = [f for f in section.findings if f.status == "new"]
    assert [f.rule for f in new] == ["MC408"] and new[0].file == KIT_ENGINE
    assert [(f.rule, f.superseded_by) for f in report.superseded] == [("MC407", "MC408")] or not report.superseded


def test_head_revision_is_reviewed_not_the_working_tree(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`review RECIPE --head main` on a branch that broke the recipe reviews main's files."""
    repo = git_repo(tmp_path / "r")
    git(repo, "checkout", "-q", "-b", "feature")
    move_compile_after_wrap(repo)
    git(repo, "commit", "-qam", "compile the wrapped model")
    code, out, _ = _review(capsys, str(repo / "recipes" / "vlm_kit"), "--head", "main", "--format", "json")
    report = ReviewReport.model_validate_json(out)
    assert code == 0, out
    assert not [f for f in report.all_findings() if f.rule == "MC408"]
    assert any("reviewed as of main" in n for n in report.scope.notes + report.notes)


def test_clean_branch_reviews_the_whole_tree(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = git_repo(tmp_path / "r")
    code, out, _ = _review(capsys, str(repo))
    assert code == 0
    assert "every recipe under" in out and "`vlm_regional`" in out and "no change between" in out


def test_uncommitted_change_to_a_recipe_readme_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = git_repo(tmp_path / "r")
    readme = repo / "recipes" / "vlm_plain" / "README.md"
    readme.write_text(readme.read_text() + "\nMore words.\n")
    code, out, _ = _review(capsys, str(repo), "--format", "json")
    report = ReviewReport.model_validate_json(out)
    assert code == 0 and report.scope.kind == "change" and report.scope.recipes == ["vlm_plain"]
    assert report.recipes[0].verdict == "not validated"  # vlm_plain does not compile


def test_outside_git_and_out_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = demo_copy(tmp_path / "r")
    out_dir = tmp_path / "out"
    code, out, err = _review(capsys, str(repo), "--format", "sarif", "--out", str(out_dir))
    assert code == 0
    assert sorted(p.name for p in out_dir.iterdir()) == [
        "annotations.txt",
        "report.json",
        "report.md",
        "report.sarif",
        "report.txt",
    ]
    log = json.loads(out)
    assert log["version"] == "2.1.0" and log["runs"][0]["results"]
    assert all(r["partialFingerprints"]["modelCompile/v1"] for r in log["runs"][0]["results"])
    assert "not inside a git repository" in (out_dir / "report.md").read_text()
    assert "wrote" in err


def test_bad_input_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _review(capsys, str(tmp_path / "nope"))[0] == 2
    repo = demo_copy(tmp_path / "r")
    code, _, err = _review(capsys, str(repo), "--base", "HEAD~1")
    assert code == 2 and "git" in err and len(err.strip().splitlines()) == 1
    assert _review(capsys, str(repo), "--trace")[0] == 2
    git_dir = git_repo(tmp_path / "g")
    code, _, err = _review(capsys, str(git_dir), "--base", "no-such-rev")
    assert code == 2 and "unknown revision" in err


def _report_with(findings: list[ReportFinding], kind: str = "change") -> ReviewReport:
    return ReviewReport(
        version="0", verdict="needs changes", verdict_reason="r", scope=Scope(kind=kind, path="."), findings=findings
    )


def test_sarif_baseline_and_suppressions() -> None:
    common = {"severity": "error", "file": "k.py", "fix": "f", "message": "m"}
    new = ReportFinding(rule="MC404", line=3, status="new", code="a", **common)
    old = ReportFinding(rule="MC401", line=9, status="existing", code="b", **common)
    quiet = ReportFinding(
        rule="MC103",
        line=5,
        status="existing",
        code="c",
        suppressed=Suppressed(justification="why", file="k.py", line=4),
        **common,
    )
    results = sarif_log(_report_with([new, old, quiet]))["runs"][0]["results"]
    by_rule = {r["ruleId"]: r for r in results}
    assert by_rule["MC404"]["baselineState"] == "new" and by_rule["MC401"]["baselineState"] == "unchanged"
    assert by_rule["MC103"]["suppressions"] == [{"kind": "inSource", "justification": "why"}]
    assert "suppressions" not in by_rule["MC404"]
    lines = github(_report_with([new, old, quiet])).splitlines()
    assert lines[0].startswith("::error file=k.py,line=3,title=MC404::") and len(lines) == 2  # new only + verdict
    assert lines[-1].startswith("::error title=model-compile review: needs changes::")


def test_hard_layers_not_reached_are_listed_with_commands(tmp_path: Path) -> None:
    repo = demo_copy(tmp_path / "r")
    recipe = repo / "recipes" / "vlm_kit"
    stopped = {
        "environment": {"label": "cpu-only", "cpu_only": True},
        "verdict": "failed",
        "layers": [{"name": "soft", "status": "failed", "label": "static", "reason": "MC404 x"}],
    }
    facts = read_hard(stopped, recipe, "kit")
    assert [(r.name, r.status) for r in facts.layers] == [
        ("soft", "failed"),
        ("structure", "not-reached"),
        ("rehearsal", "not-reached"),
        ("smoke", "not-reached"),
        ("impact:test_compile_parity.py", "not-reached"),
    ]
    assert all(r.command and " -m pytest " in r.command for r in facts.layers[1:] if r.name != "rehearsal")
    rehearsal = next(r for r in facts.layers if r.name == "rehearsal")
    assert rehearsal.command and rehearsal.command.startswith("model-compile rehearse ")
    from model_compile.analyze import analyze_path

    report = build_tree(analyze_path(recipe), recipe, hard={"vlm_kit": stopped})
    assert report.exit_code == 0 and report.recipes[0].verdict == "needs changes"  # soft failure is no runtime failure
    (recipe / "tests" / "test_smoke.py").unlink()
    rows = read_hard({"layers": []}, recipe, "kit").layers
    assert next(r for r in rows if r.name == "smoke").status == "missing"


def test_engine_path_unchanged_in_demo() -> None:
    assert (Path(__file__).resolve().parents[2] / "examples" / "demo_repo" / KIT_ENGINE).is_file()


def test_branch_review_is_not_hidden_by_untracked_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = git_repo(tmp_path / "r")
    git(repo, "checkout", "-q", "-b", "feature")
    move_compile_after_wrap(repo)
    git(repo, "commit", "-qam", "compile the wrapped model")
    (repo / "skills").mkdir()
    (repo / "skills" / "notes.md").write_text("untracked\n")
    code, out, _ = _review(capsys, str(repo), "--format", "json")
    report = ReviewReport.model_validate_json(out)
    assert code == 1 and report.scope.recipes == ["vlm_kit"]
    assert any("merge base" in n for n in report.scope.notes)


def test_a_finding_the_change_removes_is_no_longer_reported_not_praised(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The report says what it knows: the finding is gone at head (fixed, or its code removed)."""
    repo = git_repo(tmp_path / "r")
    move_compile_after_wrap(repo)
    git(repo, "commit", "-qam", "compile the wrapped model")
    git(repo, "checkout", "-q", "-b", "fix")
    git(repo, "revert", "--no-edit", "HEAD")
    code, out, _ = _review(capsys, str(repo), "--base", "main", "--format", "text")
    assert code == 0 and "no longer reported after this change: MC408 " in out, out
    code, out, _ = _review(capsys, str(repo), "--base", "main", "--format", "markdown")
    assert "### No longer reported after this change" in out and "Fixed by this change" not in out

"""`review --format text`: the compact report, golden files on the example recipes, at most ~25 lines a recipe.

Regenerate after an intended change: UPDATE_GOLDEN=1 pytest tests/report/test_review_text.py
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from report_helpers import demo_copy, move_compile_after_wrap
from test_review_golden import GOLDEN, _check
from test_review_golden import _normalise as _normalise_md

from model_compile.analyze import analyze_path
from model_compile.cli import main
from model_compile.report.build import build_tree
from model_compile.report.models import ReportFinding
from model_compile.report.run import review_path
from model_compile.report.text import CUT, _cut, text

MAX_LINES_PER_RECIPE = 25


def _normalise(out: str, root: Path) -> str:
    return re.sub(r"static \([0-9.]+ s\)", "static (<t> s)", _normalise_md(out, root))


@pytest.fixture()
def repo(tmp_path: Path) -> Path:
    return demo_copy(tmp_path / "demo")


def _per_recipe(out: str) -> list[int]:
    blocks = out.split("\n== ")[1:]
    return [len(b.split("\n\n")[0].splitlines()) for b in blocks]


def test_text_clean_kit(repo: Path) -> None:
    out = text(review_path(repo / "recipes" / "vlm_kit"))
    assert out.splitlines()[0].startswith("model-compile review: NOT VALIDATED - vlm_kit: soft review only")
    assert max(_per_recipe(out)) <= MAX_LINES_PER_RECIPE
    _check("clean_kit.txt", _normalise(out, repo))


def test_text_misplaced(repo: Path) -> None:
    move_compile_after_wrap(repo)
    out = text(review_path(repo / "recipes" / "vlm_kit"))
    assert out.startswith("model-compile review: NEEDS CHANGES")
    assert any(" MC408 " in line and "engine/vlm_kit_engine.py:" in line for line in out.splitlines())
    misplaced = [line for line in out.splitlines() if line.startswith("  misplaced: ")]
    assert misplaced and all(CUT not in line for line in misplaced)  # the wiring lines keep their point
    _check("misplaced_compile.txt", _normalise(out, repo))


def test_text_cpu_only_hard(repo: Path) -> None:
    recorded = json.loads((GOLDEN / "hard_vlm_kit_cpu.json").read_text())
    recipe = repo / "recipes" / "vlm_kit"
    out = text(build_tree(analyze_path(recipe), recipe, hard={"vlm_kit": recorded}, soft_seconds=0.01))
    assert "measured (cpu-only)" in out and "CPU only" in out.splitlines()[0]
    assert max(_per_recipe(out)) <= MAX_LINES_PER_RECIPE
    _check("hard_cpu_only.txt", _normalise(out, repo))


def test_cli_format_text(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["review", str(repo), "--format", "text"]) == 0
    out = capsys.readouterr().out
    assert out.count("\n== ") == 4 and out.rstrip().endswith("--format markdown (or json)")


def test_every_new_finding_and_every_error_is_listed_the_rest_folded_with_their_kinds(repo: Path) -> None:
    """A reviewer filtering on `new` must see them all in the compact text, however many there are."""
    report = review_path(repo / "recipes" / "vlm_kit")
    section = report.recipes[0]
    base = ReportFinding(
        rule="MC205", severity="info", file="configs/schema.py", line=1, message="m", fix="f", status="existing"
    )
    section.findings = [
        *[base.model_copy(update={"line": i, "rule": "MC407", "status": "new"}) for i in range(1, 9)],
        *[base.model_copy(update={"line": 20 + i}) for i in range(3)],
        base.model_copy(update={"line": 30, "severity": "warning", "rule": "MC203"}),
    ]
    out = text(report)
    listed = [line for line in out.splitlines() if line.startswith("    new info configs/schema.py:")]
    assert len(listed) == 8  # more than MAX_FINDINGS, all shown
    assert "existing info configs/schema.py:2" not in out
    assert "(+4 more (existing info, existing warning): --format markdown or json)" in out


def test_a_long_line_is_cut_at_a_word_and_says_so() -> None:
    words = " ".join(f"guard{i}" for i in range(200))
    line = _cut(f"    - {words}", 160)
    assert len(line) <= 160 and line.endswith(CUT)
    kept = line[: -len(CUT)].split()
    assert kept[-1] in words.split()  # the last word kept is whole
    assert _cut("    - short line", 160) == "    - short line"  # near miss: a short line is left alone
    huge = _cut("x" * 400, 160)  # one word longer than the line: cut inside it, still saying so
    assert len(huge) <= 160 and huge.endswith(CUT)


def test_the_text_report_keeps_the_rehearsals_failures_fixes_coverage_changed_lines_and_parity_first() -> None:
    from model_compile.report import text as text_mod

    setting = [f"stage line {i}" for i in range(12)]
    must = [
        "FAILED: x",
        "fix (proven ...): y",
        "compiled: 10%",
        "the change's lines: 1 hunk",
        "parity over 8",
        "keys: ok",
    ]
    lines = setting[:6] + must[:3] + setting[6:] + must[3:]
    shown = text_mod._first_lines(lines)
    assert len(shown) == text_mod.REHEARSAL_LINES and all(m in shown for m in must)
    assert shown.index("FAILED: x") > shown.index("stage line 0")  # the rehearsal's own order is kept
    stood_in = "batches: from synthetic batches, which every figure here comes from, because the data path failed"
    shown = text_mod._first_lines([*lines, stood_in])
    assert stood_in in shown and all(m in shown for m in must[:2])

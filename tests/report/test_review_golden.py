"""Golden review reports for the example recipes: clean kit, a misplaced compile, a CPU-only hard run.

The hard report is a recorded `validate --hard --format json` of the example kit recipe on a CPU-only
machine (tests/golden/report/hard_vlm_kit_cpu.json), so these tests need no torch.
Regenerate after an intended change: UPDATE_GOLDEN=1 pytest tests/report/test_review_golden.py
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from report_helpers import demo_copy, move_compile_after_wrap

from model_compile.analyze import analyze_path
from model_compile.report.build import build_tree
from model_compile.report.render import markdown
from model_compile.report.run import review_path

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "report"


def _normalise(text: str, root: Path) -> str:
    text = text.replace(str(root.resolve()), "<REPO>").replace(str(root), "<REPO>")
    text = re.sub(r"\| static \| [0-9.]+ s \|", "| static | <t> s |", text)
    text = re.sub(r"(?<![\w<])/\S*/bin/python[0-9.]*", "<PYTHON>", text)  # the interpreter this machine resolves
    return re.sub(r"model-compile \d+\.\d+\.\d+\S*", "model-compile <version>", text)


def _check(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("UPDATE_GOLDEN"):
        path.write_text(text)
    assert path.is_file(), f"missing golden {path}: run with UPDATE_GOLDEN=1"
    assert text == path.read_text(), f"{name} differs from the golden file (UPDATE_GOLDEN=1 to accept)"


@pytest.fixture()
def repo(tmp_path: Path) -> Path:
    return demo_copy(tmp_path / "demo")


def test_clean_kit_recipe(repo: Path) -> None:
    report = review_path(repo / "recipes" / "vlm_kit")
    assert report.verdict == "not validated" and report.exit_code == 0
    section = report.recipes[0]
    assert section.compile_path.path == "kit" and not section.placement.misplaced
    assert [r.status for r in section.validation][:3] == ["passed", "not-run", "not-run"]
    assert "class s5 compile" in section.placement.mermaid
    _check("clean_kit.md", _normalise(markdown(report), repo))


def test_misplaced_compile(repo: Path) -> None:
    move_compile_after_wrap(repo)
    report = review_path(repo / "recipes" / "vlm_kit")
    assert report.verdict == "needs changes" and report.exit_code == 1
    section = report.recipes[0]
    assert [s.kind for s in section.placement.stages if s.misplaced] == ["compile"]
    assert "class s6 misplaced" in section.placement.mermaid
    assert any(f.rule == "MC408" for f in section.findings)
    _check("misplaced_compile.md", _normalise(markdown(report), repo))


def test_cpu_only_hard_run(repo: Path) -> None:
    recorded = json.loads((GOLDEN / "hard_vlm_kit_cpu.json").read_text())
    recipe = repo / "recipes" / "vlm_kit"
    report = build_tree(analyze_path(recipe), recipe, hard={"vlm_kit": recorded}, soft_seconds=0.01)
    section = report.recipes[0]
    assert {r.where for r in section.validation if r.status == "passed" and r.name != "soft"} == {
        "cpu-only",
        "cpu-only (tiny model), backend aot_eager, 1 rank(s), /path/to/venv/bin/python",
    }
    assert any(line.startswith("parity over 2 optimizer steps") for line in section.performance.rehearsal)
    perf = section.performance
    assert perf.measured and perf.where == "cpu-only"
    assert perf.graph_breaks.budget == 40 and perf.recompiles.budget == 16
    assert any("no speedup" in a for a in perf.advice)
    assert report.verdict == "not validated" and "CPU only" in report.verdict_reason  # never runtime validation
    _check("hard_cpu_only.md", _normalise(markdown(report), repo))


def _cells(line: str) -> int:
    return len(re.split(r"(?<!\\)\|", line.strip().strip("|")))


def test_markdown_stays_valid_for_github(repo: Path) -> None:
    """The chart sits in a fenced `mermaid` block inside <details>; every table row has the header's columns."""
    move_compile_after_wrap(repo)
    text = markdown(review_path(repo / "recipes" / "vlm_kit"))
    for name in ("clean_kit.md", "misplaced_compile.md", "hard_cpu_only.md"):
        text += "\n" + (GOLDEN / name).read_text()
    lines = text.splitlines()
    depth, fences = 0, 0
    for i, line in enumerate(lines):
        depth += line.startswith("<details>") - (line == "</details>")
        assert depth in (0, 1), f"unbalanced <details> at line {i}"
        if line == "```mermaid":
            fences += 1
            assert depth == 1 and lines[i - 1] == "", "a Mermaid chart outside <details> (or not after a blank line)"
    assert fences >= 3 and depth == 0
    for i, line in enumerate(lines):
        if line.startswith("|---"):
            header = _cells(lines[i - 1])
            assert _cells(line) == header
            j = i + 1
            while j < len(lines) and lines[j].startswith("|"):
                assert _cells(lines[j]) == header, f"table row {j} has {_cells(lines[j])} cells, header {header}"
                j += 1

"""Runtime gaps the review names from a hard run's record."""

from __future__ import annotations

import json
from pathlib import Path

from report_helpers import demo_copy

from model_compile.analyze import analyze_path
from model_compile.report.build import build_tree

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "report"


def test_a_review_of_a_run_on_another_torch_says_so(tmp_path: Path) -> None:
    repo = demo_copy(tmp_path / "demo")
    (repo / "pyproject.toml").write_text('[project]\nname = "demo"\ndependencies = ["torch==2.8.0"]\n')
    recorded = json.loads((GOLDEN / "hard_vlm_kit_cpu.json").read_text())
    recorded["repo_root"] = str(repo)
    recipe = repo / "recipes" / "vlm_kit"
    used = recorded["environment"]["torch"]
    section = build_tree(analyze_path(recipe), recipe, hard={"vlm_kit": recorded}).recipes[0]
    assert any(
        u.startswith(f"torch {used} ran these checks, but the repository pins torch==2.8.0")
        for u in section.performance.unvalidated
    )


def test_a_structure_layer_that_skipped_tests_says_so():
    from model_compile.report.hardfacts import read_hard

    hard = {
        "environment": {"label": "cpu-only", "cpu_only": True},
        "layers": [
            {
                "name": "structure",
                "status": "passed",
                "counts": {
                    "tests": 3,
                    "passed": 2,
                    "skipped": 1,
                    "skip_reasons": [
                        "recipes.r.tests.test_structure.test_engine_structure: model-compile is not importable here"
                    ],
                },
            }
        ],
    }
    (row,) = read_hard(hard).layers
    assert row.status == "passed"
    assert row.reason == (
        "2 passed, 1 skipped: test_engine_structure: model-compile is not importable here "
        "(the soft layer of this run ran that review)"
    )
    other = {**hard["layers"][0], "counts": {**hard["layers"][0]["counts"], "skip_reasons": ["test_x: needs data"]}}
    (row,) = read_hard({**hard, "layers": [other]}).layers  # near miss: another skip is only named
    assert row.reason == "2 passed, 1 skipped: test_x: needs data"

"""The budgets line says whether anything enforces a budget: only a check of the recipe's asserts that reads
GRAPH_BREAK_BUDGET / RECOMPILE_BUDGET (or the smoke run's record) does; otherwise the numbers are the path's
reference (tiny-model measurements with headroom), and the report says so."""

from __future__ import annotations

from pathlib import Path

import pytest
from report_helpers import demo_copy

from model_compile.report.render import markdown
from model_compile.report.run import review_path

SKILL = Path("recipes/vlm_kit/tests/skills/model-compile/asserts.py")
USED = "GRAPH_BREAK_BUDGET = 12\nRECOMPILE_BUDGET = 3\n\n\ndef check(n, r):\n    assert n <= GRAPH_BREAK_BUDGET and r <= RECOMPILE_BUDGET\n"
UNREAD = (
    "GRAPH_BREAK_BUDGET = 12\n\n\ndef test_config_structure(config):\n    assert config.model.compile is not None\n"
)
NONE = "def test_config_structure(config):\n    assert config.model.compile is not None\n"


@pytest.mark.parametrize(
    ("asserts", "budgets", "enforced", "source"),
    [
        (USED, (12, 3), True, "tests/skills/model-compile/asserts.py"),
        (UNREAD, (40, 16), False, "sets GRAPH_BREAK_BUDGET but no check of it reads them"),  # near miss: set, unread
        (NONE, (40, 16), False, "sets no GRAPH_BREAK_BUDGET or RECOMPILE_BUDGET"),
        (None, (40, 16), False, "the recipe has no tests/skills/model-compile/asserts.py"),
    ],
)
def test_a_budget_is_enforced_only_where_a_check_reads_it(
    tmp_path: Path, asserts: str | None, budgets: tuple[int, int], enforced: bool, source: str
) -> None:
    repo = demo_copy(tmp_path / "demo")
    if asserts is None:
        (repo / SKILL).unlink()
    else:
        (repo / SKILL).write_text(asserts)
    report = review_path(repo / "recipes" / "vlm_kit")
    perf = report.recipes[0].performance
    assert (perf.graph_breaks.budget, perf.recompiles.budget) == budgets
    assert perf.graph_breaks.enforced is perf.recompiles.enforced is enforced
    assert source in perf.graph_breaks.budget_source
    md = markdown(report)
    if enforced:
        assert "budgets (the most the smoke's asserts allow): 12 graph breaks, 3 recompiles" in md
    else:
        assert "no budget is enforced (" in md and "the most the smoke's asserts allow" not in md
        # the path's reference, said to be no measurement of the recipe (a reader took "40 graph breaks" for a figure)
        assert (
            "for reference, not a measurement of this recipe: tiny models on this compile path stayed within 40 graph "
            "breaks and 16 recompiles (measured, with headroom)" in md
        )

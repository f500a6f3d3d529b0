"""Recipes that ask a change the same question share one rehearsal; any difference in what is asked keeps them
apart."""

from __future__ import annotations

from pathlib import Path

from model_compile.analyze import analyze_path
from model_compile.hard.models import RehearsalFacts
from model_compile.hard.rehearsal.command import Options
from model_compile.hard.rehearsal.questions import answered, question

REPO = Path(__file__).parent / "fixtures" / "rehearsal_repo"


def _recipe(name: str):  # type: ignore[no-untyped-def]
    return next(iter(analyze_path(REPO / "recipes" / name, recipe=None).recipes))


def test_the_same_recipe_and_change_is_the_same_question_and_any_difference_is_another() -> None:
    blocks, static = _recipe("lm_blocks"), _recipe("lm_static")
    root = REPO / "recipes"
    key = question(blocks, root / "lm_blocks", REPO, Options(), ["toy_engine/loss.py"])
    assert key is not None and key == question(blocks, root / "lm_blocks", REPO, Options(), ["toy_engine/loss.py"])
    assert key != question(blocks, root / "lm_blocks", REPO, Options(), ["toy_engine/other.py"])
    assert key != question(static, root / "lm_static", REPO, Options(), ["toy_engine/loss.py"])
    assert question(blocks, root / "lm_blocks", REPO, Options(), []) is None  # no change: nothing to share


def test_an_answer_says_whose_rehearsal_it_is() -> None:
    facts = RehearsalFacts(status="passed", label="cpu-only (tiny model)", notes=["n"])
    copy = answered(facts, "recipes/a")
    assert copy.answered_by == "recipes/a" and copy.notes[0].startswith("not rehearsed again")
    assert facts.answered_by is None and facts.notes == ["n"]  # the original is untouched

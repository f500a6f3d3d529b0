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


def test_only_the_same_run_is_the_same_question(tmp_path: Path) -> None:
    """A copy of a recipe (same code, same stage) asks the same question; a learning rate, an unread stage key or a
    line of the engine makes another: sharing a rehearsal between runs that differ would be a rehearsal of a
    different run."""
    import shutil

    repo = tmp_path / "repo"
    shutil.copytree(REPO, repo)
    shutil.copytree(repo / "recipes" / "lm_blocks", repo / "recipes" / "lm_twin")
    twin = repo / "recipes" / "lm_twin"
    stage = twin / "configs" / "train.yaml"
    engine = twin / "engine" / "lm_blocks_engine.py"
    text, code = stage.read_text(), engine.read_text()

    def key(name: str) -> str | None:
        recipe = next(iter(analyze_path(repo / "recipes" / name, recipe=None).recipes))
        return question(recipe, repo / "recipes" / name, repo, Options(), ["toy_engine/loss.py"])

    first = key("lm_blocks")
    assert first is not None and key("lm_twin") == first  # a copy: the same run
    stage.write_text(
        text.replace("  gradient_accumulation_steps: 2\n", "  gradient_accumulation_steps: 2\n  lr: 0.5\n")
    )
    assert key("lm_twin") != first  # an optimizer setting moves the gradients
    stage.write_text(text.replace("    backend: inductor\n", "    backend: aot_eager\n", 1))
    assert key("lm_twin") != first  # the compile call reads model.compile.backend
    stage.write_text(text)
    engine.write_text(code + "\n# another line of the engine\n")
    assert key("lm_twin") != first  # the engine's own code

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


def test_a_setting_prepare_model_reads_is_part_of_the_question_and_one_it_does_not_read_is_not(
    tmp_path: Path,
) -> None:
    import shutil

    repo = tmp_path / "repo"
    shutil.copytree(REPO, repo)
    stage = repo / "recipes" / "lm_blocks" / "configs" / "train.yaml"
    text = stage.read_text()
    recipe = next(iter(analyze_path(repo / "recipes" / "lm_blocks", recipe=None).recipes))

    def key() -> str | None:
        return question(recipe, repo / "recipes" / "lm_blocks", repo, Options(), ["toy_engine/loss.py"])

    first = key()
    stage.write_text(
        text.replace(
            "  attn_implementation: flash_attention_2\n", "  attn_implementation: flash_attention_2\n  note: any\n"
        )
    )
    assert key() == first  # a key prepare_model() never reads
    stage.write_text(text.replace("    backend: inductor\n", "    backend: aot_eager\n", 1))
    assert key() != first  # the compile call reads model.compile.backend

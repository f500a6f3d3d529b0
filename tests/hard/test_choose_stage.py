"""Which stage the rehearsal runs when none enables compile and none is asked for: the heaviest wrap and data
regime (sharded over replicated over one rank, then more accumulation, then longer sequences), said why."""

from __future__ import annotations

from pathlib import Path

import pytest

from model_compile.findings.models import RecipeReport
from model_compile.hard.rehearsal.planning.plan import NotPlanned, choose_stage

STAGE = """\
parallel:
  mesh:
    replicate: {replicate}
    shard: {shard}
    tensor: 1
data:
  max_seq_len: {seq}
  batch_size: 1
optim:
  global_batch_size: 256
  gradient_accumulation_steps: {ga}
model:
  compile:
    enabled: false
"""


def _recipe(tmp_path: Path, stages: dict[str, dict[str, int]]) -> tuple[RecipeReport, Path]:
    root = tmp_path / "recipes" / "vlm"
    (root / "configs").mkdir(parents=True)
    for name, values in stages.items():
        (root / "configs" / f"{name}.yaml").write_text(STAGE.format(**values))
    return RecipeReport(name="vlm", path="recipes/vlm"), root


DDP = {"replicate": -1, "shard": 1, "seq": 8192, "ga": 4}
FSDP = {"replicate": -1, "shard": 8, "seq": 16384, "ga": -1}
ONE = {"replicate": 1, "shard": 1, "seq": 32768, "ga": 64}


def test_a_sharded_stage_wins_over_the_tests_default_and_says_why(tmp_path: Path) -> None:
    recipe, root = _recipe(tmp_path, {"stage1": DDP, "stage2": FSDP, "stage3": FSDP})
    stage, why = choose_stage(recipe, root, None, "stage1")
    assert stage == "stage2"
    assert "heaviest wrap and data regime (tied with stage3: the first by name)" in why
    assert "sharded (mesh shard 8)" in why and "max_seq_len 16384" in why
    assert "the recipe tests' default --config-name stage1 was not taken, it is lighter: replicated" in why


def test_the_tests_default_stays_when_it_is_among_the_heaviest(tmp_path: Path) -> None:
    recipe, root = _recipe(tmp_path, {"stage1": DDP, "stage2": FSDP, "stage3": FSDP})
    stage, why = choose_stage(recipe, root, None, "stage3")
    assert stage == "stage3" and why.startswith("the recipe tests' default --config-name, and no stage enables")
    assert "(tied with stage2)" in why


def test_replicated_beats_one_rank_then_accumulation_then_length(tmp_path: Path) -> None:
    recipe, root = _recipe(tmp_path, {"a": ONE, "b": DDP})
    assert choose_stage(recipe, root, None, None)[0] == "b"  # a wrap over ranks, though a is longer and accumulates
    recipe, root = _recipe(tmp_path / "2", {"a": {**DDP, "ga": 2}, "b": {**DDP, "seq": 1024}})
    assert choose_stage(recipe, root, None, None)[0] == "b"  # more micro-steps first
    recipe, root = _recipe(tmp_path / "3", {"a": DDP, "b": {**DDP, "seq": 1024}})
    stage, why = choose_stage(recipe, root, None, None)
    assert stage == "a" and why.endswith("(pass --config-name for another)")


def test_asked_enabling_and_single_stages_are_unchanged(tmp_path: Path) -> None:
    recipe, root = _recipe(tmp_path, {"stage1": DDP, "stage2": FSDP})
    assert choose_stage(recipe, root, "stage1", "stage1") == ("stage1", "asked for with --config-name")
    with pytest.raises(NotPlanned, match="no configs/nope.yaml"):
        choose_stage(recipe, root, "nope", None)
    recipe, root = _recipe(tmp_path / "one", {"train": DDP})
    assert choose_stage(recipe, root, None, "train") == ("train", "the recipe tests' default --config-name")

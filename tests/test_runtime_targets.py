"""The runtime target check's matching and counting rules (pure Python, no torch)."""

from __future__ import annotations

import pytest

from model_compile.runtime.targets import check_target, check_targets, segment_match

BLOCKS = [f"model.language_model.layers.{i}" for i in range(28)]
NAMES = ["", "model", "model.language_model", "model.language_model.layers", *BLOCKS]
NAMES += [f"{b}.mlp" for b in BLOCKS] + ["model.visual", "lm_head"]


@pytest.mark.parametrize(
    ("pattern", "name", "matches"),
    [
        ("layers.*", "layers.0", True),
        ("layers.*", "layers.0.mlp", False),  # `*` never crosses a dot (fnmatch's would)
        ("layers.*", "layers", False),
        ("*", "layers", True),
        ("*", "layers.0", False),
        ("model.*.layers.*", "model.language_model.layers.3", True),
        ("model.*.layers.*", "model.language_model.decoder.layers.3", False),
        ("model.visual", "model.visual", True),
        ("model.visual", "model.visual.blocks.0", False),
        ("", "", True),
        ("", "model", False),
        ("model", "", False),
        ("layers.1?", "layers.12", True),
    ],
)
def test_segment_match(pattern, name, matches):
    assert segment_match(pattern, name) is matches


def test_regional_target_expects_every_block():
    compiled = set(BLOCKS[:27])
    check = check_target("model.language_model.layers.*", NAMES, compiled)
    assert check["ok"] is False and (check["expected"], check["compiled"]) == (28, 27)
    assert check["text"] == (
        "'model.language_model.layers.*': 27 of 28 blocks compiled (not compiled: model.language_model.layers.27)"
    )
    assert check_target("model.language_model.layers.*", NAMES, set(BLOCKS))["ok"] is True


def test_one_compiled_block_is_no_longer_enough():
    """The old check passed when any single module matched the pattern."""
    out = check_targets(NAMES, {BLOCKS[0]}, ["model.language_model.layers.*"])
    assert out["missing_targets"] == ["model.language_model.layers.*"]
    assert out["target_failures"][0].startswith("'model.language_model.layers.*': 1 of 28 blocks compiled")


def test_nested_modules_do_not_count_as_blocks():
    """Compiling each block's mlp is not compiling the blocks."""
    mlps = {f"{b}.mlp" for b in BLOCKS}
    check = check_target("model.language_model.layers.*", NAMES, mlps)
    assert check["compiled"] == 0 and not check["ok"]


def test_submodule_and_kit_targets_expect_exactly_that_module():
    # submodule: its blocks compiled instead is a different scope
    check = check_target("model.language_model", NAMES, set(BLOCKS))
    assert not check["ok"]
    assert check["text"].startswith(
        "'model.language_model': `model.language_model` is not compiled (28 module(s) inside it"
    )
    assert check_target("model.language_model", NAMES, {"model.language_model"})["ok"]
    # kit: the model itself
    assert check_target("", NAMES, {""})["text"] == "'': the model itself compiled"
    assert not check_target("", NAMES, set(BLOCKS))["ok"]


def test_a_target_that_does_not_exist_fails():
    check = check_target("model.text_model.layers.*", NAMES, set(BLOCKS))
    assert not check["ok"] and "no module of the model matches" in check["text"]


def test_compiled_modules_outside_every_target_are_listed_not_failed():
    out = check_targets(NAMES, {*BLOCKS, "lm_head"}, ["model.language_model.layers.*"])
    assert out["target_failures"] == [] and out["other_compiled"] == ["lm_head"] and out["other_compiled_count"] == 1


def test_a_submodule_of_each_block_is_matched_per_block():
    """`for layer in layers: layer.self_attn.compile()` reads as `layers.*.self_attn` (the ledger's pattern): every
    block's self_attn must be compiled; the misread `layers.self_attn.*` names no module at all."""
    names = [*NAMES, *(f"{b}.self_attn" for b in BLOCKS), *(f"{b}.mlp" for b in BLOCKS)]
    attn = {f"{b}.self_attn" for b in BLOCKS}
    out = check_targets(names, attn, ["model.language_model.layers.*.self_attn"])
    assert out["target_failures"] == [] and out["other_compiled"] == []
    assert out["target_checks"][0]["text"] == "'model.language_model.layers.*.self_attn': 28 of 28 modules compiled"
    short = check_target("model.language_model.layers.*.self_attn", names, attn - {f"{BLOCKS[3]}.self_attn"})
    assert not short["ok"] and short["missing"] == [f"{BLOCKS[3]}.self_attn"]
    assert (
        "no module of the model matches" in check_target("model.language_model.layers.self_attn.*", names, attn)["text"]
    )

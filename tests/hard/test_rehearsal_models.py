"""Every model a recipe builds, for real: fixture recipes whose models the stage's pretrained path does not build.

Each rehearsal runs once per module (about 10-20 s each on two cores); the cases read the same run. A bad
override is refused before anything runs.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("omegaconf")

from model_compile.cli import main  # noqa: E402
from model_compile.hard.models import RehearsalFacts  # noqa: E402
from model_compile.hard.rehearsal.command import Options, standalone  # noqa: E402

pytestmark = pytest.mark.hard

FIXTURES = Path(__file__).parent / "fixtures" / "rehearsal_repo"
RECIPES = FIXTURES / "recipes"
ENCODER = "/cluster/team/encoders/vit-enc"


def _rehearse(tmp_path_factory: pytest.TempPathFactory, recipe: str, **options: object) -> RehearsalFacts:
    out = tmp_path_factory.mktemp(recipe)
    facts, _, _ = standalone(RECIPES / recipe, sys.executable, Options(**options), out)  # type: ignore[arg-type]
    return facts


@pytest.fixture(scope="module")
def own_fields(tmp_path_factory: pytest.TempPathFactory) -> RehearsalFacts:
    """A checkpoint named and never loaded; the model built from the recipe's own size preset and dataclass."""
    return _rehearse(tmp_path_factory, "lm_own_fields", steps=2, backend="eager")  # dynamo's part is what counts


def test_a_model_the_recipe_builds_from_its_own_fields_is_shrunk_at_its_real_depth(own_fields: RehearsalFacts) -> None:
    assert own_fields.status == "passed", own_fields.reason
    assert own_fields.depth == {"lm.model.layers": "3 Qwen3DecoderLayer", "head.blocks": "2 HeadBlock"}  # measured
    assert own_fields.depth_known is True
    assert "hidden_size 768 -> 64" in own_fields.shrunk and "HeadSpec.d_model 768 -> 64" in own_fields.shrunk
    assert not any("vocab" in s for s in own_fields.shrunk)  # the recipe's own data makes the ids: kept
    assert own_fields.model_source and own_fields.model_source.startswith("built by the recipe itself")
    assert "never loaded the stage's pretrained path 'Qwen/Qwen3-0.6B'" in own_fields.model_source
    (model,) = own_fields.models
    assert model["class"] == "LmWithHead" and model["parameters"] == own_fields.parameters < 1_000_000
    assert own_fields.memory["available_mb"] and own_fields.memory["more_mb"] > 0 and own_fields.rank_rss


def test_the_batches_the_model_saw_are_recorded(own_fields: RehearsalFacts) -> None:
    first = own_fields.batches_seen["described"][0]["keys"]
    assert first == {"input_ids": "int64 [2, 16]", "attention_mask": "int64 [2, 16]", "labels": "int64 [2, 16]"}
    assert set(own_fields.batches_seen["batches"]) == {"recipe"}  # none from the tool
    assert own_fields.packing and own_fields.packing.startswith("one sample a row")


def test_a_second_model_whose_config_is_not_here_is_built_as_the_architecture_its_name_names(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """The encoder's cluster path names ViT (`vit-enc`): AutoModel builds ViTConfig at its default structure,
    each stack at the unknown-depth policy, said so; no table of families decides it."""
    facts = _rehearse(tmp_path_factory, "two_towers", steps=2, backend="eager")
    assert facts.status == "passed", facts.reason
    encoder = next(m for m in facts.models if m["class"] == "ViTModel")
    assert list(encoder["stacks"].values()) == ["10 ViTLayer"]  # the policy's depth: the real one is not known
    load = next(ld for ld in facts.loads if ld["name"] == ENCODER)
    assert load["source"].startswith(f"ViTConfig (vit), which its name '{ENCODER}' names")
    assert load["depth_unknown"] and "depth unknown: 10 layers a stack" in load["source"]


def test_a_second_model_with_a_supplied_config_is_built_shrunk_beside_the_first(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    config = FIXTURES / "encoder_vit_config.json"
    facts = _rehearse(tmp_path_factory, "two_towers", steps=2, backend="eager", model_configs={ENCODER: config})
    assert facts.status == "passed", facts.reason
    main_model, encoder = facts.models
    assert main_model["class"] == "Qwen3ForCausalLM" and main_model["stacks"] == {
        "model.layers": "10 Qwen3DecoderLayer"
    }
    assert encoder["class"] == "ViTModel" and list(encoder["stacks"].values()) == ["4 ViTLayer"]
    assert "hidden_size 768 -> 64" in encoder["shrunk"] and ENCODER in encoder["source"]
    assert any(load["name"] == ENCODER and load["source"].startswith("--model-config") for load in facts.loads)


def test_a_remote_code_encoder_whose_code_checks_its_head_size_is_built_with_its_processor(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """A supplied config's folder gives the stand-in its code and its processor's settings; a model whose code
    refuses the tiny head size is built again with each head at its real size, said so."""
    name = "/cluster/team/encoders/rope-enc"
    config = FIXTURES / "remote_encoder" / "config.json"
    facts = _rehearse(tmp_path_factory, "remote_tower", steps=2, backend="eager", model_configs={name: config})
    assert facts.status == "passed", facts.reason
    encoder = next(m for m in facts.models if m["class"] == "RopeEncoderModel")
    assert list(encoder["stacks"].values()) == ["3 RopeEncoderLayer"]
    assert "hidden_size 512 -> 256" in encoder["shrunk"] and "num_attention_heads 8 -> 4" in encoder["shrunk"]
    assert any("each attention head kept at its real size" in s and "AssertionError" in s for s in encoder["shrunk"])
    assert any(load["name"] == name and load["kind"] == "processor" for load in facts.loads)


def test_the_fp32_reference_casts_what_a_bf16_recipe_holds_in_bf16(tmp_path_factory: pytest.TempPathFactory) -> None:
    """With autocast off, a submodule the recipe keeps in bf16 would meet fp32 activations: cast, and said."""
    facts = _rehearse(tmp_path_factory, "lm_mixed", steps=3, backend="aot_eager")
    assert facts.status == "passed", facts.reason
    assert facts.twins == ["reference", "eager", "compiled"] and "float32 reference" in (facts.parity_rule or "")
    assert "the fp32 reference cast 2 parameter(s) the recipe holds in low precision to fp32" in " ".join(facts.notes)


def test_an_override_for_a_key_the_config_lacks_is_refused_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        ["rehearse", str(RECIPES / "lm_own_fields"), "--config-override", "model.hiden_size=64", "--out", str(tmp_path)]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "has no key model.hiden_size" in err[0]
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_a_rank_killed_from_outside_is_an_environment_fault_with_its_memory(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    facts = _rehearse(tmp_path_factory, "lm_killed", steps=2)
    assert facts.status == "not-run" and facts.fault == "environment"
    assert (facts.reason or "").startswith("rank 0 of the reference run was killed by SIGKILL")
    # sampled by the memory watch while it ran, or (it died before the first sample) the kernel's peak when reaped
    assert re.search(r"its (last|peak) resident memory was \d+ MB", facts.reason or ""), facts.reason
    assert "not the recipe's" in (facts.reason or "")

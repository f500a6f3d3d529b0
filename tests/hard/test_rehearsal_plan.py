"""The rehearsal's static plan: the model at its real depth, the world and wrap, the data and the schedule.

No child process and no torch: the plan reads YAML, the soft report and config.json files only.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from model_compile.analyze import analyze_path
from model_compile.hard.rehearsal.planning.data_plan import plan_data
from model_compile.hard.rehearsal.planning.model_plan import (
    NotPlanned,
    depth_of,
    plan_model,
    shrink,
)
from model_compile.hard.rehearsal.planning.plan import plan
from model_compile.hard.rehearsal.planning.world import plan_world
from model_compile.runtime.rehearsal.inputs import vocab

FIXTURES = Path(__file__).parent / "fixtures" / "rehearsal_repo"
RECIPES = FIXTURES / "recipes"
DEMO = Path(__file__).resolve().parents[2] / "examples" / "demo_repo"

# A Qwen3-VL-2B-shaped config.json (real depth and structure, real widths), written for these tests.
QWEN3_VL_2B = {
    "model_type": "qwen3_vl",
    "architectures": ["Qwen3VLForConditionalGeneration"],
    "image_token_id": 151655,
    "video_token_id": 151656,
    "vision_start_token_id": 151652,
    "vision_end_token_id": 151653,
    "tie_word_embeddings": True,
    "text_config": {
        "model_type": "qwen3_vl_text",
        "hidden_size": 2048,
        "intermediate_size": 6144,
        "num_hidden_layers": 28,
        "num_attention_heads": 16,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "vocab_size": 151936,
        "rope_scaling": {"rope_type": "default", "mrope_section": [24, 20, 20], "mrope_interleaved": True},
        "eos_token_id": 151645,
    },
    "vision_config": {
        "depth": 24,
        "hidden_size": 1024,
        "intermediate_size": 4096,
        "num_heads": 16,
        "out_hidden_size": 2048,
        "patch_size": 16,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2,
        "deepstack_visual_indexes": [5, 11, 17],
    },
}


def _plan(recipe_dir: Path, tmp_path: Path, **kwargs):
    report = analyze_path(recipe_dir)
    return plan(report.recipes[0], recipe_dir, recipe_dir.parents[1], tmp_path, **kwargs)


def test_a_real_config_keeps_every_depth_and_structure_field_and_shrinks_only_widths() -> None:
    tiny, shrunk = shrink(QWEN3_VL_2B)
    text, vision = tiny["text_config"], tiny["vision_config"]
    assert (text["num_hidden_layers"], vision["depth"], vision["deepstack_visual_indexes"]) == (28, 24, [5, 11, 17])
    assert tiny["tie_word_embeddings"] is True and vision["patch_size"] == 16
    assert (text["hidden_size"], text["head_dim"], text["num_attention_heads"], text["num_key_value_heads"]) == (
        64,
        16,
        4,
        2,
    )
    assert sum(text["rope_scaling"]["mrope_section"]) == 8  # head_dim / 2
    assert vision["out_hidden_size"] == 64 and vision["hidden_size"] == 32
    assert tiny["image_token_id"] == vocab.token_id("<|image_pad|>") and text["vocab_size"] == vocab.VOCAB_SIZE
    assert text["eos_token_id"] == vocab.token_id("<|endoftext|>")
    assert any("text_config.hidden_size 2048 -> 64" in s for s in shrunk)
    assert not any("num_hidden_layers" in s or "depth" in s for s in shrunk)
    assert QWEN3_VL_2B["text_config"]["hidden_size"] == 2048  # the real config is not touched
    assert depth_of(tiny) == {"text layers": 28, "vision blocks": 24, "deepstack visual indexes": [5, 11, 17]}


def test_model_config_wins_and_its_depth_is_honoured(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(QWEN3_VL_2B))
    model = plan_model("Qwen/Qwen3-VL-2B-Instruct", tmp_path, path, {}, {})
    assert model.depth["text layers"] == 28 and model.depth_known
    assert "--model-config" in model.source and "real depth" in model.source


def test_a_checkpoint_not_here_is_resolved_at_the_recipes_call_with_its_depth_unknown(tmp_path: Path) -> None:
    model = plan_model("Qwen/Qwen3-VL-8B-Instruct", tmp_path, None, {}, {"max_pixels": 1048576})
    assert model.config is None and model.resolved_at_call and not model.depth_known and model.vision
    assert "the config class the recipe's own load call resolves" in model.source and "--model-config" in model.source


def test_a_remote_code_config_keeps_its_auto_map_and_its_code_goes_beside_the_checkpoint(tmp_path: Path) -> None:
    real = {
        "model_type": "tinyvend",
        "hidden_size": 1024,
        "num_hidden_layers": 3,
        "auto_map": {
            "AutoConfig": "configuration_tinyvend.TinyVendConfig",
            "AutoModelForCausalLM": "modeling_tinyvend.TinyVendForCausalLM",
        },
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(real))
    vendored = [str(RECIPES / "vendored_lm" / "third_party" / "configuration_tinyvend.py")]
    model = plan_model("/cluster/tv", tmp_path, path, {}, {}, vendored)  # no code beside it: the vendored copy
    assert model.config is not None and model.config["auto_map"] == real["auto_map"]
    assert sorted(Path(f).name for f in model.code_files) == ["configuration_tinyvend.py", "modeling_tinyvend.py"]
    with pytest.raises(NotPlanned, match="not on this machine, neither beside the config nor vendored"):
        plan_model("/cluster/tv", tmp_path, path, {}, {}, [])


def test_local_checkpoint_and_hub_cache_config_win_over_the_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    local = tmp_path / "ckpt"
    local.mkdir()
    (local / "config.json").write_text(
        json.dumps({"model_type": "qwen3", "num_hidden_layers": 36, "hidden_size": 4096})
    )
    model = plan_model(str(local), tmp_path, None, {}, {})
    assert model.depth == {"layers": 36} and "a local checkpoint" in model.source
    hub = tmp_path / "hf" / "hub" / "models--acme--mystery-7b" / "snapshots" / "abc"
    hub.mkdir(parents=True)
    (hub / "config.json").write_text(
        json.dumps({"model_type": "mixtral", "num_hidden_layers": 32, "num_local_experts": 8})
    )
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    model = plan_model("acme/mystery-7b", tmp_path, None, {}, {})
    assert model.model_type == "mixtral" and model.depth == {"layers": 32, "experts": 8}  # any model_type
    assert "Hugging Face cache" in model.source


def test_a_bad_model_config_is_not_planned(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text(json.dumps({"architectures": ["X"]}))
    with pytest.raises(NotPlanned, match="no model_type"):
        plan_model("acme/mystery-7b", tmp_path, tmp_path / "bad.json", {}, {})


def test_a_recipe_local_builder_keeps_its_depth_and_shrinks_only_wide_widths(tmp_path: Path) -> None:
    fields = {"model.d_model": 1024, "model.n_layers": 24, "model.n_heads": 16, "model.vocab_size": 32000}
    model = plan_model(None, tmp_path, None, fields, {})
    # the heads shrink with the width (64 / 12 heads would not divide); depth and vocabulary stay
    assert model.config is None and model.overrides == ["model.d_model=64", "model.n_heads=4"]
    assert model.depth == {"n_layers": 24}
    small = plan_model(None, tmp_path, None, {"model.d_model": 128, "model.n_layers": 4}, {})
    assert small.overrides == [] and "nothing shrunk" in small.source  # already small: as the stage sets it


@pytest.mark.parametrize(
    ("mesh", "asked", "world", "overrides", "wrap"),
    [
        (
            {"replicate": -1, "shard": 8, "tensor": 1},
            None,
            2,
            ["parallel.mesh.replicate=1", "parallel.mesh.shard=2"],
            "FSDP2",
        ),
        ({"replicate": 1, "shard": -1, "tensor": 1}, None, 2, ["parallel.mesh.shard=2"], "FSDP2"),
        ({"replicate": -1, "shard": 1, "tensor": 1}, None, 2, ["parallel.mesh.replicate=2"], "data parallel"),
        ({"replicate": 1, "shard": 1, "tensor": 1}, None, 1, [], "one rank"),
        (
            {"replicate": -1, "shard": 8, "tensor": 1},
            1,
            1,
            ["parallel.mesh.replicate=1", "parallel.mesh.shard=1"],
            "one rank",
        ),
        ({"replicate": 1, "shard": 4, "tensor": 2}, 4, 4, ["parallel.mesh.tensor=1"], "FSDP2"),
    ],
)
def test_the_world_follows_the_stage_mesh(
    mesh: dict, asked: int | None, world: int, overrides: list[str], wrap: str
) -> None:
    plan_ = plan_world(mesh, "parallel.mesh", asked)
    assert plan_.world_size == world and sorted(plan_.overrides) == sorted(overrides) and wrap in plan_.wrap
    if mesh.get("tensor", 1) > 1:
        assert any("tensor parallel" in n for n in plan_.notes)


def _data(paths: dict, tmp_path: Path, **kw):
    return plan_data(
        paths,
        tmp_path,
        tmp_path / "recipes" / "r",
        steps=8,
        world_size=kw.get("world", 2),
        vision=kw.get("vision", False),
        model_dir="/ckpt",
        out_dir=tmp_path / "out",
        batch_keys=[],
    )


def test_the_schedule_keeps_accumulation_and_the_packers_regime(tmp_path: Path) -> None:
    (tmp_path / "recipes" / "r").mkdir(parents=True)
    llm = _data(
        {
            "data.train_path": "./data/missing/meta.json",
            "data.max_seq_len": 8192,
            "data.batch_size": 1,
            "data.packing_tail_policy": "drop",
            "optim.global_batch_size": 256,
            "optim.gradient_accumulation_steps": -1,
            "loop.total_steps": 10000,
            "checkpoint.interval": 5,
        },
        tmp_path,
    )
    assert llm.mode == "batches" and "is not here" in llm.reason and "mvp_dataset" in llm.reason
    assert llm.regime == "full" and llm.max_seq_len == 512
    assert {
        "data.max_seq_len=512",
        "optim.global_batch_size=4",
        "loop.total_steps=8",
        "checkpoint.interval=8000",
    } <= set(llm.overrides)
    assert "2 micro-steps per optimizer step" in llm.accumulation and "accumulates 128" in llm.accumulation
    vlm = _data({"data.packing_selection_strategy": "best_fit", "optim.gradient_accumulation_steps": 4}, tmp_path)
    assert vlm.mode == "own" and vlm.regime == "variable" and "optim.gradient_accumulation_steps=2" in vlm.overrides


def test_missing_data_read_through_mvp_dataset_gets_synthetic_rows(tmp_path: Path) -> None:
    recipe = tmp_path / "recipes" / "r"
    recipe.mkdir(parents=True)
    (recipe / "data.py").write_text("from mvp_dataset import Dataset\n")
    rows = _data(
        {"data.train_path": "./nope.parquet", "data.text_field": "data", "data.max_seq_len": 256}, tmp_path, vision=True
    )
    assert rows.mode == "rows" and rows.rows is not None
    assert rows.rows["text_fields"] == ["data", "text"] and rows.rows["image_sizes"] and rows.rows["max_tokens"] == 128
    assert rows.rows["count"] == 128  # 64 a rank
    (tmp_path / "nope.parquet").write_text("")
    assert _data({"data.train_path": "./nope.parquet"}, tmp_path).mode == "own"  # the data is here


def test_plan_of_a_fixture_recipe(tmp_path: Path) -> None:
    p = _plan(RECIPES / "lm_blocks", tmp_path)
    assert p.stage == "train" and p.world.world_size == 2 and "parallel.mesh.replicate=2" in p.overrides
    assert not any(o.startswith("model.pretrained_model_name_or_path=") for o in p.overrides)  # read at its call
    assert "model.attn_implementation=sdpa" in p.overrides and "loop.total_steps=8" in p.overrides
    assert (p.backend, p.mode) == ("aot_eager", "default") and "unless --backend inductor" in p.backend_reason
    assert p.spec["engine_module"] == "recipes.lm_blocks.engine.lm_blocks_engine"
    assert p.spec["targets"] == ["model.layers.*"] and p.spec["data"]["mode"] == "own"
    assert p.spec["checkpoint"] is None and p.model.resolved_at_call and p.spec["model_hints"]
    assert _plan(RECIPES / "lm_blocks", tmp_path, cpu_only=False).backend == "inductor"
    assert _plan(RECIPES / "lm_blocks", tmp_path, world_size=1).world.world_size == 1
    static = _plan(RECIPES / "lm_static", tmp_path)
    # the model call inside forward_step (where use_cache=False goes), as typed at the repository root
    assert static.compile_kwargs.get("dynamic") == "False"
    assert static.forward_step == "recipes/lm_static/engine/lm_static_engine.py:28"
    assert (static.compile_call or "").startswith("recipes/lm_static/")


def test_plan_of_a_recipe_that_builds_from_its_own_fields(tmp_path: Path) -> None:
    p = _plan(DEMO / "recipes" / "vlm_kit", tmp_path)
    assert p.model.config is None and p.spec["checkpoint"] is None and "own builder" in p.model.source
    assert p.spec["disabled"] == ["model.visual"]  # the kit keeps the vision tower eager
    assert "train.max_steps=8" in p.overrides
    with pytest.raises(NotPlanned, match="no configs/nope.yaml"):
        _plan(DEMO / "recipes" / "vlm_kit", tmp_path, stage="nope")
    with pytest.raises(NotPlanned, match="does not compile"):
        _plan(DEMO / "recipes" / "vlm_plain", tmp_path)


def test_a_length_the_user_sets_is_not_shortened_again(tmp_path: Path) -> None:
    asked = _plan(RECIPES / "lm_blocks", tmp_path, config_overrides=["data.max_seq_len=1024"])
    lengths = [o for o in asked.spec["overrides"] if o.startswith("data.max_seq_len=")]
    assert lengths == ["data.max_seq_len=1024"] and asked.spec["user_overrides"] == lengths  # never 512 after it
    tool = _plan(RECIPES / "lm_blocks", tmp_path / "t", config_overrides=["data.batch_size=1"])
    assert not any(o.startswith("data.max_seq_len=") for o in tool.spec["overrides"])  # 64 in the stage: short

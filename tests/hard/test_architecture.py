"""The architecture of a model whose config is not on this machine: what the recipe says of it (static hints),
which model types a name names (against a registry), the unknown-depth policy, and the config class the recipe's
own load call resolves (transformers' registry, or the repository's vendored config class for remote code).

The hints are static (recipes copied into tmp_path and edited; nothing imported). `resolve` runs in this process
with transformers, as the rehearsal's child runs it in the repository's interpreter.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from model_compile.analyze import analyze_path
from model_compile.hard.rehearsal.planning import hints
from model_compile.hard.rehearsal.planning.plan import plan
from model_compile.hard.stages import stage_files
from model_compile.runtime.rehearsal.models.names import types_named
from model_compile.runtime.rehearsal.models.shrink import UNKNOWN_DEPTH, at_depth

FIXTURES = Path(__file__).parent / "fixtures" / "rehearsal_repo"
KEY = "model.pretrained_model_name_or_path"
TYPES = [
    "qwen3",
    "qwen3_vl",
    "qwen3_vl_moe",
    "qwen2_5_vl",
    "qwen2_vl",
    "vit",
    "clip",
    "llama",
    "git",
    "mistral",
    "mvp",
    "align",
]


@pytest.fixture
def recipe(tmp_path: Path) -> Path:
    """lm_unknown, whose one stage names a checkpoint on a cluster path that names nothing."""
    repo = tmp_path / "repo"
    shutil.copytree(FIXTURES, repo, ignore=shutil.ignore_patterns("__pycache__"))
    root = repo / "recipes" / "lm_unknown"
    train = root / "configs" / "train.yaml"
    train.write_text(train.read_text().replace('"acme/mystery-7b"', '"/cluster/runs/run7/final"'))
    return root


def _stage(root: Path, name: str, model: str) -> None:
    text = (root / "configs" / "train.yaml").read_text()
    (root / "configs" / f"{name}.yaml").write_text(text.replace('"/cluster/runs/run7/final"', f'"{model}"'))


def _hints(root: Path) -> list[dict[str, str]]:
    return hints.recipe_hints(root, KEY, stage_files(root), "train")


@pytest.mark.parametrize(
    ("name", "named"),
    [
        ("Qwen/Qwen3-VL-8B-Instruct", ["qwen3_vl"]),  # the longer match, not qwen3 inside it
        ("./pretrained/Qwen3-VL-8B-Base-stage1", ["qwen3_vl"]),
        ("Qwen/Qwen2.5-VL-7B-Instruct", ["qwen2_5_vl"]),
        ("Qwen/Qwen3-8B-Base", ["qwen3"]),
        ("google/vit-base-patch16-224", ["vit"]),
        ("meta-llama/Llama-3.2-1B", ["llama"]),
        ("Qwen/Qwen3-VL-30B-A3B-Instruct", ["qwen3_vl_moe"]),  # active parameters: the registry's _moe variant
        ("openai/clip-vit-base-patch32", ["clip", "vit"]),  # in the order written: the first is taken
        ("acme/mystery-7b", []),
        ("/cluster/runs/run7/final", []),
        ("gitlab-runner", []),  # near miss: a word that starts as a type's name but goes on in letters
        ("/home/u/mvp-engine/recipes/r/pretrained/Qwen3-VL-8B-Instruct", ["qwen3_vl"]),  # the folders above: not it
        ("/mnt/team/OVEncoder-align/checkpoints/encoder-large", []),  # an ordinary word in a folder names no model
        ("/out/run-qwen3_vl-sft/checkpoints/iter_1544/hf_model", ["qwen3_vl"]),  # a folder's type that is no word
    ],
)
def test_the_model_types_a_name_names(name: str, named: list[str]) -> None:
    assert types_named(name, TYPES) == named


def test_the_unknown_depth_policy_keeps_structure_and_said_what_it_set() -> None:
    config = {
        "model_type": "x",
        "text_config": {"num_hidden_layers": 28, "layer_types": ["sliding"] * 27 + ["full"]},
        "vision_config": {"depth": 24, "deepstack_visual_indexes": [5, 11, 17], "patch_size": 16},
    }
    out, said = at_depth(config, UNKNOWN_DEPTH)
    text, vision = out["text_config"], out["vision_config"]
    assert text["num_hidden_layers"] == vision["depth"] == UNKNOWN_DEPTH
    assert len(text["layer_types"]) == UNKNOWN_DEPTH and "full" in text["layer_types"]  # every kind kept
    assert vision["deepstack_visual_indexes"] == [2, 4, 7] and vision["patch_size"] == 16
    assert "vision_config.deepstack_visual_indexes [5, 11, 17] -> [2, 4, 7]" in said
    assert config["text_config"]["num_hidden_layers"] == 28  # the input is not touched


def test_another_stage_names_the_model_and_says_where(recipe: Path, tmp_path: Path) -> None:
    _stage(recipe, "debug", "lab/Qwen3-8B-Base-stage0")
    found = _hints(recipe)
    assert found[0] == {
        "place": "the recipe's other stages",
        "where": f"stage debug sets {KEY} = 'lab/Qwen3-8B-Base-stage0'",
        "text": "lab/Qwen3-8B-Base-stage0",
    }
    planned = plan(analyze_path(recipe).recipes[0], recipe, recipe.parents[1], tmp_path / "out", stage="train")
    assert planned.model.resolved_at_call and not planned.model.depth_known and planned.spec["checkpoint"] is None
    assert planned.spec["model_hints"]["/cluster/runs/run7/final"][0]["where"].startswith("stage debug")
    assert "--model-config /cluster/runs/run7/final=PATH" in planned.model.source
    assert planned.spec["data"]["model_dir"].endswith("models/cluster-runs-run7-final")  # its stand-in's folder


def test_the_readme_head_and_the_code_are_read_words_that_look_like_names_only(recipe: Path) -> None:
    (recipe / "README.md").write_text(
        "# lm_unknown\n\nA Qwen3 recipe: git clone it.\n\n## Compared\n\nQwen2-VL and ViT runs differ.\n"
    )
    (recipe / "model").mkdir()
    (recipe / "model" / "qwen2_vl_patches.py").write_text("from transformers.models.qwen2_vl import modeling\n")
    (recipe / "tests").mkdir()
    (recipe / "tests" / "test_vit.py").write_text("import transformers.models.vit\n")  # tests are not the recipe
    found = _hints(recipe)
    readme = [(h["where"], h["text"]) for h in found if h["place"] == "the recipe's README"]
    assert readme == [("README.md:1", "lm_unknown"), ("README.md:3", "Qwen3")]  # not `git`, not the later section
    code = [(h["where"], h["text"]) for h in found if h["place"] == "the recipe's own code"]
    assert ("the recipe's module model/qwen2_vl_patches.py", "qwen2_vl_patches") in code
    assert ("model/qwen2_vl_patches.py:1 imports transformers.models.qwen2_vl", "qwen2_vl") in code
    assert not any("vit" in text for _, text in code)  # the recipe's tests are not the recipe


def test_vendored_config_modules_are_found_the_recipes_own_first() -> None:
    root = FIXTURES / "recipes" / "vendored_lm"
    assert hints.vendored_configs(root, FIXTURES) == [str(root / "third_party" / "configuration_tinyvend.py")]
    found = hints.vendored_configs(FIXTURES / "recipes" / "lm_unknown", FIXTURES)
    assert str(FIXTURES / "remote_encoder" / "configuration_rope_encoder.py") in found  # elsewhere in the repository


# -- the config class the recipe's call resolves (transformers in this interpreter) ---------------------------


def _spec(recipe: Path, model_hints: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "repo_root": str(FIXTURES),
        "recipe_root": str(recipe),
        "model_hints": model_hints or {},
        "vendored_configs": hints.vendored_configs(recipe, FIXTURES),
    }


def test_a_name_outside_every_fixture_is_built_as_that_architecture() -> None:
    transformers = pytest.importorskip("transformers")
    from model_compile.runtime.rehearsal.models import architecture

    spec = _spec(FIXTURES / "recipes" / "lm_unknown")
    found = architecture.resolve(transformers.AutoModelForCausalLM, "mistralai/Mistral-7B-v0.1", {}, spec)
    config = found["config"]
    assert config["model_type"] == "mistral" and config["num_hidden_layers"] == UNKNOWN_DEPTH
    assert found["depth_unknown"] and found["code_dir"] is None
    assert found["source"].startswith("MistralConfig (mistral), which its name 'mistralai/Mistral-7B-v0.1' names")
    assert "depth unknown: 10 layers a stack" in found["source"]


def test_hints_decide_where_the_name_names_nothing_and_a_concrete_call_takes_its_own_class() -> None:
    transformers = pytest.importorskip("transformers")
    from model_compile.runtime.rehearsal.models import architecture

    name = "/cluster/runs/run7/final"
    hinted = {name: [{"place": "the recipe's README", "where": "README.md:1", "text": "Llama-3"}]}
    spec = _spec(FIXTURES / "recipes" / "lm_unknown", hinted)
    found = architecture.resolve(transformers.AutoModelForCausalLM, name, {}, spec)
    assert found["config"]["model_type"] == "llama" and "the recipe's README (README.md:1)" in found["source"]
    own = architecture.resolve(transformers.MistralForCausalLM, name, {}, spec)  # the call's class decides
    assert own["config"]["model_type"] == "mistral"
    assert own["notes"] == [
        "the recipe's README (README.md:1) names llama, but the recipe's call MistralForCausalLM.from_pretrained "
        "builds MistralConfig (mistral): the call's is taken"
    ]


def test_a_name_the_call_cannot_build_without_remote_code_and_a_name_of_nothing_are_not_run() -> None:
    transformers = pytest.importorskip("transformers")
    from model_compile.runtime.rehearsal.models import architecture

    spec = _spec(FIXTURES / "recipes" / "lm_unknown")
    with pytest.raises(architecture.ArchitectureUnknown) as refused:
        architecture.resolve(transformers.AutoModelForCausalLM, "Qwen/Qwen3-VL-2B", {}, spec)
    assert "names qwen3_vl (Qwen3VLConfig), which the recipe's call AutoModelForCausalLM.from_pretrained cannot" in str(
        refused.value
    )
    assert "--model-config Qwen/Qwen3-VL-2B=PATH" in str(refused.value) and refused.value.fault == "stand-in"
    with pytest.raises(architecture.ArchitectureUnknown, match="--model-config acme/mystery-7b=PATH"):
        architecture.resolve(transformers.AutoModelForCausalLM, "acme/mystery-7b", {}, spec)


def test_remote_code_is_built_from_the_vendored_config_class_with_an_auto_map_for_the_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    transformers = pytest.importorskip("transformers")
    from model_compile.runtime.rehearsal.models import architecture

    monkeypatch.setenv("HF_MODULES_CACHE", str(tmp_path / "modules"))
    recipe = FIXTURES / "recipes" / "vendored_lm"
    call = transformers.AutoModelForCausalLM
    found = architecture.resolve(call, "Qwen/Qwen3-VL-2B-Instruct", {"trust_remote_code": True}, _spec(recipe))
    config = found["config"]
    assert config["model_type"] == "tinyvend" and config["num_hidden_layers"] == UNKNOWN_DEPTH
    assert config["auto_map"] == {
        "AutoConfig": "configuration_tinyvend.TinyVendConfig",
        "AutoModelForCausalLM": "modeling_tinyvend.TinyVendForCausalLM",  # the head, not the bare model
    }
    assert found["code_dir"] == str(recipe / "third_party")
    assert "cannot build: the call's (trust_remote_code=True) is taken" in found["notes"][0]  # the name disagrees


def test_the_recipes_model_load_is_the_one_that_reads_the_stages_pretrained_key(tmp_path: Path) -> None:
    (tmp_path / "model").mkdir()
    (tmp_path / "tools").mkdir()
    (tmp_path / "model" / "build.py").write_text(
        "from transformers import AutoModelForCausalLM\n\n"
        "def build(cfg):\n"
        "    return AutoModelForCausalLM.from_pretrained(cfg.pretrained_model_name_or_path, trust_remote_code=True)\n"
    )
    (tmp_path / "tools" / "convert.py").write_text(  # a script's load of another checkpoint is not the training's
        "from transformers import Qwen3VLForConditionalGeneration, AutoProcessor\n"
        "m = Qwen3VLForConditionalGeneration.from_pretrained(args.checkpoint)\n"
        "p = AutoProcessor.from_pretrained(cfg.pretrained_model_name_or_path)\n"
    )
    assert hints.model_calls(tmp_path, KEY) == [
        {"class": "AutoModelForCausalLM", "trust_remote_code": True, "where": "model/build.py:4"}
    ]


def test_a_multimodal_stand_in_without_a_processor_is_the_stand_ins_not_a_bare_tokenizer(tmp_path: Path) -> None:
    import json

    from model_compile.runtime.rehearsal.models import intercept
    from model_compile.runtime.rehearsal.models.state import ModelConfigMissing

    class AutoProcessor:  # the recipe's call, by name only
        pass

    (tmp_path / "config.json").write_text(json.dumps({"model_type": "x_vl", "vision_config": {"depth": 2}}))
    with pytest.raises(ModelConfigMissing, match=r"has no processor: .* --model-config /c/m=PATH") as refused:
        intercept._has_processor(AutoProcessor, "/c/m", str(tmp_path))
    assert refused.value.fault == "stand-in"
    (tmp_path / "preprocessor_config.json").write_text("{}")
    intercept._has_processor(AutoProcessor, "/c/m", str(tmp_path))  # the real settings are there: the recipe's call
    (tmp_path / "preprocessor_config.json").unlink()
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "x"}))
    intercept._has_processor(AutoProcessor, "/c/m", str(tmp_path))  # a text model: a tokenizer is what it has

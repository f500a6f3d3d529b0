"""generate reads the model, world size and commands of the stages it acts on: each stage's checkpoint through
the recipe's own load call, one class only where they agree (said where they do not), never a class the load
call cannot build; the launch and smoke commands carry the stage's world size and the overrides its tests need."""

from __future__ import annotations

from gen_helpers import RECIPE_REL, make_repo, run_generate

AUTO_BUILDER = (
    "from transformers import {auto}\n\n\n"
    "def build_toy_model(config):\n"
    "    return {auto}.from_pretrained(config.path{extra})\n"
)
MESH16 = "parallel:\n  mesh:\n    replicate: -1\n    shard: 16\n    tensor: 1\n"


def _repo(tmp_path, auto: str, train: str, stage2: str, extra: str = ""):
    root = make_repo(tmp_path, use_git=False)
    (root / RECIPE_REL / "model/builder.py").write_text(AUTO_BUILDER.format(auto=auto, extra=extra))
    for name, checkpoint in (("train", train), ("stage2", stage2)):
        stage = root / RECIPE_REL / f"configs/{name}.yaml"
        stage.write_text(stage.read_text().replace("toy/qwen2-vl", checkpoint))
    return root


def test_two_stages_with_different_models_are_said_and_no_tree_is_picked(tmp_path):
    root = _repo(tmp_path, "AutoModel", "Qwen/Qwen3-8B", "Qwen/Qwen2-VL-2B-Instruct")
    code, _, err = run_generate(str(root / RECIPE_REL), "--path", "regional", "--reason", "per block sharding here")
    assert code == 2
    assert "the stages acted on disagree on the model: stage2 builds Qwen2VLModel; train builds Qwen3Model" in err
    assert "cannot infer a --target" in err
    # acting on one stage reads that stage's model, and says so
    code, out, err = run_generate(
        str(root / RECIPE_REL), "--path", "regional", "--reason", "per block sharding here", "--config-name", "stage2"
    )
    assert code == 0, err
    assert "model read from stage2: Qwen2VLModel: checkpoint `Qwen/Qwen2-VL-2B-Instruct`" in err
    assert "built by AutoModel (model/builder.py:5;" in err
    readme = out.split("+++ b/recipes/toy_vlm/README.md")[1].split("+++ ")[0]
    assert "Qwen3" not in readme and "the model of stage2" in readme


def test_a_class_the_load_call_cannot_build_is_not_used(tmp_path):
    # AutoModelForCausalLM has no vision-language conditional-generation class: stage2's Qwen2-VL is not buildable
    root = _repo(tmp_path, "AutoModelForCausalLM", "Qwen/Qwen3-8B", "Qwen/Qwen2-VL-2B-Instruct")
    code, _, err = run_generate(
        str(root / RECIPE_REL), "--path", "regional", "--reason", "per block sharding here", "--config-name", "stage2"
    )
    assert code == 2
    assert (
        "stage2: model not known statically: AutoModelForCausalLM (model/builder.py:5) cannot build a `qwen2_vl` model"
        in err
    )
    assert "Qwen2VLForConditionalGeneration" not in err
    # the stage whose checkpoint it can build is read
    code, _, err = run_generate(
        str(root / RECIPE_REL), "--path", "regional", "--reason", "per block sharding here", "--config-name", "train"
    )
    assert code == 0, err
    assert "model read from train: Qwen3ForCausalLM" in err


def test_an_unknown_stage_is_refused(tmp_path):
    root = make_repo(tmp_path, use_git=False)
    code, _, err = run_generate(str(root / RECIPE_REL), "--path", "kit", "--config-name", "stage9")
    assert code == 2 and "--config-name stage9: no such stage" in err and "stages: stage2, train" in err


def test_the_launch_and_smoke_commands_carry_the_stage_world_size_and_the_overrides_its_tests_need(tmp_path):
    root = make_repo(tmp_path, use_git=False)
    recipe = root / RECIPE_REL
    stage2 = recipe / "configs/stage2.yaml"
    stage2.write_text(stage2.read_text() + MESH16)
    (recipe / "README.md").write_text(
        "# toy\n\n```bash\ntorchrun --nproc_per_node=1 -m toykit.launch --config recipes/toy_vlm/configs/train.yaml\n```\n"
    )
    (recipe / "tests").mkdir()
    (recipe / "tests/conftest.py").write_text(
        "def pytest_addoption(parser):\n"
        '    parser.addoption("--run-smoke", action="store_true", default=False)\n'
        '    parser.addoption("--world-size", type=int, default=1)\n'
        '    parser.addoption("--config-name", default="train")\n'
        '    parser.addoption("--config-override", action="append", default=[])\n'
    )
    # the recipe's own smoke test overrides compile with a bool, which the schema's section rejects (MC211)
    (recipe / "tests/test_smoke.py").write_text(
        "def test_smoke(config_name, config_overrides):\n"
        "    override = {'data': {'workers': 0}, 'model': {'compile': False}}\n"
        "    assert override\n"
    )
    code, out, err = run_generate(
        str(recipe), "--path", "regional", "--reason", "per block sharding here", "--config-name", "stage2", "--write"
    )
    assert code == 1, err  # written; its review has MC211's error
    readme = out.split("+++ b/recipes/toy_vlm/README.md")[1].split("+++ ")[0]
    assert "+torchrun --nproc_per_node=16 -m toykit.launch" in readme  # the README's own said 1
    assert (
        "run with compile on: torchrun --nproc_per_node=16 -m toykit.launch --config recipes/toy_vlm/configs/stage2.yaml"
        in err
    )
    smoke = (
        "--config-name stage2 --world-size 16 --config-override model.compile.enabled=true "
        "--config-override model.compile.backend=inductor --config-override model.compile.mode=default"
    )
    assert smoke in err.replace("\\\n  ", "")
    assert "tests/test_smoke.py:2 overrides `model.compile` with `False`, which the schema rejects (MC211)" in err
    assert "error MC211 tests/test_smoke.py:2" in err
    # --enable prints the same smoke command (the test turns compile off whatever the stage says)
    code, _, err = run_generate(str(recipe), "--enable", "stage2", "--reason", "measured on the long stage")
    assert code == 0, err
    assert smoke in err


def test_an_error_in_the_recipes_own_tests_is_not_a_wiring_to_repair(tmp_path):
    root = make_repo(tmp_path, use_git=False)
    recipe = root / RECIPE_REL
    assert run_generate(str(recipe), "--path", "kit", "--write")[0] == 0
    (recipe / "tests").mkdir(exist_ok=True)
    (recipe / "tests/test_smoke.py").write_text("OVERRIDE = {'model': {'compile': False}}\n")
    code, out, err = run_generate(str(recipe), "--path", "kit")
    assert code == 0 and out == ""
    assert "already wired: compiles through kit" in err and "the recipe's own tests have MC211" in err
    assert "repairing" not in err

"""Reading a recipe's conftest.py options statically, and the options each layer gets from them."""

from __future__ import annotations

from pathlib import Path

from model_compile.hard.layers.plan import plan
from model_compile.parse import recipe_test_options as conventions

OPT_IN_CONFTEST = """
import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--run-smoke", action="store_true", default=False, help="Run the GPU smoke test.")
    parser.addoption("--world-size", type=int, default=8, help="ranks")
    parser.addoption("--config-override", action="append", default=[], help="dotlist")
"""


def make_recipe(root: Path, conftest: str | None, smoke: str = 'CONFIG_NAME = "train"\n') -> Path:
    recipe = root / "recipes" / "r"
    (recipe / "tests").mkdir(parents=True)
    if conftest is not None:
        (recipe / "tests" / "conftest.py").write_text(conftest)
    (recipe / "tests" / "test_smoke.py").write_text(smoke)
    return recipe


def test_reads_options_without_importing(tmp_path):
    recipe = make_recipe(tmp_path, OPT_IN_CONFTEST + "\nraise SystemExit('imported!')\n")
    conv = conventions.read(recipe, tmp_path)
    assert sorted(conv.options) == ["--config-override", "--run-smoke", "--world-size"]
    assert conv.options["--world-size"].default == 8 and conv.known
    assert conv.opt_in_flags("smoke") == ["--run-smoke"] and conv.opt_in_flags("impact") == []
    assert conv.smoke_config_name == "train"
    assert conv.files == ["recipes/r/tests/conftest.py"]


def test_cpu_plan_passes_the_opt_in_switch_and_one_rank(tmp_path):
    recipe = make_recipe(tmp_path, OPT_IN_CONFTEST)
    conv = conventions.read(recipe, tmp_path)
    structure, smoke, impact = plan(recipe, None, None, ["a.b=1"], "kit", conv, device_count=0)
    assert structure.options == []
    assert smoke.options == [
        "--run-smoke",
        "--world-size",
        "1",
        "--config-override",
        "model.compile.enabled=true",
        "--config-override",
        "a.b=1",
    ]
    # the command for an accelerator machine keeps the conftest's default world size
    assert smoke.accelerator_options[:3] == ["--run-smoke", "--world-size", "8"] and smoke.opt_in
    on_gpus = plan(recipe, None, None, [], "kit", conv, device_count=4)[1]
    assert on_gpus.options[:3] == ["--run-smoke", "--world-size", "4"]
    assert plan(recipe, None, 2, [], "kit", conv)[1].options[:3] == ["--run-smoke", "--world-size", "2"]
    assert impact.name == "impact"


def test_unregistered_config_name_is_not_passed_and_the_note_says_how(tmp_path):
    recipe = make_recipe(tmp_path, OPT_IN_CONFTEST)
    conv = conventions.read(recipe, tmp_path)
    structure, smoke, _ = plan(recipe, "stage2", None, [], "kit", conv)
    assert "--config-name" not in structure.options + smoke.options
    (note,) = smoke.notes
    assert note.startswith("--config-name stage2 not passed: the recipe's conftest.py does not register it")
    assert "tests/test_smoke.py loads configs/train.yaml (CONFIG_NAME)" in note
    assert "CONFIG_NAME = 'stage2'" in note and "--config-override K=V" in note
    (same,) = plan(recipe, "train", None, [], "kit", conv)[1].notes
    assert same.endswith("tests/test_smoke.py already loads configs/train.yaml (CONFIG_NAME)")


def test_options_from_a_parent_conftest_and_registered_config_name(tmp_path):
    (tmp_path / "conftest.py").write_text(
        "def pytest_addoption(parser):\n"
        "    parser.addoption('--config-name', default='train')\n"
        "    parser.addoption('--config-override', action='append', default=[])\n"
    )
    recipe = make_recipe(tmp_path, None)
    conv = conventions.read(recipe, tmp_path)
    structure, smoke, _ = plan(recipe, "stage2", 3, [], "kit", conv)
    assert structure.options == ["--config-name", "stage2"]
    assert "--world-size" not in smoke.options
    assert smoke.notes == ["--world-size 3 not passed: no conftest.py of the recipe registers --world-size"]


def test_no_config_override_blocks_the_smoke(tmp_path):
    recipe = make_recipe(tmp_path, "def pytest_addoption(parser):\n    parser.addoption('--world-size', default=1)\n")
    smoke = plan(recipe, None, None, [], "kit", conventions.read(recipe, tmp_path))[1]
    assert smoke.blocked and "no --config-override option is registered" in smoke.blocked
    # never "set it in the stage file to test" (the skill forbids it): the option to add, or the rehearsal
    assert "model.compile.enabled: true" not in smoke.blocked and "never set the switch in" in smoke.blocked
    assert "model-compile rehearse" in smoke.blocked


def test_computed_option_names_fall_back_to_passing_what_was_asked(tmp_path):
    recipe = make_recipe(
        tmp_path,
        "NAMES = ['--world-size']\ndef pytest_addoption(parser):\n    for n in NAMES:\n        parser.addoption(n)\n",
    )
    conv = conventions.read(recipe, tmp_path)
    assert not conv.known and conv.dynamic
    structure, smoke, _ = plan(recipe, "s", 2, [], "kit", conv)
    assert structure.options == ["--config-name", "s"]
    assert smoke.options[:4] == ["--config-name", "s", "--world-size", "2"]

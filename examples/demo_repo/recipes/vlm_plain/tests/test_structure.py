"""Structure of the recipe: files, every config through the schema, the engine class. No training."""

from pathlib import Path

import pytest

from demo_engine.engine import Engine
from demo_engine.testing.utils import config_files, load_config, load_recipe_skill_asserts, resolve_engine_class

RECIPE_ROOT = Path(__file__).resolve().parents[1]
SKILLS = load_recipe_skill_asserts(RECIPE_ROOT)


def test_files():
    for rel in ("README.md", "configs/schema.py", "engine"):
        assert (RECIPE_ROOT / rel).exists(), rel
    for module in SKILLS:
        if hasattr(module, "test_file_structure"):
            module.test_file_structure(RECIPE_ROOT)


@pytest.mark.parametrize("config_path", config_files(RECIPE_ROOT), ids=lambda p: p.stem)
def test_configs(config_path):
    config = load_config(RECIPE_ROOT, config_path.stem)
    for module in SKILLS:
        if hasattr(module, "test_config_structure"):
            module.test_config_structure(config)


def test_engine(request):
    config = load_config(RECIPE_ROOT, request.config.getoption("--config-name"))
    engine_class = resolve_engine_class(RECIPE_ROOT, config)
    assert issubclass(engine_class, Engine)
    assert "prepare_model" in vars(engine_class)
    for module in SKILLS:
        if hasattr(module, "test_engine_structure"):
            module.test_engine_structure(engine_class)

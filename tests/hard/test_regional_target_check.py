"""The example's regional target check fails when one block is left eager.

Builds the bundled vlm_regional model (tiny random Qwen2-VL, 28 text layers),
compiles every block in place but one (`.compile()` is lazy: nothing is traced,
so this is fast), and runs the example's committed skill assert on it.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from model_compile.runtime import dynamo_adapter  # noqa: E402

pytestmark = pytest.mark.hard

DEMO = Path(__file__).resolve().parents[2] / "examples" / "demo_repo"
RECIPE = DEMO / "recipes" / "vlm_regional"


def _load_asserts():
    path = RECIPE / "tests" / "skills" / "model-compile" / "asserts.py"
    spec = importlib.util.spec_from_file_location("vlm_regional_skill_asserts", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build_engine(skip_layer: int | None = None) -> SimpleNamespace:
    """The vlm_regional model with 28 text layers, compile on; every block compiled in place
    as the recipe does, except text layer `skip_layer` (left eager)."""
    sys.path.insert(0, str(DEMO))
    try:
        from demo_engine.kit.mllm.model import MLLMModelKit
        from demo_engine.testing.utils import load_config

        config = load_config(RECIPE, "train", ["model.compile.enabled=true", "model.text.num_layers=28"])
        model = MLLMModelKit().build_model(config.model)
    finally:
        sys.path.remove(str(DEMO))
    for index, layer in enumerate(model.model.language_model.layers):
        if index != skip_layer:
            layer.compile(backend="eager")
    for block in model.model.visual.blocks:
        block.compile(backend="eager")
    return SimpleNamespace(config=config, model=model)


def test_every_block_compiled_passes():
    engine = build_engine()
    asserts = _load_asserts()
    asserts.assert_before_train_start(engine)
    asserts.assert_before_train_end(engine)  # raises on a failure
    checks = dynamo_adapter.get_probe().model_facts["target_checks"]  # the probe recorded it (the tool is here)
    assert [c["text"] for c in checks] == [
        "'model.language_model.layers.*': 28 of 28 blocks compiled",
        "'model.visual.blocks.*': 2 of 2 blocks compiled",
    ]


def test_one_block_left_eager_fails():
    engine = build_engine(skip_layer=27)
    asserts = _load_asserts()
    asserts.assert_before_train_start(engine)
    with pytest.raises(AssertionError) as failure:
        asserts.assert_before_train_end(engine)
    message = str(failure.value)
    assert "not compiled ('model.language_model.layers.*'): ['model.language_model.layers.27']" in message
    facts = dynamo_adapter.get_probe().model_facts  # what the probe recorded beside it
    assert facts["missing_targets"] == ["model.language_model.layers.*"]
    assert "27 of 28 blocks compiled (not compiled: model.language_model.layers.27)" in facts["target_failures"][0]
    assert facts["compiled_module_count"] == 29  # 27 text layers + 2 vision blocks, listed by name

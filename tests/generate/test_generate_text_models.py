"""generate on text-only models: the kit class the model needs (as sibling recipes choose), the decoder-block
container named from the checkpoint, and no sentence about parts the model does not have."""

from __future__ import annotations

from gen_helpers import RECIPE_REL, make_repo, run_generate

LLM_KIT = (
    "class LLMModelKit:\n"
    "    def apply_model_compile(self, model, backend='inductor', mode='default'):\n"
    "        model.compile(backend=backend, mode=mode)\n"
    "        return model\n"
)
TEXT_BUILDER = (
    "from transformers import AutoModelForCausalLM\n\n\n"
    "def build_toy_model(config):\n"
    "    return AutoModelForCausalLM.from_pretrained(config.path)\n"
)


def _text_repo(tmp_path, sibling: bool = True):
    root = make_repo(tmp_path, "none_return", use_git=False)  # an engine with no kit instance yet
    (root / "toykit/kit/llm.py").write_text(LLM_KIT)
    (root / "toykit/kit/__init__.py").write_text(
        "from .llm import LLMModelKit\nfrom .model import MLLMModelKit\n\n__all__ = ['LLMModelKit', 'MLLMModelKit']\n"
    )
    (root / RECIPE_REL / "model/builder.py").write_text(TEXT_BUILDER)
    train = root / RECIPE_REL / "configs/train.yaml"
    train.write_text(
        train.read_text()
        .replace('"toy/qwen2-vl"', '"toy/qwen3"')
        .replace("  freeze_vit: true\n", '  pretrained_model_name_or_path: "Qwen/Qwen3-0.6B"\n')
    )
    stage2 = root / RECIPE_REL / "configs/stage2.yaml"
    stage2.write_text(stage2.read_text().replace("qwen2-vl", "qwen3").replace("  freeze_vit: true\n", ""))
    if sibling:
        lm = root / "recipes/lm_sibling"
        (lm / "engine").mkdir(parents=True)
        (lm / "configs").mkdir()
        (lm / "engine/lm_sibling_engine.py").write_text(
            (root / "recipes/other/engine/other_engine.py")
            .read_text()
            .replace("MLLMModelKit", "LLMModelKit")
            .replace("OtherEngine", "LmSiblingEngine")
        )
        (lm / "configs/train.yaml").write_text("model:\n  pretrained_model_name_or_path: Qwen/Qwen3-8B-Base\n")
    return root


def test_a_text_model_is_wired_through_the_kit_its_text_siblings_call(tmp_path):
    root = _text_repo(tmp_path)
    code, out, err = run_generate(str(root / RECIPE_REL), "--path", "kit")
    assert code == 0, err
    assert "kit class: LLMModelKit: as lm_sibling (text model) calls it" in err
    assert "self.model_kit = LLMModelKit()" in out and "MLLMModelKit()" not in out
    assert "visual" not in out.split("README.md")[-1].split("asserts.py")[0]  # the README speaks of no vision tower


def test_regional_targets_the_decoder_layers_of_a_causal_lm_checkpoint(tmp_path):
    root = _text_repo(tmp_path, sibling=False)
    code, out, err = run_generate(
        str(root / RECIPE_REL), "--path", "regional", "--reason", "compile each decoder layer"
    )
    assert code == 0, err
    assert "target: model.model.layers (inferred:" in err
    readme = out.split("README.md")[-1].split("+++ ")[0]
    assert "Compiled scope: N blocks of `model.model.layers`" in readme
    assert "visual" not in readme and "vision" not in readme


FORWARDING_BUILDER = (
    "from dataclasses import dataclass\n\n\n"
    "@dataclass\n"
    "class TinyConfig:\n"
    "    path: str = ''\n"
    "    freeze_vit: bool = True\n\n\n"
    "def build_toy_model(config):\n"
    "    return TinyModel(TinyConfig({spread}))\n"
)


def test_a_builder_spreading_the_model_config_is_kept_working_with_compile_off(tmp_path):
    root = make_repo(tmp_path, use_git=False)
    (root / RECIPE_REL / "model/builder.py").write_text(FORWARDING_BUILDER.format(spread="**config.model_dump()"))
    code, out, err = run_generate(str(root / RECIPE_REL), "--path", "kit", "--write")
    assert code == 0, err
    assert "would hand the new `compile` section to TinyConfig (its fields have no `compile`): excluded" in err
    text = (root / RECIPE_REL / "model/builder.py").read_text()
    assert 'TinyConfig(**config.model_dump(exclude={"compile"}))' in text
    assert "MC209" not in err  # the soft review of the result has nothing to say about it


def test_a_spread_generate_cannot_rewrite_is_refused_with_nothing_written(tmp_path):
    from gen_helpers import snapshot

    root = make_repo(tmp_path, use_git=False)
    (root / RECIPE_REL / "model/builder.py").write_text(FORWARDING_BUILDER.format(spread="**dict(config)"))
    before = snapshot(root)
    code, out, err = run_generate(str(root / RECIPE_REL), "--path", "kit", "--write")
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert "spreads the whole model config into TinyConfig, which has no `compile` field" in err
    assert snapshot(root) == before

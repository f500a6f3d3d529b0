"""Whose failure it is, for real: fixture recipes rehearsed end to end on CPU.

- `lm_nested`: each decoder layer's attention and MLP in its own `checkpoint_wrapper` (dropout inside: the
  checkpoint saves and restores the rng state), the whole model compiled: the coverage map is measured (the
  rng-state higher-order operators pass the counting mode inside compiled graphs) and the run passes.
- `vendored_lm`: a causal LM whose code is remote code vendored in the recipe's `third_party/`, its checkpoint on
  the team's cluster: rehearsed from its vendored config class; a stage naming a Qwen3-VL checkpoint that
  `AutoModelForCausalLM` cannot build says so and takes the call's.
- `lm_named`: a stage naming Mistral, an architecture outside every fixture, is built as Mistral; `lm_unknown`,
  whose name and recipe name nothing, is `not-run`, the stand-in's config missing, naming `--model-config`.

Each rehearsal takes about 20-40 s on two cores; the two end-to-end architecture cases are marked slow (the
resolution itself is tested in-process in test_architecture.py).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("omegaconf")

from model_compile.hard.models import RehearsalFacts  # noqa: E402
from model_compile.hard.rehearsal.command import Options, standalone  # noqa: E402

pytestmark = pytest.mark.hard

FIXTURES = Path(__file__).parent / "fixtures" / "rehearsal_repo"
RECIPES = FIXTURES / "recipes"


def _rehearse(tmp_path_factory: pytest.TempPathFactory, recipe: str, **options: object) -> RehearsalFacts:
    out = tmp_path_factory.mktemp(recipe)
    facts, _, _ = standalone(RECIPES / recipe, sys.executable, Options(**options), out)  # type: ignore[arg-type]
    return facts


def test_nested_checkpoint_wrappers_under_a_whole_model_compile_are_measured_and_pass(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    shallow = FIXTURES / "shallow_qwen3_config.json"
    facts = _rehearse(tmp_path_factory, "lm_nested", steps=3, model_config=shallow)
    assert facts.status == "passed", facts.reason
    assert facts.compiled_share is not None and facts.coverage  # the map was measured, not left out
    assert not any("control" in n for n in facts.notes)  # no control run was needed: the instrument held
    record = json.loads((Path(str(facts.record)) / "record-compiled-rank0.json").read_text())
    hops = {h["operator"]: h for h in record["phases"]["coverage"]["higher_order"]}
    assert hops["run_and_save_rng_state"]["compiled"] > 0  # torch's rng-state operator went through the mode


@pytest.mark.slow  # resolve() itself is checked in-process by test_architecture.py
def test_a_vendored_remote_code_model_not_on_the_machine_is_rehearsed_from_its_vendored_config(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    facts = _rehearse(tmp_path_factory, "vendored_lm", config_name="train", steps=2, backend="eager")
    assert facts.status == "passed", facts.reason
    assert facts.model_class == "TinyVendForCausalLM" and facts.depth_known is False
    assert facts.depth == {"model.layers": "10 TinyVendBlock"}
    assert facts.model_source and "built the vendored TinyVendConfig" in facts.model_source
    assert "names its vendored TinyVendConfig (model_type 'tinyvend')" in facts.model_source  # its own code says so
    named = _rehearse(tmp_path_factory, "vendored_lm", config_name="named", steps=2, backend="eager")
    assert named.status == "passed", named.reason
    assert named.model_class == "TinyVendForCausalLM"
    assert any(
        "names qwen3_vl (Qwen3VLConfig), which the recipe's call AutoModelForCausalLM.from_pretrained cannot build: "
        "the call's (trust_remote_code=True) is taken" in n
        for n in named.notes
    )


@pytest.mark.slow  # resolve() itself is checked in-process by test_architecture.py
def test_a_stage_naming_an_architecture_outside_every_fixture_is_built_as_that_architecture(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    facts = _rehearse(tmp_path_factory, "lm_named", steps=2, backend="eager")
    assert facts.status == "passed", facts.reason
    assert facts.model_class == "MistralForCausalLM" and facts.depth == {"model.layers": "10 MistralDecoderLayer"}
    assert facts.model_source and "MistralConfig (mistral), which its name 'mistralai/Mistral-7B-v0.1' names" in (
        facts.model_source
    )
    nothing = _rehearse(tmp_path_factory, "lm_unknown", config_name="train", steps=2, backend="eager")
    assert (nothing.status, nothing.fault) == ("not-run", "stand-in")
    (att,) = nothing.attribution
    assert att.owner == "stand-in" and att.part == "config" and att.supply == "--model-config acme/mystery-7b=PATH"

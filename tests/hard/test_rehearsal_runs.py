"""The rehearsal, for real: the fixture recipes' own training loops on tiny models at depth, in child processes.

Slow (each rehearsal starts a prepare child and two or three twins, each importing torch): marked `hard`, and
each recipe is rehearsed once per module; the cases read the same run.
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
PY = sys.executable


def _rehearse(tmp_path_factory: pytest.TempPathFactory, recipe: str, **options: object) -> RehearsalFacts:
    out = tmp_path_factory.mktemp(recipe)
    facts, _, _ = standalone(RECIPES / recipe, PY, Options(**options), out)  # type: ignore[arg-type]
    return facts


@pytest.fixture(scope="module")
def blocks(tmp_path_factory: pytest.TempPathFactory) -> RehearsalFacts:
    """Per-block compile, bf16, gradient accumulation, the stage's mesh replicating: 2 ranks over DDP."""
    return _rehearse(tmp_path_factory, "lm_blocks", steps=6)


@pytest.fixture(scope="module")
def static(tmp_path_factory: pytest.TempPathFactory) -> RehearsalFacts:
    """Per-block compile with the KV cache left on: every decoder layer adds a variant of the block's frame."""
    return _rehearse(tmp_path_factory, "lm_static", steps=3)


def test_per_block_compile_passes_on_two_ranks_against_the_measured_noise_floor(blocks: RehearsalFacts) -> None:
    assert blocks.status == "passed", blocks.reason
    assert blocks.world_size == 2 and blocks.wrap and blocks.wrap.startswith("DistributedDataParallel over 2 rank(s)")
    assert blocks.twins == ["reference", "eager", "compiled"] and blocks.precision == "bf16 (optim.mixed_precision)"
    assert blocks.parity_rule and "float32 reference" in blocks.parity_rule
    assert all(s.grad_err_eager is not None and s.grad_err is not None for s in blocks.steps)
    # measured on the built model: above the recompile limit, the unknown-depth policy's depth
    assert blocks.depth == {"model.layers": "10 Qwen3DecoderLayer"} and blocks.depth_known is False
    assert blocks.target_checks == ["'model.layers.*': 10 of 10 blocks compiled"]
    assert blocks.keys["state_dict"].endswith("unchanged") and blocks.keys["dcp"].endswith("unchanged")
    assert len(blocks.steps) == 6 and all(s.micro_steps == 2 for s in blocks.steps)  # the stage's accumulation
    assert blocks.sync and blocks.sync.startswith("no gradient sync on the") and "every rank" in blocks.sync
    # the last optimizer step is the coverage map's: left out of the steady figure
    assert blocks.steady_steps == 4 and blocks.recompile_count == 0 and blocks.graph_break_count == 0
    assert blocks.steps[-1].measured and not any(s.measured for s in blocks.steps[:-1])
    assert blocks.batches and blocks.batches.startswith("the recipe's data path, as it is")
    assert len(blocks.ranks) == 2


def test_blocks_that_compile_show_as_compiled_in_the_coverage_map(blocks: RehearsalFacts) -> None:
    layers = next(e for e in blocks.coverage if e.module == "model.layers.*")
    assert layers.count == 10 and layers.compiled == 1.0 and layers.role == "target" and layers.work > 0.5
    assert blocks.coverage_failures == [] and blocks.compiled_share is not None
    # what is not a target (the embedding, the head) is said to be outside the targets, with that cause
    outside = [e for e in blocks.coverage if e.role == "outside the targets" and e.compiled < 1.0]
    assert outside and all(c.kind == "not-compiled" for e in outside for c in e.eager_causes)


def test_the_record_starts_with_the_judged_verdict(blocks: RehearsalFacts) -> None:
    record = json.loads((Path(blocks.record or "") / "rehearsal.json").read_text())
    assert next(iter(record)) == "verdict" and record["verdict"]["status"] == blocks.status == "passed"


def test_a_frame_that_recompiles_per_layer_fails_and_names_the_fix(static: RehearsalFacts) -> None:
    assert static.status == "failed" and any(p.startswith("recompile limit hit") for p in static.problems)
    # the layers past the limit run eager: the coverage map says so, and why, first
    assert static.coverage_failures and "the recompile limit was hit in" in static.coverage_failures[0]
    assert (static.reason or "").startswith("compile has no effect on model.layers.*")
    assert static.world_size == 1 and static.precision == "fp32 (optim.mixed_precision)"
    assert "float64 reference" in (static.parity_rule or "")  # an fp32 recipe: the reference runs in float64
    assert any("forward_with_checkpointing" in h for h in static.limit_hits)
    cache = next(f for f in static.fixes if "use_cache=False" in f.fix)
    assert "engine/lm_static_engine.py:" in cache.fix
    # tried by a rerun with the model called with use_cache=False: proven (the per-layer variants are gone)
    assert cache.tried == "proven", cache.reason
    assert cache.figures["limit_hits"][1] == 0 and cache.figures["parity"] == "within the bound"


def test_the_torch_compile_wrapper_fails_on_changed_keys(tmp_path_factory: pytest.TempPathFactory) -> None:
    facts = _rehearse(tmp_path_factory, "lm_wrapper", steps=2, model_config=FIXTURES / "shallow_qwen3_config.json")
    assert facts.status == "failed" and "state_dict keys changed" in (facts.reason or "")
    assert "_orig_mod." in (facts.reason or "")


def test_a_vlm_without_its_data_trains_on_synthetic_batches_and_keeps_the_tower_eager(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    facts = _rehearse(tmp_path_factory, "vlm3_kit", steps=2, model_config=FIXTURES / "shallow_qwen3_vl_config.json")
    assert facts.status in ("passed", "failed") and facts.steps, facts.reason
    assert facts.batches_mode == "batches" and "data.train_path" in (facts.batches or "")
    assert "`model.visual` kept eager (torch.compiler.disable)" in facts.target_checks
    assert all("image(s)" in s.shape for s in facts.steps)  # every step feeds the vision tower
    assert facts.depth == {  # as given, measured on the built model
        "model.visual.blocks": "2 Qwen3VLVisionBlock",
        "model.visual.deepstack_merger_list": "1 Qwen3VLVisionPatchMerger",
        "model.language_model.layers": "2 Qwen3VLTextDecoderLayer",
    }
    assert facts.world_size == 2 and facts.wrap and facts.wrap.startswith("FSDP2 (fully_shard) over 2 rank(s)")
    assert facts.keys["dcp"].endswith("unchanged")
    assert facts.depth_known and "--model-config" in (facts.model_source or "")

"""The rehearsal, for real: tiny models of two families through the recipes' own prepare_model().

Slow (each case starts a child that imports torch and compiles): marked `hard`.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("omegaconf")

from model_compile.cli import main  # noqa: E402
from model_compile.hard.layers.runner import validate_hard  # noqa: E402
from model_compile.hard.rehearsal.command import Options, standalone  # noqa: E402

pytestmark = pytest.mark.hard

FIXTURES = Path(__file__).parent / "fixtures" / "rehearsal_repo"
RECIPES = FIXTURES / "recipes"
DEMO = Path(__file__).resolve().parents[2] / "examples" / "demo_repo"
PY = sys.executable


def test_per_block_compile_passes_with_parity_keys_and_every_block(tmp_path: Path) -> None:
    facts, env, command = standalone(RECIPES / "lm_blocks", PY, Options(steps=3), tmp_path)
    assert facts.status == "passed", facts.reason
    assert (
        facts.family == "qwen3" and facts.model_class == "Qwen3ForCausalLM" and facts.label == "cpu-only (tiny model)"
    )
    assert len(facts.steps) == 3 and all(s.loss_rel_err == 0.0 and s.grad_rel_err == 0.0 for s in facts.steps)
    assert facts.target_checks == ["'model.layers.*': 2 of 2 blocks compiled"]
    assert facts.keys["state_dict"].endswith("unchanged") and facts.keys["parameters"].endswith("unchanged")
    assert facts.first_step_s is not None and facts.wall_s > 0
    assert "--config-name train" in command and "--steps 3" in command


def test_a_frame_that_recompiles_per_length_fails_naming_the_frame_and_the_shape(tmp_path: Path) -> None:
    facts, _, _ = standalone(RECIPES / "lm_static", PY, Options(), tmp_path)
    assert facts.status == "failed"
    assert "recompile limit hit at step" in (facts.reason or "")
    record = json.loads(Path(facts.record or "").read_text())  # the verdict is in the record, first
    assert next(iter(record)) == "verdict" and record["verdict"]["status"] == "failed"
    assert record["verdict"]["reason"] == facts.reason
    hit = facts.limit_hits[0]
    assert "rows padded to" in hit and "forward_with_checkpointing" in hit  # the shape and the frame
    assert len(facts.recompiles) >= 8


def test_the_torch_compile_wrapper_fails_on_changed_keys(tmp_path: Path) -> None:
    facts, _, _ = standalone(RECIPES / "lm_wrapper", PY, Options(steps=2), tmp_path)
    assert facts.status == "failed"
    assert "state_dict keys changed" in (facts.reason or "") and "_orig_mod." in (facts.reason or "")


def test_unknown_architecture_is_not_run_then_runs_with_model_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        ["rehearse", str(RECIPES / "lm_unknown"), "--python", PY, "--out", str(tmp_path / "a"), "--format", "json"]
    )
    data = json.loads(capsys.readouterr().out)
    assert code == 0 and data["status"] == "not-run" and "--model-config" in data["reason"]
    assert data["wall_s"] == 0.0  # nothing was started
    code = main(
        [
            "rehearse",
            str(RECIPES / "lm_unknown"),
            "--python",
            PY,
            "--out",
            str(tmp_path / "b"),
            "--steps",
            "2",
            "--model-config",
            str(FIXTURES / "mystery_config.json"),
            "--require-complete",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0 and out.startswith("rehearsal: passed") and "--model-config" in out


def test_a_child_that_hangs_times_out_and_leaves_no_process(tmp_path: Path) -> None:
    facts, _, _ = standalone(RECIPES / "lm_hang", PY, Options(timeout_s=20), tmp_path)
    assert facts.status == "timeout" and "no result after 20 s" in (facts.reason or "")
    left = subprocess.run(["pgrep", "-f", str(tmp_path / "spec.json")], capture_output=True, text=True)
    assert left.stdout.strip() == ""


def test_a_vlm_recipe_that_builds_from_its_fields_keeps_the_vision_tower_eager(tmp_path: Path) -> None:
    facts, _, _ = standalone(DEMO / "recipes" / "vlm_kit", PY, Options(steps=2), tmp_path)
    assert facts.family is None and facts.model_class == "Qwen2VLForConditionalGeneration"
    assert "`model.visual` kept eager (torch.compiler.disable)" in facts.target_checks
    assert (
        facts.path == "the recipe's compute_loss" and facts.steps and facts.steps[0].shape.startswith("2 rows padded")
    )
    assert all(s.loss_rel_err == 0.0 for s in facts.steps)


def test_the_layer_sits_after_structure_in_validate_hard(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MODEL_COMPILE_REHEARSAL", raising=False)
    report = validate_hard(RECIPES / "lm_blocks", out=tmp_path, python=PY, steps=2)
    names = [(layer.name, layer.status) for layer in report.layers]
    assert names[:3] == [("soft", names[0][1]), ("structure", "passed"), ("rehearsal", "passed")]
    assert report.rehearsal is not None and report.rehearsal.status == "passed"
    row = next(layer for layer in report.layers if layer.name == "rehearsal")
    # in the table: the backend, and that aot_eager stood in for the stage's inductor
    assert row.where.startswith("cpu-only (tiny model), backend aot_eager (not the stage's inductor), ")
    assert any("parity over 2 steps" in g for g in report.gaps)
    monkeypatch.setenv("MODEL_COMPILE_REHEARSAL", "off")
    skipped = validate_hard(RECIPES / "lm_blocks", out=tmp_path / "off", python=PY)
    row = next(layer for layer in skipped.layers if layer.name == "rehearsal")
    assert row.status == "not-run" and row.where == "-" and row.next_step and "model-compile rehearse" in row.next_step

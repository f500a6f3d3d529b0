"""The smoke layer's plan: a helper's refusal read statically, stage commands from the mesh, prerequisites."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from model_compile.hard import stages as stageplan
from model_compile.hard.layers.plan import plan
from model_compile.hard.layers.refusal import smoke_refusal
from model_compile.hard.layers.runner import validate_hard
from model_compile.parse import recipe_test_options
from model_compile.report.hardfacts import planned_layers
from model_compile.report.run import review_path

REPO = Path(__file__).parent / "fixtures" / "repo"
RECIPE = REPO / "recipes" / "gpu_helper"
DEMO = Path(__file__).resolve().parents[2] / "examples" / "demo_repo"


def test_refusal_is_read_from_the_helper_the_smoke_calls() -> None:
    refused = smoke_refusal(RECIPE, REPO, Path("tests/test_smoke.py"))
    assert refused is not None and refused.helper == "distributed_env"
    assert refused.message == "RuntimeError: Distributed tests require GPUs/NPUs."
    assert refused.file == "gpu_testing/helpers.py" and refused.line == 13


def test_no_refusal_when_the_raise_is_not_under_a_device_test(tmp_path: Path) -> None:
    # near misses: the raise sits in the test itself (no device condition), or names no accelerator
    assert smoke_refusal(REPO / "recipes" / "needs_gpu", REPO, Path("tests/test_smoke.py")) is None
    (tmp_path / "recipes" / "r" / "tests").mkdir(parents=True)
    (tmp_path / "recipes" / "r" / "tests" / "test_smoke.py").write_text(
        "def helper(d):\n    if d == 'cpu':\n        raise ValueError('bad value')\n\n\ndef test_smoke():\n    helper('x')\n"
    )
    assert smoke_refusal(tmp_path / "recipes" / "r", tmp_path, Path("tests/test_smoke.py")) is None


def test_the_bundled_example_smoke_is_not_refused() -> None:
    """The example runs its smoke on CPU on purpose: its helper does not refuse."""
    for recipe in ("vlm_kit", "vlm_regional"):
        assert smoke_refusal(DEMO / "recipes" / recipe, DEMO, Path("tests/test_smoke.py")) is None


@pytest.mark.parametrize(
    ("mesh", "default", "devices", "size"),
    [
        ({"replicate": -1, "shard": 8, "tensor": 1}, 1, 0, 8),  # shard 8 needs 8 ranks
        ({"replicate": -1, "shard": 1, "tensor": 1}, 1, 0, 1),  # -1 fills: the conftest default
        ({"replicate": -1, "shard": 4}, 6, 0, 8),  # rounded up to a multiple of the fixed sizes
        ({"replicate": 2, "shard": 4, "tensor": 1}, 1, 0, 8),  # no fill: the product
        ({}, None, 4, 4),  # no mesh: the devices
        ({}, 2, 4, 2),  # no mesh: the conftest default first
        ({"replicate": 1, "shard": -1, "tensor": 1}, 1, 0, 2),  # a filling shard: 2 ranks, else it is DDP
        ({"replicate": 1, "shard": -1, "tensor": 1}, 8, 0, 8),  # ... or the conftest default, when larger
    ],
)
def test_world_size_follows_the_mesh(mesh: dict[str, int], default: int | None, devices: int, size: int) -> None:
    assert stageplan.world_size_for(mesh, default, devices)[0] == size


def test_one_smoke_command_per_compile_stage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    conv = recipe_test_options.read(RECIPE, REPO)
    smoke = next(s for s in plan(RECIPE, None, None, [], "kit", conv, 0, REPO) if s.name == "smoke")
    assert [r.name for r in smoke.stage_runs] == ["big"]  # compile on in big.yaml; train keeps it off
    assert smoke.accelerator_runs == [
        ["--config-name", "big", "--world-size", "4", "--config-override", "model.compile.enabled=true"]
    ]
    assert smoke.options[:4] == ["--config-name", "big", "--world-size", "1"]  # here: no devices, 1 rank
    prereqs = smoke.stage_runs[0].prerequisites
    assert any(p.startswith("data.train_path = ./data/big/meta.json") for p in prereqs)
    assert not any("eval_path" in p for p in prereqs)  # that file exists
    assert any("FixtureOrg/Tiny-Model" in p and "Hugging Face cache" in p for p in prereqs)
    (tmp_path / "hub" / "models--FixtureOrg--Tiny-Model").mkdir(parents=True)
    assert not any("FixtureOrg" in p for p in stageplan.prerequisites(RECIPE, REPO, "big"))
    touched = next(s for s in plan(RECIPE, None, None, [], "kit", conv, 0, REPO, ["train"]) if s.name == "smoke")
    assert [r.name for r in touched.stage_runs] == ["big", "train"]  # a stage the change touches gets one too


def test_refused_smoke_is_not_started_and_its_commands_name_no_local_path(tmp_path: Path) -> None:
    report = validate_hard(RECIPE, out=tmp_path)
    smoke = next(layer for layer in report.layers if layer.name == "smoke")
    assert smoke.status == "not-run" and not smoke.started and smoke.duration_s == 0 and smoke.where is None
    assert smoke.reason and smoke.reason.startswith("needs an accelerator, so not started: distributed_env()")
    assert "gpu_testing/helpers.py:13" in smoke.reason
    assert smoke.accelerator_commands == [
        "python -m pytest recipes/gpu_helper/tests/test_smoke.py -q --config-name big --world-size 4 "
        "--config-override model.compile.enabled=true"
    ]
    assert smoke.next_step and sys.executable not in smoke.next_step and str(REPO) not in smoke.next_step
    assert smoke.prerequisites and not (tmp_path / "junit-smoke.xml").exists()
    assert report.layers[-1].status == "passed"  # the impact layer still ran
    from model_compile.report.hardfacts import read_hard

    row = next(r for r in read_hard(report, RECIPE, "kit").layers if r.name == "smoke")
    assert row.where == "-" and row.duration_s is None and not row.started
    assert row.commands == smoke.accelerator_commands and row.prerequisites == smoke.prerequisites


def test_a_refusal_behind_a_caller_flag_follows_the_call(tmp_path: Path) -> None:
    """`if not allow_cpu and ...: raise`: refused only when the test passes allow_cpu=False."""
    tests = tmp_path / "recipes" / "r" / "tests"
    tests.mkdir(parents=True)
    (tmp_path / "helpers.py").write_text(
        "def run(allow_cpu=True):\n    if not allow_cpu and device() == 'cpu':\n"
        "        raise RuntimeError('Distributed tests require GPUs/NPUs.')\n"
    )
    for allow, refused in (("", False), ("allow_cpu=False", True), ("allow_cpu=True", False)):
        (tests / "test_smoke.py").write_text(f"from helpers import run\n\n\ndef test_smoke():\n    run({allow})\n")
        assert (smoke_refusal(tmp_path / "recipes" / "r", tmp_path, Path("tests/test_smoke.py")) is not None) is refused


def test_trace_that_records_nothing_says_why_and_the_summary_names_only_what_ran(tmp_path: Path) -> None:
    from model_compile.hard.layers.render import to_text

    report = validate_hard(RECIPE, out=tmp_path, trace=True)
    assert report.trace is not None and report.trace.note
    assert report.trace.note.startswith(
        "--trace recorded nothing: smoke was not started (not-run: needs an accelerator"
    )
    text = to_text(report)
    assert "tracing, graph breaks, recompiles" not in text
    assert "CPU-only runtime checks (structure, impact:test_impact.py; measured: parity on CPU)" in text
    assert "runtime: no runtime JSON: the smoke layer was not started (not-run)" in text


def test_prerequisites_skip_what_the_stage_switches_off(tmp_path: Path) -> None:
    from model_compile.hard.stages import prerequisites

    recipe = tmp_path / "recipes" / "vit"
    (recipe / "configs").mkdir(parents=True)
    (recipe / "configs" / "train.yaml").write_text(
        "data:\n  use_fake_data: true\n  train_path: ./data/imagenet/train\n"
        "model:\n  pretrained_model_name_or_path: ./pretrained/vit\n  load_pretrained_weights: false\n"
        "eval:\n  use_fake_data: false\n  val_path: ./data/imagenet/val\n"
    )
    found = prerequisites(recipe, tmp_path, "train")
    assert [line.split(" = ")[0] for line in found] == ["eval.val_path"]  # near miss: fake data off there


def test_a_soft_review_gives_the_refused_smoke_as_commands_for_a_machine_with_gpus(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without --hard nothing runs, but the helper's refusal is read from its source: the smoke row and the
    advice name that machine's commands (`python` from the repository root), no path of this one."""
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    report = review_path(RECIPE)
    section = report.recipes[0]
    smoke = next(row for row in section.validation if row.name == "smoke")
    assert smoke.status == "not-run" and smoke.where == "-"
    assert smoke.command == "on a machine with GPUs/NPUs, from the repository root:"
    assert smoke.commands == [
        "python -m pytest recipes/gpu_helper/tests/test_smoke.py -q --config-name big --world-size 4 "
        "--config-override model.compile.enabled=true"
    ]
    assert any(p.startswith("data.train_path = ./data/big/meta.json") for p in smoke.prerequisites)
    advice = [a for a in section.performance.advice if "smoke layer" in a]
    assert advice == [
        "measure before claiming anything: run the smoke layer on a machine with GPUs/NPUs, from the repository "
        f"root: `{smoke.commands[0]}`"
    ]
    printed = json.dumps([smoke.model_dump(mode="json"), advice])
    assert str(REPO.resolve()) not in printed and sys.executable not in printed


def test_a_soft_review_of_a_smoke_this_machine_runs_says_the_command_is_for_here() -> None:
    """Near miss: the example's smoke helper does not refuse CPU, so its command is this machine's (cd, path)."""
    section = review_path(DEMO / "recipes" / "vlm_kit").recipes[0]
    smoke = next(row for row in section.validation if row.name == "smoke")
    assert smoke.command is not None and smoke.command.startswith(f"cd {DEMO}")
    advice = next(a for a in section.performance.advice if "smoke layer" in a)
    assert advice.startswith("measure before claiming anything: run the smoke layer (here: `cd ")
    assert advice.endswith("only a run on an accelerator is runtime compile validation")


def test_the_soft_plan_gives_a_stage_the_change_touches_its_own_smoke_command() -> None:
    rows = planned_layers(RECIPE, "kit", stages=["train"])
    smoke = next(row for row in rows if row.name == "smoke")
    assert [c.split("--config-name ")[1].split()[0] for c in smoke.commands] == ["big", "train"]

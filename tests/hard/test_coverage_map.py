"""The coverage map from the twins' records: collapsed blocks, compiled shares, causes and the verdict."""

from __future__ import annotations

from pathlib import Path

import pytest

from model_compile.hard.models import GraphBreakSite, RehearsalFacts, RehearsalStep
from model_compile.hard.rehearsal.reading import coverage
from model_compile.hard.rehearsal.reading.sites import TraceScan

REPO = Path("/repo")
MODELING = "/venv/lib/python3.12/site-packages/transformers/models/x/modeling_x.py"
LAYERS = ["model.layers.0", "model.layers.1", "model.layers.2", "model.layers.3"]


def _tree() -> list[list]:
    tree = [["", "XForCausalLM", False], ["model", "XModel", False], ["model.embed", "Embedding", False]]
    tree.append(["model.layers", "ModuleList", True])
    for layer in LAYERS:
        tree += [
            [layer, "XDecoderLayer", False],
            [layer + ".attn", "XAttention", False],
            [layer + ".mlp", "XMLP", False],
        ]
    tree += [["model.visual", "XVision", False], ["model.visual.proj", "Linear", False], ["lm_head", "Linear", False]]
    return tree


def _totals() -> dict[str, list[float]]:
    forward = {"model.embed": [0, 2], "model.visual.proj": [100, 3], "lm_head": [200, 4], "(outside the model)": [0, 9]}
    for layer in LAYERS:
        forward[layer + ".attn"] = [60, 10]
        forward[layer + ".mlp"] = [90, 8]
    return forward


def _group(module: str, markers: list[str], kind: str = "untraced", flops: float = 0, line: int = 10) -> dict:
    return {
        "module": module,
        "code": f"forward ({MODELING}:5)",
        "kind": kind,
        "markers": markers,
        "flops": flops,
        "ops": 1,
        "lines": [line],
    }


def _records(eager_paths: dict[str, list[float]], groups: list[dict]) -> dict[str, list[dict]]:
    eager = {"phases": {"coverage": {"ok": True, "forward": _totals(), "backward": [1000, 50]}}}
    compiled = {
        "phases": {
            "coverage": {
                "ok": True,
                "forward": eager_paths,
                "backward": [0, 0],
                "groups": groups,
                "tree": _tree(),
                "micro_steps": [7],
                "seconds": 0.1,
            }
        }
    }
    return {"eager": [eager], "compiled": [compiled]}


def _facts(**kw) -> RehearsalFacts:
    return RehearsalFacts(label="cpu-only (tiny model)", **kw)


def _build(eager_paths, groups, *, targets=("",), disabled=("model.visual",), scan=None, facts=None) -> RehearsalFacts:
    facts = facts or _facts()
    coverage.build(
        facts,
        _records(eager_paths, groups),
        scan or TraceScan(),
        REPO,
        {"targets": list(targets), "disabled": list(disabled)},
    )
    return facts


def _entry(facts: RehearsalFacts, module: str):
    return next(e for e in facts.coverage if e.module == module)


def test_a_fully_compiled_model_passes_and_lists_its_collapsed_blocks():
    facts = _build(
        {"model.visual.proj": [100, 3]},
        [_group("model.visual.proj", ["disable:XVision.forward (/repo/k.py:3)", "entry"], flops=100)],
    )
    layers = _entry(facts, "model.layers.*")
    assert layers.count == 4 and layers.class_name == "XDecoderLayer" and layers.compiled == 1.0
    assert layers.work == pytest.approx(600 / 900, abs=1e-3)
    assert _entry(facts, "model.visual").role == "kept eager (documented)"
    assert facts.compiled_share == pytest.approx(800 / 900, abs=1e-3)
    assert facts.coverage_failures == []  # the documented eager tower is no failure


def test_checkpointed_blocks_running_eager_fail_with_the_cause_and_its_site():
    eager = {f"{layer}.{part}": _totals()[f"{layer}.{part}"] for layer in LAYERS for part in ("attn", "mlp")}
    call = "checkpoint:/venv/lib/python3.12/site-packages/transformers/modeling_layers.py:93"
    groups = [_group(p, [call, "entry"], flops=f[0]) for p, f in eager.items()]
    scan = TraceScan(
        sites=[GraphBreakSite(site="library transformers/modeling_layers.py:93", reason="HOP: Unsafe side effect")]
    )
    facts = _build(eager, groups, scan=scan)
    layers = _entry(facts, "model.layers.*")
    assert layers.compiled == 0.0
    cause = layers.eager_causes[0]
    assert cause.kind == "checkpoint" and cause.site == "library transformers/modeling_layers.py:93"
    assert "HOP: Unsafe side effect" in cause.cause and cause.share == 1.0
    fails = facts.coverage_failures
    assert fails and fails[0].startswith("compile has no effect on model.layers.* (4 blocks, 0% of")
    assert (
        "activation checkpointing runs it with compile off" in fails[0]
        and "library transformers/modeling_layers.py:93" in fails[0]
    )


def test_checkpointed_blocks_with_no_compiled_call_around_them_are_outside_compile_not_checkpointed():
    call = "checkpoint:/venv/lib/python3.12/site-packages/transformers/modeling_layers.py:93"
    facts = _build({"model.layers.0.mlp": [90, 8]}, [_group("model.layers.0.mlp", [call], flops=90)])
    cause = _entry(facts, "model.layers.*").eager_causes[0]
    assert cause.kind == "not-compiled" and cause.cause.startswith("outside every compiled call")


def test_the_recompile_limit_is_named_with_its_step_through_the_frame_that_hit_it():
    limit = (
        "torch._dynamo hit config.recompile_limit (8) function: 'wrapped_func' "
        "(<site-packages>/transformers/utils/deprecation.py:126) last reason: ..."
    )
    facts = _facts(steps=[RehearsalStep(step=0, shape="s"), RehearsalStep(step=3, shape="s", limit_hits=[limit])])
    skipped = "skipped:wrapped_func (/venv/lib/python3.12/site-packages/transformers/utils/deprecation.py:126)"
    groups = [_group("model.layers.0.mlp", ["skipped:forward (/x.py:1)", skipped, "entry"], flops=90)]
    facts = _build({"model.layers.0.mlp": [90, 8]}, groups, facts=facts)
    cause = _entry(facts, "model.layers.*").eager_causes[0]
    assert cause.kind == "recompile-limit" and "at optimizer step 3" in cause.cause
    assert cause.site == "library transformers/utils/deprecation.py:126"
    assert _entry(facts, "model.layers.*").compiled == pytest.approx(1 - 90 / 600, abs=1e-3)


def test_a_skipped_frame_gives_dynamos_reason_and_a_graph_break_its_line():
    scan = TraceScan(
        failed={("forward", "/repo/recipes/r/loss.py", 20): "Data-dependent branching; graph break in loop"},
        sites=[GraphBreakSite(site="library transformers/models/x/modeling_x.py:44", reason="Dynamic shape operator")],
    )
    loss = {**_group("lm_head", ["entry"], kind="skipped", flops=200), "code": "forward (/repo/recipes/r/loss.py:20)"}
    gap = _group("model.layers.1.attn", ["entry"], kind="gap", flops=60, line=44)
    facts = _build({"lm_head": [200, 4], "model.layers.1.attn": [60, 10]}, [loss, gap], scan=scan)
    head = _entry(facts, "lm_head").eager_causes[0]
    assert head.kind == "skipped-frame" and head.site == "recipes/r/loss.py:20"
    assert "graph break in loop" in head.cause
    attn = _entry(facts, "model.layers.*").eager_causes[0]
    assert attn.kind == "graph-break" and attn.site == "library transformers/models/x/modeling_x.py:44"
    assert "Dynamic shape operator" in attn.cause


def test_a_skipped_frame_names_the_break_it_could_not_resume_from_inside_it():
    scan = TraceScan(
        failed={("forward", "/repo/recipes/r/loss.py", 20): "Unsupported Tensor.item() call; graph break in loop"},
        sites=[
            GraphBreakSite(site="recipes/r/loss.py:12", reason="x (no resume: the frame ran eager)"),  # before it
            GraphBreakSite(site="recipes/r/loss.py:31", reason="Unsupported Tensor.item() call"),  # resumed
            GraphBreakSite(
                site="recipes/r/loss.py:35", reason="Unsupported Tensor.item() (no resume: the frame ran eager)"
            ),
        ],
    )
    loss = {**_group("lm_head", ["entry"], kind="skipped", flops=200), "code": "forward (/repo/recipes/r/loss.py:20)"}
    head = _entry(_build({"lm_head": [200, 4]}, [loss], scan=scan), "lm_head").eager_causes[0]
    assert head.kind == "skipped-frame" and head.site == "recipes/r/loss.py:35"
    assert head.cause == (
        "dynamo skipped forward at its break at recipes/r/loss.py:35: Unsupported Tensor.item() call; graph break in "
        "loop (the frame starts at recipes/r/loss.py:20)"
    )


def test_a_regional_target_fails_only_on_its_blocks_and_other_modules_are_outside_the_targets():
    facts = _build(
        {"lm_head": [200, 4], "model.visual.proj": [100, 3]},
        [_group("lm_head", [], flops=200), _group("model.visual.proj", [], flops=100)],
        targets=("model.layers.*",),
        disabled=(),
    )
    assert facts.coverage_failures == []
    head = _entry(facts, "lm_head")
    assert head.role == "outside the targets" and head.eager_causes[0].kind == "not-compiled"
    assert _entry(facts, "model").role == "holds targets" and _entry(facts, "model.layers.*").role == "target"


def test_a_module_that_loses_compiled_share_is_new_with_the_change():
    base = _build({}, [])
    head = _build({"lm_head": [200, 4]}, [_group("lm_head", ["entry"], kind="skipped", flops=200)])
    lost = coverage.versus(head, base)
    assert lost and lost[0].startswith(
        "lm_head (22% of the model's forward work) ran 100% of its forward work compiled at the base and 0%"
    )
    assert _entry(head, "lm_head").base_compiled == 1.0
    assert coverage.versus(base, base) == []


def test_nothing_measured_says_so():
    facts = _facts()
    coverage.build(facts, {"compiled": [{"phases": {}}], "eager": [{}]}, TraceScan(), REPO, {})
    assert facts.coverage == [] and facts.coverage_note and facts.coverage_note.startswith("not measured")


def test_a_module_moved_out_of_the_targets_is_said_not_failed():
    from model_compile.hard.rehearsal import base as base_mod

    base = _build({}, [])
    # the change compiles only the blocks now: the head leaves lm_head outside the targets
    head = _build({"lm_head": [200, 4]}, [_group("lm_head", [], flops=200)], targets=("model.layers.*",), disabled=())
    assert coverage.versus(head, base) == []
    assert coverage.moved_out(head, base)[0].startswith("lm_head (22% of the model's forward work) ran 100%")
    for facts in (base, head):
        facts.status, facts.steps = "passed", [RehearsalStep(step=0, shape="s")]
    assert base_mod.regressions(head, base) == []


def test_more_compiled_work_brings_new_sites_that_are_not_failures():
    from model_compile.hard.rehearsal import base as base_mod

    eager = {f"{layer}.{part}": _totals()[f"{layer}.{part}"] for layer in LAYERS for part in ("attn", "mlp")}
    base = _build(eager, [_group(p, ["entry"], flops=f[0]) for p, f in eager.items()])
    head = _build({}, [])
    head.graph_break_sites = [GraphBreakSite(site="recipes/r/m.py:9", reason="x")]
    for facts in (base, head):
        facts.status, facts.steps = "passed", [RehearsalStep(step=0, shape="s")]
    assert head.compiled_share and base.compiled_share is not None and head.compiled_share > base.compiled_share
    assert base_mod.regressions(head, base) == []
    head.compiled_share = base.compiled_share  # the same coverage: a new break site is a regression
    assert base_mod.regressions(head, base) == ["new graph-break site recipes/r/m.py:9 (1x): x"]


def test_the_summary_says_a_module_outside_the_targets_is_outside_first() -> None:
    from model_compile.hard.facts import CoverageEntry, EagerCause
    from model_compile.hard.models import RehearsalFacts
    from model_compile.hard.rehearsal.render import coverage_line

    cause = EagerCause(
        cause="activation checkpointing runs it with compile off", site="library t/m.py:9", kind="checkpoint", share=1.0
    )
    tower = CoverageEntry(module="model.visual.blocks.*", compiled=0.0, work=0.3, count=4, eager_causes=[cause])
    tower.role = "outside the targets"
    line = coverage_line(RehearsalFacts(label="cpu-only (tiny model)", coverage=[tower], compiled_share=0.7))
    assert "model.visual.blocks.* (4 blocks, 0% compiled: outside the compile targets; activation" in (line or "")


def test_the_width_caveat_is_said_only_when_a_width_was_shrunk():
    facts = _facts()
    facts.coverage_note = "measured on micro-step(s) 3"
    coverage.widths_note(facts)
    assert facts.coverage_note.endswith("(nothing was shrunk)")
    facts.coverage_note, facts.shrunk = "measured on micro-step(s) 3", ["hidden_size 768 -> 64"]
    coverage.widths_note(facts)
    assert "its widths are shrunk by their own rule" in facts.coverage_note

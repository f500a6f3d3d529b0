"""Whose failure it is, from what the children recorded: one record per case, each owner with its evidence.

Static: the records are written here as the children write them (status, fault, reason, the frames that raised,
the instruments it ran under, the feed); `attribution.attribute` and `base.apply` read them, nothing runs.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from model_compile.hard.models import RehearsalFacts
from model_compile.hard.rehearsal import base
from model_compile.hard.rehearsal.reading import attribution


def _facts(status: str, reason: str) -> RehearsalFacts:
    return RehearsalFacts(label="cpu-only", status=status, reason=reason, record="/out")  # type: ignore[arg-type]


def _stopped(twin: str, **rec: Any) -> dict[str, list[dict[str, Any]]]:
    done = {"status": "done"}
    order = ["reference", "eager", "compiled"]
    recs: dict[str, list[dict[str, Any]]] = {t: [done] for t in order[: order.index(twin)]}
    recs[twin] = [{"twin": twin, **rec}]
    return recs


def test_the_tools_own_frame_is_a_tool_error_and_an_instruments_says_so(tmp_path: Path) -> None:
    facts = _facts("failed", "model-compile's own code failed at measure/coverage.py:65: NotImplementedError")
    recs = _stopped(
        "compiled",
        status="tool-error",
        fault="tool",
        reason=str(facts.reason),
        raised_in={
            "exception": "NotImplementedError",
            "tool": "model_compile/runtime/rehearsal/measure/coverage.py:65 in run",
        },
    )
    attribution.attribute(facts, recs, tmp_path)
    (att,) = facts.attribution
    assert (facts.status, facts.fault, att.owner, att.part) == ("tool-error", "tool", "tool", "an instrument")
    assert att.supply and "MODEL_COMPILE_COVERAGE=off" in att.supply
    assert facts.reason and facts.reason.endswith("[whose: model-compile's own, not the recipe's (an instrument)]")


def test_a_stand_in_the_call_cannot_build_is_not_run_and_names_what_supplies_it(tmp_path: Path) -> None:
    reason = (
        "AutoModelForCausalLM.from_pretrained('/cluster/m') raised on the rehearsal's stand-in of it (...): ValueError: "
        "Unrecognized configuration class; ... supply the real config with --model-config /cluster/m=PATH"
    )
    facts = _facts("not-run", reason)
    recs = _stopped("reference", status="not-run", fault="stand-in", reason=reason, raised_in={"part": "model"})
    attribution.attribute(facts, recs, tmp_path)
    (att,) = facts.attribution
    assert (facts.status, att.owner, att.part) == ("not-run", "stand-in", "model")
    assert att.supply == "--model-config /cluster/m=PATH"


def test_a_missing_package_is_the_environments(tmp_path: Path) -> None:
    reason = "environment: the recipe's set-up raised: ModuleNotFoundError: No module named 'einops' (a package missing from this environment, not a fault of the recipe)"
    facts = _facts("not-run", reason)
    attribution.attribute(facts, _stopped("reference", status="not-run", fault="environment", reason=reason), tmp_path)
    assert (facts.attribution[0].owner, facts.attribution[0].part) == ("environment", "a package")


def test_a_sibling_library_at_another_revision_is_the_environments_with_both_revisions(tmp_path: Path) -> None:
    lib = tmp_path / "lib"
    lib.mkdir()
    for args in (
        ["init", "-q"],
        ["-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q", "--allow-empty", "-m", "x"],
    ):
        subprocess.run(["git", "-C", str(lib), *args], check=True)
    head = subprocess.run(["git", "-C", str(lib), "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True)
    facts = _facts(
        "not-run", "the fp32 reference (compile off) failed: ImportError: cannot import name 'stable_fingerprint'"
    )
    raised = {
        "exception": "ImportError",
        "exception_module": "builtins",
        "innermost": {"where": "engine/kit/sample.py:11 in <module>", "kind": "repo", "package": "engine"},
        "repo": "engine/kit/sample.py:11 in <module>",
        "import_from": {
            "module": "datalib.core.resume",
            "package": "datalib",
            "name": "datalib",
            "version": "0.2.1",
            "source": str(lib),
            "editable": True,
        },
    }
    attribution.attribute(facts, _stopped("reference", status="not-run", fault="recipe", raised_in=raised), tmp_path)
    (att,) = facts.attribution
    assert (facts.status, att.owner, att.part) == ("not-run", "environment", "datalib at another revision")
    assert f"datalib 0.2.1 at {head.stdout.strip()} (editable, installed from {lib})" in att.evidence[0]
    assert "the repository at (not a git checkout)" in att.evidence[0]  # the engine's revision, the other one


def test_a_compiled_raise_is_the_recipes_against_the_eager_twin(tmp_path: Path) -> None:
    facts = _facts("failed", "the recipe's training raised at micro-step 3 with compile on: RuntimeError: boom")
    recs = _stopped(
        "compiled",
        status="failed",
        fault="recipe",
        raised_in={"exception": "RuntimeError", "innermost": {"where": "recipes/r/m.py:3 in f", "kind": "repo"}},
        instruments=["the compiled-graph hook"],
    )
    attribution.attribute(facts, recs, tmp_path)
    (att,) = facts.attribution
    assert (facts.status, att.owner) == ("failed", "recipe")
    assert att.evidence[0].startswith("the eager twin ran the same steps")
    assert att.not_ruled_out == ["the tool's instruments it ran under (the compiled-graph hook)"]  # the control's job


def test_an_eager_raise_on_the_tools_batches_is_the_stand_ins_data_and_on_the_recipes_data_the_recipes(
    tmp_path: Path,
) -> None:
    raised = {
        "exception": "RuntimeError",
        "innermost": {"where": "recipes/r/m.py:3 in f", "kind": "repo"},
        "repo": "recipes/r/m.py:3 in f",
    }
    facts = _facts("not-run", "the eager twin (compile off) failed, so compile cannot be judged: RuntimeError: size")
    recs = _stopped(
        "eager", status="not-run", fault="recipe", raised_in=raised, feed={"mode": "batches", "reason": "no data"}
    )
    attribution.attribute(facts, recs, tmp_path)
    (att,) = facts.attribution
    assert (facts.status, att.owner, att.part) == ("not-run", "stand-in", "data")
    assert att.not_ruled_out == ["the recipe's own code (recipes/r/m.py:3 in f), on its own data"]
    facts = _facts("not-run", "the eager twin (compile off) failed, so compile cannot be judged: RuntimeError: size")
    recs = _stopped("eager", status="not-run", fault="recipe", raised_in=raised, feed={"mode": "own"})
    attribution.attribute(facts, recs, tmp_path)
    (att,) = facts.attribution
    assert att.owner == "recipe" and "model-compile's code (no frame of it)" in att.ruled_out
    assert att.not_ruled_out and "--base REV" in att.not_ruled_out[0]  # the control that would decide it


def test_judged_problems_are_the_recipes_and_what_is_new_the_changes(tmp_path: Path) -> None:
    facts = _facts("failed", "x")
    facts.problems = ["new with the change: lost compile: model.layers.*", "recompile limit hit at optimizer step 2"]
    attribution.attribute(facts, {"eager": [{"status": "done"}], "compiled": [{"status": "done"}]}, tmp_path)
    assert [a.owner for a in facts.attribution] == ["change", "recipe"]
    assert all(a.control == "compile off (the eager twin)" for a in facts.attribution)


def test_a_head_that_fails_eager_where_the_base_trains_fails_new_with_the_change(tmp_path: Path) -> None:
    reason = (
        "the eager twin (compile off) failed, so compile cannot be judged: RuntimeError: The size of tensor a (950)"
    )
    head = _facts("not-run", reason)
    raised = {"exception": "RuntimeError", "innermost": {"where": "recipes/r/m.py:3 in f", "kind": "repo"}}
    attribution.attribute(head, _stopped("eager", status="not-run", fault="recipe", raised_in=raised), tmp_path)
    trained = _facts("passed", "")
    trained.steps = [
        __import__("model_compile.hard.models", fromlist=["RehearsalStep"]).RehearsalStep(
            step=0, micro_steps=1, shape="x"
        )
    ]
    base.apply(head, trained, "main")
    assert (head.status, head.fault, head.existing) == ("failed", "change", False)
    assert head.reason and head.reason.startswith("new with the change: the training fails with compile off")
    assert head.attribution[0].control == "the base (main) trains the same run: passed"
    base_failed = _facts("not-run", reason)
    again = _facts("not-run", reason)
    attribution.attribute(again, _stopped("eager", status="not-run", fault="recipe", raised_in=raised), tmp_path)
    base.apply(again, base_failed, "main")  # the base does not train either: not the change's
    assert again.status == "not-run" and again.fault == "recipe"


def test_a_sibling_librarys_own_error_in_the_data_path_is_the_environments_not_a_data_path_fix(
    tmp_path: Path,
) -> None:
    facts = _facts("passed", "")
    facts.data_failure = (
        "lib/core/stages/assemble.py:32: UnsupportedResume: stage kind='assemble' requires a stateful assembler"
    )
    facts.data_failure_raised = {
        "exception": "UnsupportedResume",
        "exception_module": "datalib.core.resume",
        "innermost": {"where": "lib/core/stages/assemble.py:32 in f", "kind": "library", "package": "datalib"},
        "repo": "engine/data.py:7 in build",
        "library": {
            "package": "datalib",
            "name": "datalib",
            "version": "0.2.1",
            "source": str(tmp_path),
            "editable": True,
        },
    }
    facts.status = "failed"
    facts.problems = ["recompile limit hit at optimizer step 2"]
    attribution.attribute(facts, {"compiled": [{"status": "done"}]}, tmp_path)
    data = facts.attribution[-1]
    assert (data.owner, data.part) == ("environment", "datalib at another revision")
    assert data.evidence[0].startswith("datalib raised its own UnsupportedResume inside its code: datalib 0.2.1")
    assert data.not_ruled_out == ["the recipe's own use of datalib (engine/data.py:7 in build)"]


def test_an_engine_that_fails_on_an_override_the_rehearsal_ran_with_is_the_tools(tmp_path: Path) -> None:
    facts = _facts(
        "not-run", "the recipe's engine could not be built outside its tests: ValidationError: 1 validation error"
    )
    rec = {
        "status": "not-run",
        "fault": "recipe",
        "stopped_at": "engine",
        "phases": {
            "config": {"ok": True, "overrides": ["model.gradient_checkpointing.mode=nested", "loop.total_steps=8"]},
            "engine": {"ok": False, "detail": "model.gradient_checkpointing.mode\n  Extra inputs are not permitted"},
        },
    }
    attribution.attribute(facts, _stopped("reference", **rec), tmp_path)
    (att,) = facts.attribution
    assert (facts.status, att.owner, att.part) == ("tool-error", "tool", "the overrides it ran the stage with")
    assert "model.gradient_checkpointing.mode=nested" in att.evidence[0]
    rec["phases"]["engine"]["detail"] = "data.text_field\n  Field required"  # nothing it set: the recipe's config
    facts = _facts("not-run", "the recipe's engine could not be built outside its tests: ValidationError")
    attribution.attribute(facts, _stopped("reference", **rec), tmp_path)
    assert facts.attribution[0].owner == "recipe" and facts.attribution[0].not_ruled_out


def test_the_base_runs_without_an_override_key_only_the_change_has() -> None:
    from model_compile.analyze import analyze_path
    from model_compile.hard.rehearsal.stage_keys import base_overrides

    root = Path(__file__).parent / "fixtures" / "rehearsal_repo"
    recipe = root / "recipes" / "lm_unknown"
    asked = ["model.attn_implementation=eager", "model.gradient_checkpointing.mode=nested"]
    kept, dropped = base_overrides(analyze_path(recipe).recipes[0], recipe, root, asked, None)
    assert kept == ["model.attn_implementation=eager"] and dropped == ["model.gradient_checkpointing.mode=nested"]


def test_an_eager_raise_inside_the_model_built_from_a_class_default_config_is_the_stand_ins(tmp_path: Path) -> None:
    facts = _facts(
        "not-run", "the eager twin (compile off) failed, so compile cannot be judged: KeyError: 'mrope_section'"
    )
    facts.loads = [{"name": "Qwen/Qwen2.5-VL-7B", "kind": "model", "depth_unknown": True, "source": "Qwen2_5_VLConfig"}]
    raised = {
        "exception": "KeyError",
        "innermost": {"where": "<site-packages>/transformers/models/qwen2_5_vl/modeling_qwen2_5_vl.py:728 in forward"},
        "repo": "recipes/r/engine.py:9 in forward_step",
    }
    attribution.attribute(facts, _stopped("eager", status="not-run", fault="recipe", raised_in=raised), tmp_path)
    (att,) = facts.attribution
    assert (att.owner, att.part) == ("stand-in", "model (a config class's defaults)")
    assert att.supply == "--model-config Qwen/Qwen2.5-VL-7B=PATH with its real config.json"


def test_an_attribute_the_repositorys_own_object_lacks_is_the_recipes_whatever_the_batches(tmp_path: Path) -> None:
    facts = _facts(
        "not-run",
        "the eager twin (compile off) failed: AttributeError: 'TrainStepContext' object has no attribute 'items'",
    )
    raised = {
        "exception": "AttributeError",
        "innermost": {"where": "recipes/r/engine/r_engine.py:391 in train_pre_step", "kind": "repo"},
        "repo": "recipes/r/engine/r_engine.py:391 in train_pre_step",
        "attribute_of": {"class": "TrainStepContext", "kind": "repo"},
    }
    recs = _stopped(
        "eager", status="not-run", fault="recipe", raised_in=raised, feed={"mode": "batches", "reason": "x"}
    )
    attribution.attribute(facts, recs, tmp_path)
    (att,) = facts.attribution
    assert att.owner == "recipe" and att.evidence[0].startswith("the repository's own TrainStepContext lacks")
    assert att.ruled_out == ["the rehearsal's stand-in model and batches (the object is the repository's own)"]


def test_failures_whose_attribution_reads_the_same_are_one_block_counted() -> None:
    from model_compile.hard.facts import Attribution
    from model_compile.hard.rehearsal.render import attribution_lines

    facts = _facts("failed", "recompile limit hit")
    same = {"owner": "recipe", "part": "compile", "evidence": ["only compile differs"]}
    facts.attribution = [
        Attribution(failure="limit hit at step 5", **same),
        Attribution(failure="limit hit at step 6", **same),
        Attribution(failure="no parity", owner="tool", evidence=["the meter raised"]),
    ]
    lines = attribution_lines(facts)
    assert lines == [
        "whose: recipe (compile) - only compile differs (the same for 2 failures)",
        "whose: tool - the meter raised",
    ]

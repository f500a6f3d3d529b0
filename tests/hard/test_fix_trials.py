"""A fix is proven only by a rerun that removes what it aims at with parity and keys held, and something still
compiling; fewer recompiles because nothing compiles any more is no fix."""

from __future__ import annotations

from model_compile.hard.models import CoverageEntry, EagerCause, Fix, RehearsalFacts, RehearsalStep
from model_compile.hard.rehearsal import trials

LIMIT = "torch._dynamo hit config.recompile_limit (8) function: 'fwd' (/repo/loss.py:3) last reason: x"


def _facts(hits: int, recompiles: int, share: float | None, *problems: str, hot: int = 0) -> RehearsalFacts:
    steps = [RehearsalStep(step=0, shape="s", limit_hits=[LIMIT] if hits else [], grad_err=1e-3)]
    return RehearsalFacts(
        status="failed" if hits or problems or hot else "passed",
        label="cpu-only (tiny model)",
        steps=steps,
        recompile_count=recompiles,
        compiled_share=share,
        problems=list(problems),
        coverage_failures=[f"compile has no effect on m{i}" for i in range(hot)],
    )


def _fix(*aims: str) -> Fix:
    return Fix(fix="f", tried="not tried", override={"x": 1}, aims=list(aims))


def test_a_fix_that_removes_the_limit_hits_with_parity_held_is_proven() -> None:
    fix = _fix("limit_hits", "recompiles")
    trials.judge(fix, _facts(2, 57, 0.08, hot=1), _facts(0, 2, 0.88))
    assert fix.tried == "proven" and fix.figures["limit_hits"] == [1, 0] and fix.figures["recompiles"] == [57, 2]
    assert fix.reason and "compiled share 8% -> 88%" in fix.reason and "parity within the bound" in fix.reason
    assert fix.figures["applied"] == []


def test_a_fix_that_only_shrinks_the_hits_is_disproven_with_its_figures() -> None:
    fix = _fix("limit_hits")
    before = _facts(2, 57, 0.08)
    before.steps.append(RehearsalStep(step=1, shape="s", limit_hits=[LIMIT.replace("fwd", "other")]))
    trials.judge(fix, before, _facts(1, 53, 0.08))
    assert fix.tried == "disproven" and fix.reason and fix.reason.startswith("what it aims at did not go")


def test_fewer_recompiles_because_nothing_compiles_is_no_fix() -> None:
    fix = _fix("recompiles", "limit_hits")
    trials.judge(
        fix, _facts(1, 7, 0.0), _facts(0, 0, 0.0, "no graph was compiled during the steps (the model ran eager)")
    )
    assert fix.tried == "disproven" and fix.reason and fix.reason.startswith("nothing compiled with it")


def test_a_fix_that_breaks_parity_is_disproven() -> None:
    fix = _fix("limit_hits")
    trials.judge(fix, _facts(1, 7, 0.5), _facts(0, 1, 0.9, "gradients differ at optimizer step 1: 1e-1 > 1e-3"))
    assert fix.tried == "disproven" and "parity outside the bound" in (fix.reason or "")


def test_a_rerun_that_did_not_run_leaves_the_fix_not_tried() -> None:
    fix = _fix("coverage")
    after = RehearsalFacts(status="tool-error", reason="the child stopped", label="cpu-only (tiny model)")
    trials.judge(fix, _facts(0, 0, 0.1, hot=1), after)
    assert fix.tried == "not tried" and "its rerun did not run (tool-error" in (fix.reason or "")


def _plan(tmp_path):  # noqa: ANN001, ANN202 - a stand-in for the rehearsal's Plan: the fields fixes() reads
    class _Plan:
        spec = {"recipe_root": str(tmp_path / "recipes" / "r"), "repo_root": str(tmp_path)}
        stage = "train"
        forward_step = None
        compile_call = "recipes/r/engine.py:9: model.compile()"
        compile_kwargs: dict[str, str] = {}
        model_var = "model"

    return _Plan


def test_checkpointed_blocks_get_the_per_block_fix_with_the_generate_command(tmp_path) -> None:
    from pathlib import Path

    from model_compile.hard.rehearsal.reading.fixes import fixes

    _Plan = _plan(tmp_path)
    cause = EagerCause(cause="activation checkpointing ...", site="library t/m.py:9", kind="checkpoint", share=1.0)
    facts = RehearsalFacts(
        label="cpu-only (tiny model)",
        coverage=[CoverageEntry(module="model.layers.*", compiled=0.0, work=0.9, eager_causes=[cause])],
        block_parts={"model.layers.*": ["model.layers.*.mlp", "model.layers.*.self_attn"]},
    )
    found = fixes(facts, _Plan())  # type: ignore[arg-type]
    regional = next(f for f in found if f.override.get("compile_targets"))
    assert regional.override == {"compile_targets": ["model.layers.*.mlp", "model.layers.*.self_attn"]}
    assert regional.command and (
        "--path regional --switch --target 'model.model.layers.*.mlp' --target 'model.model.layers.*.self_attn'"
        in regional.command
    )
    assert "--reason" in regional.command and regional.command.endswith("--write")
    assert Path(_Plan.spec["recipe_root"]).name in regional.command
    # blocks the recipe does not target (a tower outside a per-block compile) get no such fix
    facts.coverage[0].role = "outside the targets"
    assert not any(f.override.get("compile_targets") for f in fixes(facts, _Plan()))  # type: ignore[arg-type]


def test_a_branch_site_broken_for_two_worded_reasons_gets_one_fix(tmp_path) -> None:
    from model_compile.hard.facts import GraphBreakSite
    from model_compile.hard.rehearsal.reading.fixes import fixes

    _Plan = _plan(tmp_path)
    facts = RehearsalFacts(
        label="cpu-only (tiny model)",
        graph_break_sites=[
            GraphBreakSite(site="kit/loss.py:18", reason="Data-dependent branching"),
            GraphBreakSite(site="kit/loss.py:18", reason="Data-dependent branching; graph break in loop"),
        ],
    )
    found = [f for f in fixes(facts, _Plan()) if "kit/loss.py:18" in f.fix]  # type: ignore[arg-type]
    assert len(found) == 1 and found[0].tried == "not tried" and found[0].shared_code


def test_a_value_read_out_as_python_numbers_gets_its_own_fix(tmp_path) -> None:
    from model_compile.hard.facts import GraphBreakSite
    from model_compile.hard.rehearsal.reading.fixes import fixes

    site = GraphBreakSite(site="recipes/r/model.py:232", reason="Data dependent operator (aten._local_scalar_dense)")
    facts = RehearsalFacts(label="cpu-only (tiny model)", graph_break_sites=[site])
    (fix,) = fixes(facts, _plan(tmp_path)())  # type: ignore[arg-type]
    assert "`.tolist()`" in fix.fix and "Python `if`" not in fix.fix and fix.tried == "not tried"


def test_a_mark_dynamic_that_dynamo_refuses_is_disproven() -> None:
    fix = Fix(fix="mark it", cause="c", tried="not tried", override={"mark_dynamic": [["input_ids", 1]]})
    after = RehearsalFacts(
        status="tool-error",
        reason="the compiled run stopped: ConstraintViolationError: Constraints violated (L['input_ids'].size()[1])",
        label="cpu-only (tiny model)",
    )
    trials.judge(fix, _facts(0, 7, 0.5), after)
    assert fix.tried == "disproven" and "specializes the size it marks" in (fix.reason or "")


def test_an_item_read_out_only_to_branch_on_is_a_branch_and_its_line_is_quoted(tmp_path) -> None:
    from model_compile.hard.facts import GraphBreakSite
    from model_compile.hard.rehearsal.reading.fixes import fixes

    (tmp_path / "kit").mkdir()
    (tmp_path / "kit" / "loss.py").write_text("x = 1\n    if not bool((labels != -100).any()):\n    y = n.item()\n")
    reason = "Unsupported Tensor.item() call with capture_scalar_outputs=False (no resume: the frame ran eager)"
    facts = RehearsalFacts(
        label="cpu-only (tiny model)",
        graph_break_sites=[GraphBreakSite(site="kit/loss.py:2", reason=reason)],
    )
    (branch,) = fixes(facts, _plan(tmp_path)())  # type: ignore[arg-type]
    assert "at kit/loss.py:2 (shared code outside the recipe" in branch.fix
    assert "(`if not bool((labels != -100).any()):`)" in branch.fix and "Python `if`" in branch.fix
    assert (
        "capture_scalar_outputs = True" not in branch.fix
        and branch.cause == "data-dependent branching at kit/loss.py:2"
    )
    facts.graph_break_sites[0].site = "kit/loss.py:3"  # the number feeds code, not a branch: the scalar advice
    (scalar,) = fixes(facts, _plan(tmp_path)())  # type: ignore[arg-type]
    assert "(`y = n.item()`)" in scalar.fix and "capture_scalar_outputs = True" in scalar.fix


def test_a_proven_fix_says_what_leaves_compile_with_it_and_that_its_rerun_still_fails() -> None:
    def entry(module: str, compiled: float, work: float, role: str = "target") -> CoverageEntry:
        return CoverageEntry(module=module, compiled=compiled, work=work, role=role)

    before = _facts(2, 57, 0.08, hot=1)
    before.coverage = [entry("model.layers.*", 0.0, 0.92), entry("(model) own code", 1.0, 0.08)]
    after = _facts(0, 2, 0.88, "compile has no effect on model.visual.blocks.*")
    after.status, after.reason = "failed", "compile has no effect on model.visual.blocks.*"
    after.coverage = [entry("model.layers.*", 1.0, 0.92), entry("(model) own code", 0.0, 0.08, "outside the targets")]
    fix = _fix("coverage", "limit_hits")
    trials.judge(fix, before, after)
    assert fix.tried == "proven" and fix.figures["left_compile"] == [
        "(model) own code (8% of the model's forward work) ran 100% of its forward work compiled before the fix and "
        "0% with the fix - the fix moved it out of the compiled targets"
    ]
    assert "; with it, (model) own code (8% of the model's forward work) ran 100%" in (fix.reason or "")
    assert (fix.reason or "").endswith("; its rerun still fails: compile has no effect on model.visual.blocks.*")

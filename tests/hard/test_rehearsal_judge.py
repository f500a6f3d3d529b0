"""How the rehearsal reads its children's records and judges them, and what it prints (no child process)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from model_compile.analyze import analyze_path
from model_compile.hard.env.proc import RankResult
from model_compile.hard.models import RehearsalFacts
from model_compile.hard.rehearsal.planning.plan import plan
from model_compile.hard.rehearsal.reading import judge, sites
from model_compile.hard.rehearsal.reading.fixes import shorten
from model_compile.hard.rehearsal.render import readable_guard, summary_lines, text
from model_compile.hard.rehearsal.run import to_layer

RECIPES = Path(__file__).parent / "fixtures" / "rehearsal_repo" / "recipes"
LIMIT = "torch._dynamo hit config.recompile_limit (8) function: 'forward' (/repo/mvp/loss.py:243) last reason: 0/7: tensor 'kwargs['input_ids']' size mismatch at index 1. expected 52, actual 69"
CACHE = "kwargs['cache'].layers[7].is_initialized == False"


def _plan(tmp_path: Path, recipe: str = "lm_blocks"):
    report = analyze_path(RECIPES / recipe)
    return plan(report.recipes[0], RECIPES / recipe, RECIPES.parent, tmp_path)


def _micro(
    step: int, graphs: int = 0, recompiles: list[dict] | None = None, hits: list[str] | None = None
) -> dict[str, Any]:
    return {
        "step": step,
        "shape": "tokens 1x32",
        "shapes": {"input_ids": [1, 32], "labels": [1, 32]},
        "seconds": 0.5 if graphs else 0.1,
        "new_graphs": graphs,
        "recompiles": recompiles or [],
        "limit_hits": hits or [],
    }


def _records(parity_c: list[float], parity_e: list[float], micro: list[dict], keys_same: bool = True) -> dict:
    steps = len(parity_c)
    model = {
        "ok": True,
        "returned": "DistributedDataParallel",
        "model": "Qwen3ForCausalLM",
        "parameters": 10,
        "compiled_modules": ["(model) [inplace]"],
        "compiled_module_count": 1,
        "wrap": "DistributedDataParallel",
        "targets": {"target_checks": [], "target_failures": []},
        "disabled": [],
    }
    keys = {
        "state_dict": {
            "checked": True,
            "count": 3,
            "same": keys_same,
            "only_eager": [] if keys_same else ["a"],
            "only_compiled": [] if keys_same else ["_orig_mod.a"],
            "orig_mod": 0 if keys_same else 3,
        }
    }
    parity = {
        "rule": "compiled error <= 3 x the eager twin's largest error so far + 0.0001, both against the float32 reference",
        "compiled": {"grads": [{"err": e, "worst": "w"} for e in parity_c], "loss": [0.0] * len(micro)},
        "eager": {"grads": [{"err": e, "worst": "w"} for e in parity_e], "loss": [0.0] * len(micro)},
        "bounds": {"grads": [3 * e + 1e-4 for e in parity_e], "loss": [1e-4] * len(micro)},
    }
    compiled = {
        "status": "done",
        "phases": {"model": model, "parity": {"ok": True, "keys": keys, "parity": parity}},
        "micro_steps": micro,
        "sync_checks": [],
    }
    eager = {"status": "done", "phases": {"model": model}, "micro_steps": [dict(m, new_graphs=0) for m in micro]}
    prepare = {
        "status": "done",
        "phases": {"precision": {"ok": True, "path": "optim.mixed_precision", "value": "bf16"}},
    }
    del steps
    return {"prepare": [prepare], "reference": [eager], "eager": [eager], "compiled": [compiled]}


def _read(tmp_path: Path, records: dict, recipe: str = "lm_blocks") -> RehearsalFacts:
    p = _plan(tmp_path, recipe)
    facts = judge.planned_facts(p, "cpu-only (tiny model)", tmp_path, "limits")
    judge.read(facts, p, records, tmp_path / "trace", RECIPES.parent)
    return facts


def test_a_clean_run_passes_with_its_figures(tmp_path: Path) -> None:
    micro = [_micro(0, graphs=3)] + [_micro(s) for s in range(1, 7)]
    facts = _read(tmp_path, _records([1e-2] * 7, [1e-2] * 7, micro))
    assert facts.status == "passed", facts.reason
    assert facts.steady_steps == 6 and facts.first_step_s == 0.5 and facts.recompile_count == 0
    assert facts.precision == "bf16 (optim.mixed_precision)" and facts.twins == ["reference", "eager", "compiled"]
    assert "median of 6 optimizer step(s)" in (text(facts, "cmd") or "")


def test_the_batches_line_says_which_token_counts_the_compiled_twin_was_fed(tmp_path: Path) -> None:
    micro = [_micro(0, graphs=3)] + [_micro(s) for s in range(1, 6)]
    facts = _read(tmp_path, _records([1e-2] * 6, [1e-2] * 6, micro))
    assert facts.token_counts == [32]
    assert facts.batches.endswith(
        "; seen: one token count, 32, in all 6 micro-step(s) on 1 rank(s) (other lengths were not exercised)"
    )
    assert any(
        ln.startswith("batches: seen one token count, 32") for ln in summary_lines(facts)
    )  # what review --hard prints
    # the near miss: varied lengths are counted, with their range, and no caveat
    varied = [
        dict(m, shape=f"tokens 1x{n}, 1 image(s) 4x4") for m, n in zip(micro, (40, 9, 40, 77, 12, 9), strict=True)
    ]
    facts = _read(tmp_path, _records([1e-2] * 6, [1e-2] * 6, varied))
    assert facts.token_counts == [9, 12, 40, 77]
    assert facts.batches.endswith("; seen: 4 token counts (9..77) in 6 micro-step(s) on 1 rank(s)")


def test_parity_outside_the_measured_bound_fails_naming_both_errors(tmp_path: Path) -> None:
    micro = [_micro(0, graphs=3), _micro(1)]
    facts = _read(tmp_path, _records([1e-2, 9e-2], [1e-2, 2e-2], micro))
    assert facts.status == "failed" and "gradients differ at optimizer step 1: 9.00e-02 > 6.01e-02; eager 2.00e-02" in (
        facts.reason or ""
    )


def test_a_recompile_is_one_new_variant_and_the_limit_hit_fails_with_its_fix(tmp_path: Path) -> None:
    recompile = {
        "frame": "forward (/repo/mvp/loss.py:243)",
        "count": 2,
        "variants": 3,
        "guard": "0/1: tensor 'kwargs['input_ids']' size mismatch at index 1. expected 52, actual 69",
    }
    micro = [_micro(0, graphs=2, recompiles=[recompile]), _micro(1, graphs=1, hits=[LIMIT])]
    facts = _read(tmp_path, _records([0.0, 0.0], [0.0, 0.0], micro))
    assert facts.recompile_count == 2 and len(facts.steps[0].recompiles) == 2  # count, not the guards checked
    assert facts.recompile_frames[0].startswith("2 recompile(s) in forward (/repo/mvp/loss.py:243)")
    assert facts.status == "failed" and "recompile limit hit at optimizer step 1" in (facts.reason or "")
    mark = next(f for f in facts.fixes if "mark the length dynamic" in f.fix)
    assert "torch._dynamo.mark_dynamic(batch['input_ids'], 1)" in mark.fix
    assert mark.override == {"mark_dynamic": [["input_ids", 1]]} and mark.tried == "not tried"
    lines = summary_lines(facts)
    assert lines[0].startswith("FAILED: recompile limit hit") and lines[1].startswith("fix, not tried: mark the length")


def test_a_per_layer_cache_guard_and_a_hard_coded_dynamic_false_are_named(tmp_path: Path) -> None:
    recompile = {"frame": "forward_with_checkpointing (lib.py:89)", "count": 7, "variants": 8, "guard": CACHE}
    sized = {
        "frame": "forward (lib.py:9)",
        "count": 1,
        "variants": 2,
        "guard": "tensor 'x' size mismatch at index 1. expected 16, actual 19",
    }
    micro = [
        _micro(
            0,
            graphs=8,
            recompiles=[recompile, sized],
            hits=[f"hit config.recompile_limit (8) function: 'forward_with_checkpointing' last reason: {CACHE}"],
        )
    ]
    facts = _read(tmp_path, _records([0.0], [0.0], micro), recipe="lm_static")
    cache = next(f for f in facts.fixes if "use_cache=False" in f.fix)
    assert "engine/lm_static_engine.py:" in cache.fix and cache.override == {"call_kwargs": {"use_cache": False}}
    assert any("hard-codes dynamic=False" in f.cause and f.override for f in facts.fixes)


@pytest.mark.parametrize(("recompiles", "noted"), [(7, True), (6, True), (5, False)])
def test_a_frame_at_or_one_variant_short_of_the_limit_is_a_note_not_a_failure(
    tmp_path: Path, recompiles: int, noted: bool
) -> None:
    sized = {
        "frame": "forward (/repo/mvp/loss.py:243)",
        "count": 1,
        "variants": 2,
        "guard": "0/1: tensor 'kwargs['input_ids']' size mismatch at index 1. expected 52, actual 69",
    }
    micro = [_micro(0, graphs=1)] + [_micro(s, graphs=1, recompiles=[sized]) for s in range(1, recompiles + 1)]
    records = _records([0.0] * len(micro), [0.0] * len(micro), micro)
    records["compiled"][0]["recompile_limit"] = 8
    facts = _read(tmp_path, records)
    assert facts.status == "passed", facts.reason
    assert bool(facts.near_limit) is noted
    if noted:
        assert facts.near_limit[0].startswith(
            f"forward (/repo/mvp/loss.py:243): {recompiles + 1} compiled variants of 8"
        )
        assert "one per new input size" in facts.near_limit[0]
        assert any("mark the length dynamic" in f.fix for f in facts.fixes)
        assert f"near the recompile limit: {facts.near_limit[0]}" in summary_lines(facts)
        assert f"  near the limit: {facts.near_limit[0]}" in (text(facts, "cmd") or "").splitlines()


def test_a_frame_that_hit_the_limit_is_not_also_near_it(tmp_path: Path) -> None:
    sized = {
        "frame": "forward (/repo/mvp/loss.py:243)",
        "count": 1,
        "variants": 2,
        "guard": "size mismatch at index 1. expected 52, actual 69",
    }
    micro = [_micro(0, graphs=1)] + [_micro(s, graphs=1, recompiles=[sized]) for s in range(1, 8)]
    micro[-1]["limit_hits"] = [LIMIT]
    facts = _read(tmp_path, _records([0.0] * 8, [0.0] * 8, micro))
    assert facts.status == "failed" and facts.near_limit == []


def test_the_sync_line_says_why_nothing_was_checked(tmp_path: Path) -> None:
    p = _plan(tmp_path)
    records = _records([0.0], [0.0], [_micro(0, graphs=1)])
    facts = judge.planned_facts(p, "cpu-only (tiny model)", tmp_path, "limits")
    facts.world_size = 2
    judge.read(facts, p, records, tmp_path / "trace", RECIPES.parent)
    assert facts.sync == "not checked: no micro-step skipped its sync (each one stepped the optimizer)"
    records["compiled"][0]["micro_steps"] = []
    facts = judge.planned_facts(p, "cpu-only (tiny model)", tmp_path, "limits")
    facts.world_size = 2
    judge.read(facts, p, records, tmp_path / "trace", RECIPES.parent)
    assert facts.sync == "not checked: the compiled run did not get to a micro-step"


def test_changed_keys_fail(tmp_path: Path) -> None:
    facts = _read(tmp_path, _records([0.0], [0.0], [_micro(0, graphs=1)], keys_same=False))
    assert facts.status == "failed" and "state_dict keys changed" in (facts.reason or "")


def test_nothing_compiled_fails(tmp_path: Path) -> None:
    facts = _read(tmp_path, _records([0.0], [0.0], [_micro(0)]))
    assert facts.status == "failed" and "no graph was compiled" in (facts.reason or "")


def test_a_sync_that_only_compile_adds_fails_and_one_already_there_is_a_note(tmp_path: Path) -> None:
    records = _records([0.0], [0.0], [_micro(0, graphs=1)])
    check = {"micro": 0, "reduced": True, "how": "gradient sums equal on every rank"}
    records["compiled"][0]["sync_checks"] = [check]
    facts = _read(tmp_path, records)
    assert facts.status == "failed" and "syncs every micro-step with compile on" in (facts.reason or "")
    records["eager"][0]["sync_checks"] = [check]
    facts = _read(tmp_path, records)
    assert facts.status == "passed" and "already so without compile" in (facts.sync or "")


def test_who_stopped_and_whose_fault(tmp_path: Path) -> None:
    p = _plan(tmp_path)
    facts = judge.planned_facts(p, "cpu-only (tiny model)", tmp_path, "limits")
    tool = {
        "status": "tool-error",
        "stopped_at": "train",
        "reason": "model-compile's own code failed at runtime/x.py:3 in f: KeyError: 'a'",
        "phases": {},
    }
    judge.stopped(facts, "compiled", [{"status": "done"}, tool], False, 60, "")
    assert facts.status == "tool-error" and facts.fault == "tool" and "(rank 1)" in (facts.reason or "")
    assert "not of the recipe" in (facts.reason or "")
    facts = judge.planned_facts(p, "cpu-only (tiny model)", tmp_path, "limits")
    eager = {
        "status": "not-run",
        "stopped_at": "train",
        "reason": "the recipe's set-up (before_train) raised with compile off: X",
        "phases": {},
    }
    judge.stopped(facts, "eager", [eager, {"status": "running"}], False, 60, "")
    assert facts.status == "not-run" and "the eager twin (compile off) failed" in (facts.reason or "")
    facts = judge.planned_facts(p, "cpu-only (tiny model)", tmp_path, "limits")
    crashed = [RankResult(0, None, "/l0", killed="rank 1 exited -11"), RankResult(1, -11, "/l1")]
    judge.stopped(facts, "compiled", [{"status": "running"}, {}], False, 60, "", crashed)
    assert facts.status == "failed" and "rank 1 of the compiled run exited -11 without a record" in (facts.reason or "")
    facts = judge.planned_facts(p, "cpu-only (tiny model)", tmp_path, "limits")
    judge.stopped(facts, "reference", [{"status": "running", "phases": {"config": {"ok": True}}}], True, 60, "")
    assert facts.status == "not-run" and facts.fault == "environment"  # compile was off: never compile's doing
    assert "the reference run (compile off) gave no result after 60 s (done: config)" in (facts.reason or "")
    facts = judge.planned_facts(p, "cpu-only (tiny model)", tmp_path, "limits")
    judge.stopped(facts, "compiled", [{"status": "running", "phases": {"config": {"ok": True}}}], True, 60, "")
    assert facts.status == "timeout" and "compiled: done config" in (facts.reason or "")


def test_readable_guards() -> None:
    guard = "tensor 'dict.__getitem__(___stack0, list(dict.keys(___stack0))[0])' size mismatch at index 1. expected 79, actual 98"
    assert readable_guard(guard) == "an input tensor dim 1 changed 79 -> 98"
    assert readable_guard("tensor 'kwargs['input_ids']' size mismatch at index 1. expected 52, actual 69") == (
        "input_ids dim 1 changed 52 -> 69"
    )


def test_a_sourced_guard_reads_expression_then_where_and_drops_the_stack() -> None:
    raw = (
        "0/4: not ___dict_contains('return_dict', kwargs)  # return_dict_passed = kwargs.pop(\"return_dict\")  "
        "# transformers/utils/generic.py:1033 in wrapper\nUser stack trace:\n  File a.py, line 3, in f"
    )
    assert readable_guard(raw) == (
        "not ___dict_contains('return_dict', kwargs) "
        '(transformers/utils/generic.py:1033 in wrapper: return_dict_passed = kwargs.pop("return_dict"))'
    )
    assert "User stack" not in readable_guard(raw, 60)
    # a plain guard (no source, no stack) is left as it is: the near miss
    assert readable_guard(CACHE) == CACHE


def test_a_shortened_guard_ends_at_a_word_and_says_so() -> None:
    long = "kwargs['cache'].layers[7].is_initialized == False and " * 10
    cut = readable_guard(long, 80)
    assert len(cut) <= 80 and cut.endswith(" …")
    whole = " ".join(long.split())
    assert whole.startswith(cut[:-2]) and whole[len(cut) - 2] == " "  # a prefix of the whole guard, at a word
    assert shorten("short", 80) == "short"


@pytest.mark.parametrize(
    ("where", "name"),
    [
        ("/repo/recipes/x/model/a.py:12", "recipes/x/model/a.py:12"),
        ("/venv/lib/python3.12/site-packages/transformers/models/q.py:9", "library transformers/models/q.py:9"),
        ("/repo/.venv/lib/python3.12/site-packages/torch/nn/m.py:3", "library torch/nn/m.py:3"),
    ],
)
def test_graph_break_sites_name_user_and_library_code(where: str, name: str) -> None:
    assert sites.site_name(where, Path("/repo")) == name


def test_graph_break_counts_come_from_rank_zeros_trace(tmp_path: Path) -> None:
    trace = tmp_path / "trace"
    trace.mkdir()
    record = {"artifact": {"name": "dynamo_graph_break_reason", "encoding": "string"}}
    payload = "\tGraph break in user code at /repo/recipes/x/m.py:241\n\tGraph Break Reason: Dynamic shape operator\n"
    for rank, n in ((0, 3), (1, 5)):
        lines = "".join(f"V1202 00:00:00.0 1 f.py:1] {json.dumps(record)}\n{payload}" for _ in range(n))
        (trace / f"dedicated_log_torch_trace_rank_{rank}_x.log").write_text(lines)
    found, _ = sites.read_trace(trace, Path("/repo"))
    assert sum(s.count for s in found) == 3 and {s.site for s in found} == {"recipes/x/m.py:241"}


def test_the_layer_row_needs_the_rerun_command_when_it_did_not_pass() -> None:
    facts = RehearsalFacts(status="tool-error", label="cpu-only (tiny model)", wall_s=3.0)
    layer = to_layer(facts, "model-compile rehearse r", "/repo", "cpu-only")
    assert layer.status == "tool-error" and layer.next_step == "model-compile rehearse r"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--backend", "tensorrt"], "--backend 'tensorrt' is not one of"),
        (["--steps", "1"], "--steps must be >= 2"),
        (["--model-config", "/nonexistent/config.json"], "no such file"),
        (["--timeout", "0"], "--timeout must be > 0"),
        (["--world-size", "0"], "--world-size must be between 1 and 8"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    from model_compile.cli import main

    code = main(["rehearse", str(RECIPES / "lm_blocks"), *args])
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize(
    ("status", "flags", "code"),
    [
        ("failed", [], 1),
        ("passed", [], 0),
        ("not-run", [], 3),
        ("tool-error", [], 3),
        ("timeout", [], 1),
        ("not-run", ["--require-complete"], 1),
    ],
)
def test_rehearse_exits_non_zero_unless_it_passed_and_ends_with_its_verdict(
    status: str, flags: list[str], code: int, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from model_compile.cli import main
    from model_compile.hard.models import Environment
    from model_compile.hard.rehearsal import command as rehearse_mod

    facts = RehearsalFacts(status=status, label="cpu-only (tiny model)", reason="why")
    env = Environment(python="3.11", executable="python", label="cpu-only")
    monkeypatch.setattr(rehearse_mod, "standalone", lambda *a, **k: (facts, env, "model-compile rehearse r"))
    assert main(["rehearse", str(RECIPES / "lm_blocks"), *flags]) == code
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith(f"rehearsal: {status}")
    assert out.splitlines()[-1] == f"rehearsal {status} [cpu-only (tiny model)]; exit {code}"
    assert main(["rehearse", str(RECIPES / "lm_blocks"), "--format", "json", *flags]) == code
    assert json.loads(capsys.readouterr().out)["status"] == status  # JSON gets no extra line


def test_the_base_beside_the_head_marks_each_measure() -> None:
    from model_compile.hard.models import GraphBreakSite, RehearsalStep
    from model_compile.hard.rehearsal.base import versus
    from model_compile.hard.rehearsal.render import base_line

    hit = "torch._dynamo hit config.recompile_limit (8) function: 'forward' (loss.py:243) last reason: x"
    head = RehearsalFacts(
        status="failed",
        label="cpu-only (tiny model)",
        keys={"state_dict": "3 of 3 gain the '_orig_mod.' prefix (e.g. '_orig_mod.a')", "dcp": "3 unchanged"},
        steps=[RehearsalStep(step=1, shape="s", limit_hits=[hit])],
        graph_break_sites=[
            GraphBreakSite(site="library t/m.py:9", reason="r"),
            GraphBreakSite(site="r/x.py:2", reason="r"),
        ],
        graph_break_count=2,
        graph_break_site_count=2,
    )
    base = RehearsalFacts(
        status="failed",
        label="cpu-only (tiny model)",
        keys={"state_dict": "3 unchanged", "dcp": "3 unchanged"},
        steps=[RehearsalStep(step=0, shape="s", limit_hits=[hit])],
        graph_break_sites=[GraphBreakSite(site="r/x.py:2", reason="r")],
        graph_break_count=1,
        graph_break_site_count=1,
    )
    lines = versus(head, base, "abc")
    assert "state_dict keys: 3 of 3 gain the '_orig_mod.' prefix (e.g. '_orig_mod.a') - new with the change" in lines
    assert "recompile-limit hit in 'forward' (loss.py:243) - already there" in lines
    assert "1 graph-break site(s) (t/m.py:9) - new with the change" in lines
    assert not any(line.startswith("dcp keys") for line in lines)  # unchanged on both: nothing to mark
    head.versus_base, head.base_rev = lines, "abcdef0123456789"
    assert base_line(head).startswith("against the base abcdef012345: new with the change: state_dict keys")
    head.problems = ["recompile limit hit at optimizer step 0: forward"]
    assert summary_lines(head)[0] == base_line(head)  # before the failures: the first lines say what is new
    unrun = versus(head, RehearsalFacts(status="not-run", label="x", reason="no engine"), "abc")
    assert unrun == ["the base (abc) was not rehearsed (not-run: no engine); nothing of the head can be marked"]


def _tree_at(folder: Path) -> type:
    """A stand-in for hard.env.worktree.Worktree whose tree is `folder` (nothing materialized)."""
    import contextlib

    class Tree(contextlib.nullcontext):
        left_out: list[str] = []
        read_count = 1

        def __init__(self, root: Path, commit: str, **kwargs: object) -> None:
            super().__init__(folder)

        def digest(self) -> str:
            return "d"

    return Tree


def test_a_base_that_is_no_revision_is_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    from model_compile.cli import main

    code = main(["rehearse", str(RECIPES / "lm_blocks"), "--base", "no-such-rev-anywhere"])
    err = capsys.readouterr().err
    assert code == 2 and "--base no-such-rev-anywhere: not a revision" in err and err.count("\n") == 1


def test_a_cached_base_is_not_rehearsed_again(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import sys

    from model_compile.hard.env.interpreter import Interpreter
    from model_compile.hard.models import Environment
    from model_compile.hard.rehearsal import base, command

    cached = RehearsalFacts(status="passed", label="cpu-only (tiny model)", keys={"state_dict": "3 unchanged"})
    seen: list[str] = []
    monkeypatch.setattr(base, "only_the_switch", lambda top, commit: None)  # a base that differs in code
    monkeypatch.setattr(base, "load", lambda key: seen.append(key) or cached)
    monkeypatch.setattr("model_compile.hard.rehearsal.beside._rehearse_base", lambda *a: pytest.fail("ran again"))
    head = RehearsalFacts(status="passed", label="cpu-only (tiny model)", keys={"state_dict": "3 unchanged"})
    env = Environment(python="3.11", executable="python", label="cpu-only")
    interp = Interpreter(path=sys.executable, source="tool", reason="test")
    options = command.Options(base="HEAD")
    command.with_base(head, RECIPES / "lm_blocks", RECIPES.parent, interp, {}, env, tmp_path, options, None)
    assert seen and head.base is cached and head.base_rev == "HEAD"
    assert any(n.startswith("the base's rehearsal is the cached one of the ") for n in head.notes)
    assert head.versus_base[0] == "verdict of each on its own (before the comparison): head passed, base (HEAD) passed"


@pytest.mark.parametrize(
    ("compile_path", "said"),
    [("kit", True), ("none", False)],  # a base that compiles is rehearsed; one that does not, is not
)
def test_an_uncached_base_is_rehearsed_only_where_it_compiles_and_says_so_on_stderr(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    compile_path: str | None,
    said: bool,
) -> None:
    import sys
    from types import SimpleNamespace

    from model_compile.hard.env.interpreter import Interpreter
    from model_compile.hard.env.worktree import toplevel
    from model_compile.hard.models import Environment
    from model_compile.hard.rehearsal import base, command

    saved: list[RehearsalFacts] = []
    ran = RehearsalFacts(status="passed", label="cpu-only (tiny model)", keys={"state_dict": "3 unchanged"})
    monkeypatch.setattr(base, "only_the_switch", lambda top, commit: None)  # a base that differs in code
    monkeypatch.setattr(base, "load", lambda key: None)
    monkeypatch.setattr(base, "save", lambda key, facts: saved.append(facts))
    top = toplevel(RECIPES)
    monkeypatch.setattr("model_compile.hard.env.worktree.Worktree", _tree_at(top))
    found = SimpleNamespace(recipes=[SimpleNamespace(compile_path=compile_path)])
    monkeypatch.setattr("model_compile.analyze.analyze_path", lambda path, recipe=None: found)
    monkeypatch.setattr(command, "execute", lambda *args, **kwargs: (ran, "cmd"))
    head = RehearsalFacts(status="passed", label="cpu-only (tiny model)", keys={"state_dict": "3 unchanged"})
    env = Environment(python="3.11", executable="python", label="cpu-only")
    interp = Interpreter(path=sys.executable, source="tool", reason="test")
    options = command.Options(base="HEAD")
    command.with_base(head, RECIPES / "lm_blocks", RECIPES.parent, interp, {}, env, tmp_path, options, None)
    err = capsys.readouterr().err
    assert saved and head.base is saved[0]
    if said:
        assert (
            err.startswith("model-compile: rehearsing the base HEAD (") and "cached after by the files it reads" in err
        )
        assert err.count("\n") == 1 and head.base is ran
    else:
        assert err == "" and head.base.status == "not-run"
        assert head.versus_base == [
            "the base (HEAD) does not compile this recipe: everything the compiled run measured is new with the change"
        ]


def test_a_base_without_the_recipe_is_not_rehearsed(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import sys

    from model_compile.hard.env.interpreter import Interpreter
    from model_compile.hard.models import Environment
    from model_compile.hard.rehearsal import base, command

    monkeypatch.setattr(base, "only_the_switch", lambda top, commit: None)  # a base that differs in code
    monkeypatch.setattr(base, "load", lambda key: None)
    monkeypatch.setattr(base, "save", lambda key, facts: None)
    monkeypatch.setattr("model_compile.hard.env.worktree.Worktree", _tree_at(tmp_path / "empty"))
    head = RehearsalFacts(status="passed", label="cpu-only (tiny model)")
    env = Environment(python="3.11", executable="python", label="cpu-only")
    interp = Interpreter(path=sys.executable, source="tool", reason="test")
    command.with_base(
        head, RECIPES / "lm_blocks", RECIPES.parent, interp, {}, env, tmp_path, command.Options(base="HEAD"), None
    )
    assert capsys.readouterr().err == "" and head.base is not None and head.base.status == "not-run"
    assert "the recipe does not exist at HEAD" in (head.base.reason or "")


def test_a_base_without_the_recipe_names_its_own_revision_never_a_cached_ones(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Two bases without the recipe read the same (no) files: an agent's second review, against another base, was
    told the recipe 'does not exist at' the first base's revision, read back from the cache."""
    import sys

    from model_compile.hard.env.interpreter import Interpreter
    from model_compile.hard.models import Environment
    from model_compile.hard.rehearsal import base, command

    cache: dict[str, RehearsalFacts] = {}
    monkeypatch.setattr(base, "only_the_switch", lambda top, commit: None)
    monkeypatch.setattr(base, "load", lambda key: cache.get(key))
    monkeypatch.setattr(base, "save", lambda key, facts: cache.__setitem__(key, facts))
    monkeypatch.setattr("model_compile.hard.env.worktree.Worktree", _tree_at(tmp_path / "empty"))
    env = Environment(python="3.11", executable="python", label="cpu-only")
    interp = Interpreter(path=sys.executable, source="tool", reason="test")
    for rev in ("HEAD", "HEAD~0"):
        head = RehearsalFacts(status="passed", label="cpu-only (tiny model)")
        command.with_base(
            head, RECIPES / "lm_blocks", RECIPES.parent, interp, {}, env, tmp_path, command.Options(base=rev), None
        )
        assert head.base is not None and head.base.reason == f"the recipe does not exist at {rev}"
    assert cache == {}


def test_a_compiled_rank_that_stopped_before_comparing_is_read_without_a_crash(tmp_path: Path) -> None:
    records = _records([0.0], [0.0], [_micro(0, graphs=1)])
    broken = {
        "status": "tool-error",
        "stopped_at": "child",
        "reason": "the rehearsal child stopped: KeyError: 'x'",
        "phases": {},
    }
    records["compiled"].append(broken)
    p = _plan(tmp_path)
    facts = judge.planned_facts(p, "cpu-only (tiny model)", tmp_path, "limits")
    judge.stopped(facts, "compiled", records["compiled"], False, 60, "")
    judge.read(facts, p, records, tmp_path / "trace", RECIPES.parent)
    assert facts.status == "tool-error" and "(rank 1)" in (facts.reason or "")


def test_a_reused_out_folder_keeps_only_this_runs_trace(tmp_path: Path) -> None:
    from model_compile.hard.rehearsal.run import clear_stale

    (tmp_path / "trace").mkdir()
    old = [tmp_path / "trace" / "dedicated_log_torch_trace_a1.log", tmp_path / "record-compiled-rank0.json"]
    old += [tmp_path / "tensors-eager-rank0.pt", tmp_path / "init-reference-rank1.pt"]
    kept = [tmp_path / "trace" / "notes.txt", tmp_path / "spec.json", tmp_path / "logs.txt"]
    for path in old + kept:
        path.write_text("x")
    clear_stale(tmp_path)
    assert [p.exists() for p in old] == [False] * len(old)
    assert all(p.exists() for p in kept)


def test_the_text_says_how_many_site_and_reason_lines_follow_when_a_site_breaks_for_two_reasons() -> None:
    from model_compile.hard.models import GraphBreakSite

    pairs = [GraphBreakSite(site="library t/m.py:9", reason=f"reason {i}", count=1) for i in range(13)]
    pairs.append(GraphBreakSite(site="r/x.py:2", reason="r", count=2))
    facts = RehearsalFacts(
        status="passed",
        label="cpu-only (tiny model)",
        graph_break_sites=pairs,
        graph_break_count=15,
        graph_break_site_count=2,
    )
    lines = text(facts, "rehearse").splitlines()
    assert "graph breaks: 15 at 2 site(s) in 14 site and reason pair(s) (rank 0's trace)" in lines
    assert "  2 more site and reason pair(s) (--format json)" in lines
    one = RehearsalFacts(status="passed", label="x", graph_break_sites=pairs[-1:], graph_break_count=2)
    one.graph_break_site_count = 1
    assert "graph breaks: 2 at 1 site(s) (rank 0's trace)" in text(one, "rehearse").splitlines()


@pytest.mark.parametrize(
    ("feed", "named"),
    [
        (
            {
                "mode": "batches",
                "reason": "the recipe's data path failed on the rehearsal's synthetic rows (r/pre.py:148: ValueError: "
                "no budget.); the real run may fail there too, with the real data and processor in this environment",
                "failure": "r/pre.py:148: ValueError: no budget.",
                "batches": "rows of up to 512 tokens, batch 1",
            },
            True,
        ),
        # near misses: the images dropped (not a failure of the data code), and the recipe's own batches
        (
            {
                "mode": "batches",
                "reason": "the recipe's data path dropped every image: 9 synthetic rows read",
                "batches": "rows of up to 512 tokens, batch 1",
            },
            False,
        ),
        ({"mode": "rows", "reason": ""}, False),
    ],
)
def test_a_data_path_that_failed_is_a_fix_to_make_before_the_figures_count(
    tmp_path: Path, feed: dict[str, str], named: bool
) -> None:
    records = _records([1e-2, 1e-2], [1e-2, 1e-2], [_micro(0, graphs=3), _micro(1)])
    records["compiled"][0]["feed"] = feed
    facts = _read(tmp_path, records)
    found = [f.cause + " " + f.fix for f in facts.fixes if "data path failed on the rehearsal's rows" in f.cause]
    assert bool(found) is named
    if named:
        assert "rows: r/pre.py:148: ValueError: no budget.)" in found[0] and "model-compile rehearse " in found[0]


def test_a_pass_near_the_recompile_limit_says_so_on_its_row() -> None:
    near = (
        "fwd_at_258 (kit/loss.py:258): 8 compiled variants of 8 after 8 optimizer steps, one per new input size: "
        "a longer run, with more sizes than these steps had, hits the limit and runs this frame eager from then on"
    )
    facts = RehearsalFacts(status="passed", label="x", near_limit=[near, "g (m.py:1): 7 compiled variants of 8"])
    row = to_layer(facts, "cmd", "/r", "cpu-only")
    assert row.status == "passed" and row.reason == (
        "near the recompile limit: fwd_at_258 (kit/loss.py:258): 8 compiled variants of 8 after 8 optimizer steps "
        "(and 1 more frame(s)); a longer run with new sizes may hit it"
    )
    # near misses: a plain pass has no reason; a failure keeps its own reason and the rerun command
    assert to_layer(RehearsalFacts(status="passed", label="x"), "cmd", "/r", "cpu-only").reason is None
    failed = to_layer(RehearsalFacts(status="failed", label="x", reason="r", near_limit=[near]), "cmd", "/r", "c")
    assert failed.reason == "r" and failed.next_step == "cmd"


def test_a_base_that_differs_only_in_the_compile_switch_is_not_rehearsed_again(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import sys

    from model_compile.hard.env.interpreter import Interpreter
    from model_compile.hard.models import Environment
    from model_compile.hard.rehearsal import base, command

    monkeypatch.setattr(base, "only_the_switch", lambda top, commit: ["recipes/r/configs/stage2.yaml"])
    monkeypatch.setattr(base, "load", lambda key: pytest.fail("no cache lookup"))
    monkeypatch.setattr("model_compile.hard.env.worktree.Worktree.__enter__", lambda self: pytest.fail("no worktree"))
    head = RehearsalFacts(status="passed", label="cpu-only (tiny model)")
    env = Environment(python="3.11", executable="python", label="cpu-only")
    interp = Interpreter(path=sys.executable, source="tool", reason="test")
    command.with_base(
        head, RECIPES / "lm_blocks", RECIPES.parent, interp, {}, env, tmp_path, command.Options(base="HEAD"), None
    )
    assert capsys.readouterr().err == "" and head.base is None and head.base_rev == "HEAD"
    assert head.versus_base == [
        "the base (HEAD) differs from what was rehearsed only in recipes/r/configs/stage2.yaml: documentation, "
        "comments or docstrings, or a stage's compile switch, which the rehearsal sets itself, so the base's "
        "rehearsal would be this same run (not run again): nothing is new with the change, everything measured here "
        "is already there at the base"
    ]
    assert summary_lines(head)[0].startswith("against the base HEAD: the base (HEAD) differs from what was rehearsed")


def test_a_head_that_did_not_train_has_no_measure_marked_against_the_base() -> None:
    """The nested-checkpoint branch's head failed eager before a step: its keys were listed `-` as new with the
    change and the base's limit hits as gone with it."""
    from model_compile.hard.rehearsal import base

    head = RehearsalFacts(status="not-run", label="cpu-only (tiny model)", reason="the fp32 reference failed")
    at_base = RehearsalFacts(status="failed", label="cpu-only (tiny model)", keys={"state_dict": "3 unchanged"})
    (line,) = base.versus(head, at_base, "main")
    assert line.endswith("the head did not train, so none of its measures can be marked against the base's")

"""Fixes proven before they are printed: the compiled twin rerun with each fix the rehearsal can apply at run
time, on the same batches, judged against the same eager twin and reference.

A fix read off a root cause (reading/fixes.py) with an `override` is tried: its rerun writes under
`<out>/fix-N/`, reads the rehearsal's other twins, and is judged like the rehearsal. It is **proven** when it
improves what it aims at (fewer recompile-limit hits, fewer recompiles, more of the forward work compiled or a
hot path no longer eager) with parity within the bound, keys unchanged and nothing made worse; **disproven**
otherwise, with its figures. A fix that needs a code change, or whose rerun did not run, is `not tried` with
the reason. At most MAX_TRIALS reruns; `MODEL_COMPILE_FIX_TRIALS=off` tries none (every fix then says so).
"""

from __future__ import annotations

import copy
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

from model_compile.hard.env.interpreter import Interpreter
from model_compile.hard.models import Fix, RehearsalFacts
from model_compile.hard.rehearsal import run as rehearsal
from model_compile.hard.rehearsal.planning.plan import Plan
from model_compile.hard.rehearsal.reading import coverage

MAX_TRIALS = 3
TRIALS_ENV = "MODEL_COMPILE_FIX_TRIALS"


def _hits(facts: RehearsalFacts) -> int:
    return len({h.split(" last reason", 1)[0] for s in facts.steps for h in s.limit_hits})


def _parity_ok(facts: RehearsalFacts) -> bool:
    return not any(p.startswith(("gradients differ", "loss differs")) for p in facts.problems) and bool(facts.steps)


def figures(before: RehearsalFacts, after: RehearsalFacts) -> dict[str, Any]:
    worst = max((s.grad_err for s in after.steps if s.grad_err is not None), default=None)
    return {
        "limit_hits": [_hits(before), _hits(after)],
        "recompiles": [before.recompile_count, after.recompile_count],
        "compiled_share": [before.compiled_share, after.compiled_share],
        "hot_path_eager": [len(before.coverage_failures), len(after.coverage_failures)],
        "graph_breaks": [before.graph_break_count, after.graph_break_count],
        "parity": "within the bound" if _parity_ok(after) else "outside the bound",
        "worst_grad_err": worst,
        "keys": "unchanged" if not after.key_failures else "; ".join(after.key_failures[:2]),
    }


def _pct(value: Any) -> str:
    return "-" if value is None else f"{value:.0%}"


def judge(fix: Fix, before: RehearsalFacts, after: RehearsalFacts) -> None:
    """Proven, disproven or not tried, with the rerun's figures in words."""
    fix.status = after.status
    if "ConstraintViolation" in f"{after.reason} {after.detail}" and (fix.override or {}).get("mark_dynamic"):
        # dynamo refused the mark: the code fixes that size to a constant, so marking it cannot help
        fix.tried = "disproven"
        fix.reason = (
            "the code specializes the size it marks (torch._dynamo raised ConstraintViolationError in the rerun): "
            "a Python loop or branch over that size has to change first"
        )
        return
    if after.status not in ("passed", "failed") or not after.steps:
        fix.tried = "not tried"
        fix.reason = f"its rerun did not run ({after.status}: {after.reason})"
        return
    fig = figures(before, after)
    fix.figures = fig
    hits, recompiles, share, hot = fig["limit_hits"], fig["recompiles"], fig["compiled_share"], fig["hot_path_eager"]
    # what a fix aims at must go, not only shrink: every limit hit, half the recompiles, the eager hot path
    better = {
        "limit_hits": hits[0] > 0 and hits[1] == 0,
        "recompiles": recompiles[0] > 0 and recompiles[1] <= recompiles[0] // 2,
        "coverage": (hot[0] > 0 and hot[1] == 0)
        or (share[0] is not None and share[1] is not None and share[1] > share[0] + 0.1),
    }
    nothing = any(p.startswith(("nothing was compiled", "no graph was compiled")) for p in after.problems)
    worse = (
        nothing  # fewer recompiles because nothing compiles is no fix
        or hits[1] > hits[0]
        or (share[0] is not None and share[1] is not None and share[1] < share[0] - 0.1)
    )
    improved = any(better[a] for a in fix.aims or better)
    held = fig["parity"] == "within the bound" and fig["keys"] == "unchanged"
    words = (
        f"limit hits {hits[0]} -> {hits[1]}, recompiles {recompiles[0]} -> {recompiles[1]}, compiled share "
        f"{_pct(share[0])} -> {_pct(share[1])}, parity {fig['parity']}, keys {fig['keys']}"
    )
    fig["applied"] = list(after.fix_applied)  # what the override changed in the rerun, as the child saw it
    # a trade the net share hides: what ran compiled before and leaves compile with the fix
    left = coverage.left_with(after, before, "the fix")
    fig["left_compile"] = left
    if left:
        words += f"; with it, {left[0]}" + (f" (+{len(left) - 1} more, --format json)" if len(left) > 1 else "")
    if improved and held and not worse:
        # what the fix leaves failing is part of its proof (a failure it does not aim at, said once)
        still = f"; its rerun still fails: {after.reason}" if after.status == "failed" and after.reason else ""
        fix.tried, fix.reason = "proven", words + still
    else:
        why = (
            "nothing compiled with it"
            if nothing
            else "what it aims at did not go"
            if not improved
            else "it broke parity or keys"
            if not held
            else "it made something worse"
        )
        fix.tried, fix.reason = "disproven", f"{why}: {words}"


def try_fixes(
    facts: RehearsalFacts,
    plan: Plan,
    interp: Interpreter,
    env: dict[str, str],
    out_dir: Path,
    timeout_s: float,
    skip: dict[int, str] | None = None,
) -> None:
    """Rerun the compiled twin with each fix that can be applied at run time; mark every fix. `skip`: fixes (by
    index in facts.fixes) not rerun here, with the reason."""
    for index, why in (skip or {}).items():
        facts.fixes[index].tried, facts.fixes[index].reason = "not tried", why
    todo = [f for i, f in enumerate(facts.fixes) if f.override and i not in (skip or {})]
    if not todo:
        return
    if os.environ.get(TRIALS_ENV, "on").lower() in ("0", "off", "false", "no"):
        for fix in todo:
            fix.reason = f"not tried ({TRIALS_ENV}=off): `model-compile rehearse` without it tries it"
        return
    if facts.status not in ("passed", "failed") or not facts.steps:
        for fix in todo:
            fix.reason = "not tried: the rehearsal itself did not finish, so there is nothing to compare a rerun with"
        return
    done = {
        twin: [rehearsal.read_record(out_dir / f"record-{twin}-rank{r}.json") for r in range(plan.world.world_size)]
        for twin in ("reference", "eager")
        if (out_dir / f"record-{twin}-rank0.json").exists()
    }
    done["prepare"] = [rehearsal.read_record(out_dir / "record-prepare-rank0.json")]
    for i, fix in enumerate(todo):
        if i >= MAX_TRIALS:
            fix.reason = f"not tried: {MAX_TRIALS} fixes were tried already (rerun `rehearse` after applying one)"
            continue
        trial_dir = out_dir / f"fix-{i + 1}"
        spec = copy.deepcopy(plan.spec)
        spec.update(fix=fix.override, out_dir=str(trial_dir), twins_dir=str(out_dir))
        if fix.override.get("compile_targets"):
            # the fix compiles its own targets in place of the recipe's compile call (and the regions that call
            # kept eager): the rerun's target check and coverage roles are the fix's scope, not the recipe's
            spec.update(targets=list(fix.override["compile_targets"]), disabled=[], disable_sites={})
        spec.pop("changed_lines", None)
        after = rehearsal.run(
            replace(plan, spec=spec), interp, env, trial_dir, timeout_s, facts.label, done=done, only=["compiled"]
        )
        judge(fix, facts, after)

"""Control runs, where the frames of a failure do not decide whose it is.

A twin that raised while the tool's instruments were on (the coverage meter counting that micro-step, the hook on
every compiled graph, the changed-line counter) is run again without them, the same plan otherwise. When the
control trains, the failure was the instrument's: the rehearsal's result is the control's (its figures, without
the coverage map, which is said not measured and why) and the attribution says the tool's instrument, with the
control. When the control fails the same way, the instruments are ruled out.
"""

from __future__ import annotations

import copy
from dataclasses import replace
from pathlib import Path
from typing import Any

from model_compile.hard.env.interpreter import Interpreter
from model_compile.hard.models import Attribution, RehearsalFacts
from model_compile.hard.rehearsal import run as rehearsal
from model_compile.hard.rehearsal.planning.plan import Plan

FOLDER = "control-without-instruments"


def _stopped(out_dir: Path, world: int) -> dict[str, Any] | None:
    for twin in ("reference", "eager", "compiled"):
        for rank in range(world):
            rec = rehearsal.read_record(out_dir / f"record-{twin}-rank{rank}.json")
            if rec.get("status") in ("failed", "not-run", "tool-error"):
                return rec
    return None


def _signature(rec: dict[str, Any] | None) -> tuple[str, str]:
    frames = (rec or {}).get("raised_in") or {}
    return str((rec or {}).get("twin")), str(frames.get("exception"))


def without_instruments(
    facts: RehearsalFacts, plan: Plan, interp: Interpreter, env: dict[str, str], out_dir: Path, timeout_s: float
) -> RehearsalFacts:
    """The facts to report: the control's when the failure was the instruments', else `facts` with the control
    said in its attribution."""
    rec = _stopped(out_dir, plan.world.world_size)
    instruments = list((rec or {}).get("instruments") or [])
    if rec is None or not instruments or facts.status not in ("failed", "not-run", "tool-error"):
        return facts
    if facts.attribution and facts.attribution[0].owner not in ("recipe", "tool"):
        return facts  # a stand-in's or the environment's, decided by what the child saw: no control changes it
    spec: dict[str, Any] = copy.deepcopy(plan.spec)
    spec["coverage"] = False
    spec["coverage_off"] = "a control run without the tool's instruments"
    spec.pop("changed_lines", None)
    control_dir = out_dir / FOLDER
    done: dict[str, list[dict[str, Any]]] | None = None
    only = None
    if rec.get("twin") == "compiled":  # the twins before it ran clean: the compiled twin alone, against them
        world = plan.world.world_size
        done = {
            twin: [rehearsal.read_record(out_dir / f"record-{twin}-rank{r}.json") for r in range(world)]
            for twin in ("reference", "eager")
            if (out_dir / f"record-{twin}-rank0.json").exists()
        }
        done["prepare"] = [rehearsal.read_record(out_dir / "record-prepare-rank0.json")]
        spec.update(out_dir=str(control_dir), twins_dir=str(out_dir))
        only = ["compiled"]
    control = rehearsal.run(
        replace(plan, spec=spec), interp, env, control_dir, timeout_s, facts.label, done=done, only=only
    )
    said = ", ".join(instruments)
    ran = control.status in ("passed", "failed") and bool(control.steps)
    same = _signature(_stopped(control_dir, plan.world.world_size)) == _signature(rec)
    if ran and not same:
        att = Attribution(
            failure=str(facts.reason),
            owner="tool",
            part="an instrument",
            evidence=[
                f"it raised under the tool's instruments ({said})",
                *(facts.attribution[0].evidence[:2] if facts.attribution else []),
            ],
            control=f"the same run without them trained: {control.status} ({control_dir})",
            ruled_out=["the recipe (its run trains without the instruments)"],
            supply="nothing to supply: the figures are the control run's; the coverage map was not measured",
        )
        control.attribution.insert(0, att)
        control.coverage_unmeasured.insert(
            0,
            f"coverage not measured: with the tool's instruments ({said}) the run raised {facts.reason}; without them "
            "it trained, so these figures are that run's and the instrument's failure is model-compile's own",
        )
        control.notes.insert(
            0, f"the rehearsal with its instruments on stopped ({out_dir}): the control run is reported"
        )
        return control
    if facts.attribution:
        att = facts.attribution[0]
        att.control = f"the same run without the tool's instruments ({said}): {control.status}: {control.reason}"
        if same:
            att.ruled_out.append("the tool's instruments (the run without them fails the same way)")
            att.not_ruled_out = [n for n in att.not_ruled_out if "instruments" not in n]
    return facts

"""The one place that reads a hard-validation report.

`read_hard()` accepts a `HardReport` (or its JSON as a dict, e.g. a recorded
fixture) and returns the facts the review report needs. It reads fields by
name with defaults, so fields the hard runner gains later (the interpreter,
per-layer `where`/`command`) are picked up here without touching the rest of
the report code; fields it lacks today are derived.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from model_compile.discover.recipes import repo_root_of
from model_compile.findings.models import RecipeReport
from model_compile.hard.env import interpreter
from model_compile.hard.env.torch_pin import version_note
from model_compile.hard.layers.pipeline import ELSEWHERE, elsewhere_commands, in_repo, pytest_command
from model_compile.hard.layers.plan import plan, rebuilt
from model_compile.hard.layers.refusal import smoke_refusal
from model_compile.hard.rehearsal import command as rehearse
from model_compile.hard.rehearsal.reading.fixes import shorten
from model_compile.hard.stages import labelled_prerequisites
from model_compile.parse import recipe_test_options as conventions
from model_compile.report.models import LayerRow

LAYER_ORDER = ("soft", "structure", "rehearsal", "smoke", "impact")


@dataclass
class HardFacts:
    """What a hard run established, in the report's terms."""

    where: str  # cpu-only / accelerator:<name>
    cpu_only: bool
    interpreter: str | None
    verdict: str
    summary: str
    layers: list[LayerRow] = field(default_factory=list)
    runtime: dict[str, Any] = field(default_factory=dict)
    gaps: list[str] = field(default_factory=list)
    trace: dict[str, Any] | None = None
    out_dir: str | None = None
    raw: dict[str, Any] = field(default_factory=dict)
    torch_note: str | None = None  # a runtime layer ran on another torch than the repository pins


def _as_dict(report: Any) -> dict[str, Any]:
    if report is None:
        return {}
    if hasattr(report, "model_dump"):
        return dict(report.model_dump(mode="json"))
    return dict(report)


def _base(name: str) -> str:
    return name.split(":", 1)[0]


def read_hard(report: Any, recipe_root: Path | None = None, compile_path: str | None = None) -> HardFacts:
    """Facts of one hard run; layers it never reached are listed as 'not-reached' with their commands."""
    data = _as_dict(report)
    env = data.get("environment") or {}
    where = env.get("label") or ("cpu-only" if env.get("cpu_only", True) else "accelerator")
    rows: list[LayerRow] = []
    for layer in data.get("layers") or []:
        status = layer.get("status") or "not-run"
        ran = status not in ("not-run", "missing", "unavailable", "not-reached", "tool-error")
        # Older reports lack `started`: a layer that passed/failed/was skipped ran; one with a duration started.
        started = bool(layer.get("started")) or ran or bool(layer.get("duration_s"))
        command = layer.get("command")
        if not ran and layer.get("next_step"):
            command = layer.get("next_step")
        cwd = layer.get("cwd")
        if command and cwd and " -m pytest " in f"{command} " and not command.startswith(("cd ", "on a machine")):
            command = f"cd {shlex.quote(cwd)} && {command}"
        elsewhere: list[str] = []
        if not ran and command and command.startswith("on a machine") and layer.get("accelerator_commands"):
            # 'on a machine with GPUs/NPUs, from the repository root:' and one command per stage
            command, elsewhere = command.split(": ", 1)[0] + ":", list(layer["accelerator_commands"])
        rows.append(
            LayerRow(
                name=layer.get("name", "?"),
                status=status if status in _STATUSES else "not-run",  # type: ignore[arg-type]
                where=(layer.get("where") or layer.get("label") or "-") if started else "-",
                duration_s=layer.get("duration_s") if started else None,
                command=command,
                reason=_first_line(layer.get("reason")) or _skips(status, layer.get("counts")),
                started=started,
                commands=elsewhere,
                prerequisites=list(layer.get("prerequisites") or []) if not ran else [],
                existing=layer.get("existing"),
                stopped_by=layer.get("stopped_by"),
            )
        )
    seen = {_base(r.name) for r in rows}
    stopped = any(r.status in ("failed", "timeout") for r in rows)
    if recipe_root is not None:
        for row in planned_layers(recipe_root, compile_path):
            if _base(row.name) not in seen:
                if row.status != "missing" and stopped:
                    row.status, row.reason = "not-reached", "not reached: an earlier layer failed"
                elif row.status != "missing":
                    row.reason = "not part of this hard run (run its command)"
                rows.append(row)
        order = {name: i for i, name in enumerate(LAYER_ORDER)}
        rows.sort(key=lambda r: order.get(_base(r.name), len(order)))
    return HardFacts(
        where=where,
        cpu_only=bool(env.get("cpu_only", True)),
        interpreter=data.get("interpreter") or env.get("executable"),
        verdict=data.get("verdict", "incomplete"),
        summary=data.get("summary", ""),
        layers=rows,
        runtime=data.get("runtime") or {},
        gaps=list(data.get("gaps") or []),
        trace=data.get("trace"),
        out_dir=data.get("out_dir"),
        raw=data,
        torch_note=data["torch_note"] if "torch_note" in data else _torch_note(data, rows),
    )


def _torch_note(data: dict[str, Any], rows: list[LayerRow]) -> str | None:
    """What a report written before `torch_note` existed would have said, from its own fields."""
    if not any(r.started for r in rows if r.name != "soft"):
        return None
    return version_note(Path(data.get("repo_root") or "."), (data.get("environment") or {}).get("torch"))


_STATUSES = {"passed", "failed", "timeout", "missing", "not-run", "unavailable", "skipped", "not-reached", "tool-error"}


def _skips(status: str, counts: dict[str, Any] | None) -> str | None:
    """A passed layer that skipped some tests says so: `2 passed, 1 skipped: <the first skip's reason>`."""
    if status != "passed" or not counts or not counts.get("skipped"):
        return None
    why = _short_test_id((counts.get("skip_reasons") or [""])[0])
    if why.startswith("test_engine_structure: model-compile is not importable here"):
        # the skip of templates/recipe_tests/asserts.py.j2: that test runs the static review the soft layer ran
        why += " (the soft layer of this run ran that review)"
    return f"{counts.get('passed', 0)} passed, {counts['skipped']} skipped" + (f": {why}" if why else "")


def _short_test_id(reason: str) -> str:
    """`recipes.x.tests.test_structure.test_engine_structure: why` -> `test_engine_structure: why` (the row is
    short; the test file is the layer's)."""
    name, sep, why = reason.partition(": ")
    if sep and "." in name and " " not in name:
        return f"{name.rsplit('.', 1)[-1]}: {why}"
    return reason


def _first_line(text: str | None) -> str | None:
    if not text:
        return None
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return shorten(lines[0], 300) if lines else None


def planned_layers(
    recipe_root: Path,
    compile_path: str | None,
    python: str | None = None,
    stages: list[str] | None = None,
    merged: tuple[str, set[str]] | None = None,
    facts: RecipeReport | None = None,
) -> list[LayerRow]:
    """The runtime layers of a recipe, not run, each with the exact command that runs it (`merged`: the target and
    the files of a merge result the review compares, where a test the checkout lacks may be).

    The same plan `validate --hard` runs: the options the recipe's conftest.py registers
    (opt-in switches such as `--run-smoke`, `--world-size`), in the interpreter it would choose,
    one smoke command per stage that enables compile or that the change touches (`stages`).
    A smoke whose helper refuses a CPU device (read from its source, nothing run) is a command
    for a machine with GPUs/NPUs: `python` from the repository root, no path of this machine.
    """
    recipe_root = recipe_root.resolve()
    repo_root = repo_root_of(recipe_root) or recipe_root.parent
    interp = interpreter.resolve(repo_root, python)
    conv = conventions.read(recipe_root, repo_root)
    rows: list[LayerRow] = []
    rebuild = partial(rebuilt, facts)  # the overrides each stage's smoke needs besides the switch (MC211)
    for spec in plan(recipe_root, None, None, [], compile_path, conv, 0, repo_root, stages, rebuilt=rebuild):
        if spec.name == "smoke" and compile_path not in (None, "none"):
            command = rehearse.base_command(recipe_root, interp)
            rows.append(LayerRow(name="rehearsal", status="not-run", where="-", command=command))
        test = recipe_root / spec.test_file
        rel = os.path.relpath(test, repo_root)
        if test.is_file():
            prereqs = labelled_prerequisites(spec.stage_runs)
            if spec.name == "smoke" and smoke_refusal(recipe_root, repo_root, spec.test_file) is not None:
                # As read_hard's rows for a refused smoke: the head line, then one command per stage.
                head = ELSEWHERE.rstrip()
                commands = elsewhere_commands(spec, recipe_root, repo_root)
            else:
                runs = spec.accelerator_runs or [
                    spec.accelerator_options if spec.accelerator_options is not None else spec.options
                ]
                commands = [in_repo(repo_root, pytest_command(interp, rel, list(options))) for options in runs]
                head = commands[0] if len(commands) == 1 else "one command per stage:"
                commands = commands if len(commands) > 1 else []
            rows.append(
                LayerRow(
                    name=spec.name,
                    status="not-run",
                    where="-",
                    # As read_hard's rows: with a list of commands, `command` heads it.
                    command=head,
                    commands=commands,
                    prerequisites=prereqs,
                )
            )
        elif merged is not None and rel in merged[1]:
            # The change is reviewed as its merge: the target's copy of the test is in the result, not on disk.
            rows.append(
                LayerRow(
                    name=spec.name,
                    status="not-run",
                    where="-",
                    reason=f"{rel} is in the merge result (of the change into {merged[0]}), not in this checkout: "
                    "`review --hard` runs it there",
                )
            )
        else:
            rows.append(
                LayerRow(
                    name=spec.name,
                    status="missing",
                    where="-",
                    command=spec.generate_hint or None,
                    reason=f"{rel} does not exist",
                )
            )
    return rows

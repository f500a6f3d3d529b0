"""The runtime layers after soft review: every layer listed, in order, each with its command.

Every layer runs when the interpreter passed preflight, whatever failed before it: a failure stops only the
layers it makes meaningless (`STOPS`: a failed smoke run stops the impact tests, which measure a compile that
runs), and the table says which stopped which. On a change, a layer that fails is run again on the change's
base (a temporary worktree, the same interpreter): failing there too, it is `existing`, not the change's.
A layer not run is `not-run` with the reason and still carries the exact command a person can paste.
Commands name the interpreter by its absolute path.
"""

from __future__ import annotations

import json
import os
import shlex
from dataclasses import dataclass
from pathlib import Path

from model_compile.hard.env import proc
from model_compile.hard.env.interpreter import Interpreter
from model_compile.hard.env.preflight import Preflight
from model_compile.hard.layers import plan as layers
from model_compile.hard.layers.junit import parse_junit
from model_compile.hard.layers.plan import LayerSpec
from model_compile.hard.models import HardReport, LayerResult, RuntimeRecord
from model_compile.hard.stages import labelled_prerequisites
from model_compile.hard.trace import summarise

# A failed layer -> the later layers it makes meaningless (by name; impact:<file> counts as impact).
STOPS: dict[str, tuple[str, ...]] = {"smoke": ("impact",)}
TRACE_ENV = "TORCH_TRACE"
TRACED_LAYERS = ("smoke", "impact")  # layers that compile: each gets its own TORCH_TRACE folder


@dataclass
class Context:
    """What every layer of one run shares."""

    recipe_root: Path
    repo_root: Path
    interp: Interpreter
    env: dict[str, str]
    out_dir: Path
    timeout_s: float
    label: str
    cpu_only: bool
    html: bool = False  # --trace: also render tlparse's HTML where tlparse is installed
    probe_dir: Path | None = None  # on the child's PYTHONPATH (the tests import model_compile); printed in commands
    base_rev: str | None = None  # the change's base: a failing test layer is run there too (existing or new)
    # the recipe's compile switch as this run turns it on, when every stage keeps compile off (the files say so):
    # a test layer that fails without that switch failed with compile off, so compile did not cause it
    compile_off_switch: str | None = None

    def prefix(self) -> list[str]:
        """`PYTHONPATH=<probe>` when the probe stands in for model_compile in the recipe's tests."""
        if self.probe_dir is None:
            return []
        return [f"PYTHONPATH={self.probe_dir}"]

    def where(self) -> str:
        """The label and the interpreter, e.g. 'cpu-only, /repo/.venv/bin/python'."""
        return f"{self.label}, {self.interp.path}"


def pytest_command(interp: Interpreter, rel_test: str, options: list[str], prefix: list[str] | None = None) -> str:
    """The pasteable pytest call: absolute interpreter path, the test file, the options."""
    return shlex.join([*(prefix or []), interp.path, "-m", "pytest", rel_test, "-q", *options])


def in_repo(repo_root: Path, command: str) -> str:
    """`cd <repo> && <command>`."""
    return f"cd {shlex.quote(str(repo_root))} && {command}"


def _slug(name: str) -> str:
    return name.replace(":", "-")


def _base(spec: LayerSpec, ctx: Context, status: str) -> LayerResult:
    rel_test = os.path.relpath(ctx.recipe_root / spec.test_file, ctx.repo_root)
    layer = LayerResult(
        name=spec.name,
        status=status,  # type: ignore[arg-type]
        label=ctx.label,
        command=pytest_command(ctx.interp, rel_test, spec.options, ctx.prefix()),
        cwd=str(ctx.repo_root),
        options_note=list(spec.notes),
    )
    if spec.accelerator_runs:
        layer.accelerator_commands = accelerator_commands(spec, ctx)
        layer.prerequisites = labelled_prerequisites(spec.stage_runs)
        if ctx.probe_dir is not None:
            layer.options_note.append(
                "the recipe's tests import model_compile: on the machine with GPUs/NPUs, the repository's environment "
                "needs model-compile installed (the probe on PYTHONPATH here is this machine's)"
            )
    return layer


def _missing(spec: LayerSpec, ctx: Context) -> LayerResult | None:
    rel_test = os.path.relpath(ctx.recipe_root / spec.test_file, ctx.repo_root)
    if (ctx.recipe_root / spec.test_file).is_file():
        return None
    return LayerResult(
        name=spec.name,
        status="missing",
        label=ctx.label,
        cwd=str(ctx.repo_root),
        reason=f"{rel_test} does not exist",
        next_step=spec.generate_hint or None,
    )


def not_run(spec: LayerSpec, ctx: Context, reason: str, next_step: str | None = None) -> LayerResult:
    """A layer that was not run, with its command and why."""
    if spec.runner is not None:
        return LayerResult(
            name=spec.name,
            status="not-run",
            label=ctx.label,
            command=spec.command,
            cwd=str(ctx.repo_root),
            where="-",
            reason=reason,
            next_step=next_step or spec.command,
        )
    missing = _missing(spec, ctx)
    if missing is not None:
        return missing
    layer = _base(spec, ctx, "not-run")
    layer.reason = reason
    if next_step is None and spec.needs_accelerator and ctx.cpu_only:
        next_step = accelerator_command(spec, ctx)  # this machine would be refused: the step is on one with GPUs/NPUs
    layer.next_step = next_step or in_repo(ctx.repo_root, layer.command or "")
    return layer


ELSEWHERE = "on a machine with GPUs/NPUs, from the repository root: "


def accelerator_commands(spec: LayerSpec, ctx: Context) -> list[str]:
    """The smoke commands for a machine with GPUs/NPUs, one per stage (opt-in switch, stage, world size from
    its mesh, compile on). They name no path of this machine: `python` is that machine's environment."""
    return elsewhere_commands(spec, ctx.recipe_root, ctx.repo_root)


def elsewhere_commands(spec: LayerSpec, recipe_root: Path, repo_root: Path) -> list[str]:
    """`accelerator_commands` from the two roots alone (the report's plan has no run context)."""
    rel_test = os.path.relpath(recipe_root / spec.test_file, repo_root)
    runs = spec.accelerator_runs or [spec.accelerator_options if spec.accelerator_options is not None else spec.options]
    return [shlex.join(["python", "-m", "pytest", rel_test, "-q", *options]) for options in runs]


def accelerator_command(spec: LayerSpec, ctx: Context) -> str:
    """The next step of a smoke that needs an accelerator: every stage's command, on that machine."""
    return ELSEWHERE + " ; ".join(accelerator_commands(spec, ctx))


def run_pytest_layer(spec: LayerSpec, ctx: Context) -> LayerResult:
    """Run one layer's test file in the chosen interpreter and classify the outcome."""
    missing = _missing(spec, ctx)
    if missing is not None:
        return missing
    slug = _slug(spec.name)
    rel_test = os.path.relpath(ctx.recipe_root / spec.test_file, ctx.repo_root)
    junit = ctx.out_dir / f"junit-{slug}.xml"
    env = dict(ctx.env)
    if spec.name.split(":")[0] in TRACED_LAYERS:
        env[TRACE_ENV] = str(ctx.out_dir / "trace" / slug)
    cmd = [
        ctx.interp.path,
        "-m",
        "pytest",
        rel_test,
        "-q",
        "-p",
        "no:cacheprovider",
        f"--junitxml={junit}",
        *spec.options,
    ]
    log = ctx.out_dir / f"{slug}.log"
    result = proc.run(cmd, ctx.repo_root, env, ctx.timeout_s, log)
    counts = parse_junit(junit)
    layer = _base(spec, ctx, "passed")
    layer.started, layer.where = True, ctx.where()
    layer.exit_status = result.exit_status
    layer.duration_s = round(result.duration_s, 2)
    layer.counts = counts
    layer.log = str(log)
    layer.output_tail = proc.tail(result.output)
    if result.timed_out:
        layer.status = "timeout"
        layer.reason = f"no result after {ctx.timeout_s:g} s: the process group was killed"
        return layer
    refusal = layers.refused_for_accelerator(
        result.output if result.exit_status else "",
        counts.skip_reasons if counts else [],
        counts.messages if counts else [],
    )
    all_skipped = counts is not None and counts.tests > 0 and counts.skipped == counts.tests
    if refusal and (result.exit_status != 0 or all_skipped) and ctx.cpu_only:
        layer.status = "not-run"
        layer.reason = f"needs an accelerator: {refusal}"
        layer.where = f"{ctx.where()} (refused there: needs GPUs/NPUs)"
        layer.next_step = accelerator_command(spec, ctx)
        return layer
    if result.exit_status == 5 or (counts is not None and counts.tests == 0 and result.exit_status == 0):
        layer.status = "failed"
        layer.reason = "no tests were collected"
        return layer
    if result.exit_status != 0:
        layer.status = "failed"
        layer.reason = "\n\n".join(counts.messages[:3]) if counts and counts.messages else proc.tail(result.output, 15)
        return layer
    if all_skipped:
        reasons = "; ".join(counts.skip_reasons[:3]) if counts else ""
        if spec.opt_in and ctx.cpu_only:
            layer.status = "not-run"
            layer.reason = f"needs an accelerator: every test skipped on this CPU-only machine ({reasons})"
            layer.next_step = accelerator_command(spec, ctx)
        else:
            layer.status = "skipped"
            layer.reason = "every test was skipped: " + reasons
            layer.next_step = in_repo(ctx.repo_root, layer.command or "")
    return layer


def read_runtime(directory: Path) -> tuple[dict | None, list[str]]:
    """The rank-0 runtime record the probe hooks wrote, and every record's path."""
    files = sorted(directory.glob("runtime-rank*.json")) if directory.is_dir() else []
    primary = None
    for path in files:
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if primary is None or RuntimeRecord.model_validate(data).rank == 0:
            primary = data
    return primary, [str(p) for p in files]


def run_layers(report: HardReport, specs: list[LayerSpec], ctx: Context, preflight: Preflight) -> None:
    """Append one LayerResult per spec to `report`, running those that can run."""
    stopped_by: dict[str, str] = {}  # later layer -> the failed layer that stopped it
    for spec in specs:
        kind = spec.name.split(":")[0]
        if kind in stopped_by:
            layer = not_run(
                spec, ctx, f"stopped by {stopped_by[kind]}, which failed (its result makes this one meaningless)"
            )
            layer.stopped_by = stopped_by[kind]
        elif not preflight.ok:
            layer = not_run(spec, ctx, f"{preflight.reason(ctx.interp)}; fix: {preflight.fixes()}")
        elif spec.blocked:
            layer = not_run(spec, ctx, spec.blocked)
        elif spec.runner is not None:
            layer = spec.runner()
        elif spec.needs_accelerator and ctx.cpu_only:  # known before starting: not started
            layer = not_run(spec, ctx, spec.needs_accelerator, accelerator_command(spec, ctx))
        else:
            layer = run_pytest_layer(spec, ctx)
            if layer.status not in ("missing", "not-run"):
                _collect(report, spec, layer, ctx)
            if layer.status in ("failed", "timeout") and ctx.base_rev:
                _against_base(layer, spec, ctx)
            elif layer.status in ("failed", "timeout"):
                _with_compile_off(layer, spec, ctx)
        report.layers.append(layer)
        if layer.status in ("failed", "timeout") or (layer.status == "missing" and spec.required):
            for later in STOPS.get(kind, ()):
                stopped_by.setdefault(later, layer.name)


def _against_base(layer: LayerResult, spec: LayerSpec, ctx: Context) -> None:
    """Run the failed test layer on the change's base: failing there too, it is existing, not the change's."""
    from dataclasses import replace

    from model_compile.hard.env.worktree import Worktree, relative, resolve, toplevel

    try:
        commit, _ = resolve(ctx.repo_root, str(ctx.base_rev))
        top = toplevel(ctx.repo_root)
        rel = relative(ctx.recipe_root, top)
        rel_repo = relative(ctx.repo_root, top)
        with Worktree(top, commit, reads=[rel], prefix="model-compile-base-") as tree:
            base_ctx = replace(ctx, recipe_root=tree / rel, repo_root=tree / rel_repo, out_dir=ctx.out_dir / "base")
            base = run_pytest_layer(spec, base_ctx)
    except ValueError as exc:
        layer.reason = f"{layer.reason or ''}\n(not run on the base {ctx.base_rev}: {exc})".strip()
        return
    short = str(ctx.base_rev)[:12]
    if base.status in ("failed", "timeout"):
        layer.existing = True
        layer.reason = f"existing: it {base.status} on the base {short} too. " + (layer.reason or "")
    else:
        layer.existing = False
        words = {"missing": "does not exist there", "skipped": "was skipped", "not-run": "did not run"}
        there = words.get(base.status, base.status)
        layer.reason = f"new with the change: on the base {short} it {there}. " + (layer.reason or "")


def _with_compile_off(layer: LayerResult, spec: LayerSpec, ctx: Context) -> None:
    """No base to compare with: a layer that failed with compile off everywhere is not compile's failure."""
    switch = ctx.compile_off_switch
    if switch is None or any(switch in option for option in spec.options):
        return
    layer.existing = True
    layer.reason = (
        f"not caused by compile: it failed with compile off (every stage keeps it off and this run did not pass "
        f"{switch}). " + (layer.reason or "")
    )


def _collect(report: HardReport, spec: LayerSpec, layer: LayerResult, ctx: Context) -> None:
    """Compile facts after a layer ran: its TORCH_TRACE, and the probe's runtime JSON after the smoke."""
    slug = _slug(spec.name)
    if spec.name.split(":")[0] in TRACED_LAYERS:
        summary = summarise(ctx.out_dir / "trace" / slug, ctx.out_dir / "tlparse" / slug, html=ctx.html)
        report.traces[spec.name] = summary
        if spec.name == "smoke":
            report.trace = summary
    if spec.name != "smoke":
        return
    report.runtime, report.runtime_files = read_runtime(ctx.out_dir / "runtime")
    if report.runtime is not None:
        report.runtime["label"] = ctx.label
    rt = report.runtime_record if report.runtime else None
    violations = rt.violations if rt is not None else []
    if layer.status == "failed" and violations:
        layer.reason = "runtime: " + "; ".join(violations) + "\n\n" + (layer.reason or "")

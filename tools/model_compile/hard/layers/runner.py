"""`model-compile validate --hard`: soft review, then the recipe's own tests with compile on.

Layers run in order and stop at the first failure:
  1. soft       static review (`model_compile.analyze.analyze_path`); error findings stop here
  2. structure  tests/test_structure.py
  3. smoke      tests/test_smoke.py --config-override model.compile.enabled=true (+ user overrides)
  4. impact     each tests/skills/model-compile/test_*.py
Each pytest layer runs in its own process group with a timeout and JUnit XML.
"""

from __future__ import annotations

import os
import shlex
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import model_compile
from model_compile.errors import InputError
from model_compile.hard.env import interpreter, preflight, probe
from model_compile.hard.env.recipe import child_env, resolve_recipe
from model_compile.hard.layers import interrupt, pipeline, refusal
from model_compile.hard.layers import plan as layers
from model_compile.hard.layers.verdict import judge
from model_compile.hard.models import HardReport, LayerResult, RehearsalFacts, TraceSummary, Wiring
from model_compile.hard.rehearsal import command as rehearse
from model_compile.hard.rehearsal.run import to_layer
from model_compile.parse import recipe_test_options as conventions
from model_compile.parse.models import config_key

if TYPE_CHECKING:
    from model_compile.findings.models import RecipeReport


def _wiring(recipe: RecipeReport | None) -> Wiring:
    if recipe is None:
        return Wiring()
    return Wiring(
        compile_path=recipe.compile_path,
        compiled_target=list(recipe.compiled_target),
        placement=recipe.placement,
        documented=[
            f"{d.kind} ({d.source} {d.file}:{d.line}): {d.reason}"
            for d in recipe.documentation
            if d.source == "comment" or recipe.compile_path == f"fallback:{d.kind}"
        ],
    )


def run_soft(recipe_root: Path) -> tuple[LayerResult, Wiring, RecipeReport | None]:
    """Layer 1: static review; also what it read about the wiring, for the report, and the recipe's facts."""
    from model_compile.analyze import analyze_path

    start = time.monotonic()
    report = analyze_path(recipe_root, recipe=None)
    recipe = report.recipes[0] if report.recipes else None
    compile_path = recipe.compile_path if recipe else None
    errors = [f for f in report.all_findings() if f.severity == "error"]
    duration = time.monotonic() - start
    command = shlex.join(["model-compile", "validate", "--soft", str(recipe_root)])
    layer = LayerResult(
        name="soft",
        status="passed",
        label="static",
        command=command,
        exit_status=0,
        duration_s=round(duration, 3),
        compile_path=compile_path,
    )
    if report.exit_code == 1:
        layer.status, layer.exit_status, layer.next_step = "failed", 1, command
        layer.reason = "\n".join(f"{f.rule} {f.file}:{f.line}: {f.message}" for f in errors[:20])
        layer.findings = [f.model_dump() for f in errors[:50]]
    return layer, _wiring(recipe), recipe


def _rehearsal_spec(
    report: HardReport,
    recipe: RecipeReport | None,
    recipe_root: Path,
    repo_root: Path,
    interp: interpreter.Interpreter,
    env: dict[str, str],
    check: preflight.Preflight,
    out_dir: Path,
    options: rehearse.Options,
    answered_by: tuple[str, RehearsalFacts] | None = None,
) -> layers.LayerSpec:
    """The rehearsal layer (after structure, before smoke): its figures land in `report.rehearsal`. With
    `answered_by` (another recipe that asks the change the same question, and its facts) it is not run again."""

    def run() -> LayerResult:
        if answered_by is not None:
            from model_compile.hard.rehearsal.questions import answered

            facts = answered(answered_by[1], answered_by[0])
            cmd = rehearse.base_command(recipe_root, interp)
            layer = to_layer(facts, cmd, str(repo_root), f"answered by {answered_by[0]}")
            layer.reason = facts.notes[0] + (f"; {layer.reason}" if layer.reason else "")
            report.rehearsal = facts
            return layer
        layer, facts = rehearse.layer(
            recipe, recipe_root, repo_root, interp, env, check.environment, check.model_compile_file, out_dir, options
        )
        report.rehearsal = facts
        return layer

    command = rehearse.base_command(recipe_root, interp)
    return layers.LayerSpec("rehearsal", Path("-"), runner=run, command=command, required=False)


def _why_no_trace(report: HardReport) -> str:
    """Why no TORCH_TRACE came back: the traced layers that did not start, and what those that ran left."""
    traced = [layer for layer in report.layers if layer.name.split(":")[0] in pipeline.TRACED_LAYERS]
    why = []
    for layer in traced:
        if not layer.started:
            first = layer.reason.splitlines()[0][:160] if layer.reason else ""
            why.append(f"{layer.name} was not started ({layer.status}" + (f": {first}" if first else "") + ")")
        elif layer.name in report.traces:
            why.append(f"{layer.name}: {report.traces[layer.name].note or 'compiled nothing torch traced'}")
    return "; ".join(why) or "no layer that compiles is planned"


def validate_hard(
    path: Path,
    recipe: str | None = None,
    config_name: str | None = None,
    world_size: int | None = None,
    overrides: list[str] | None = None,
    timeout_s: float = 1800.0,
    trace: bool = False,
    out: Path | None = None,
    python: str | None = None,
    require_complete: bool = False,
    rehearsal: bool = True,
    backend: str | None = None,
    steps: int = rehearse.DEFAULT_STEPS,
    stages: list[str] | None = None,
    rehearsal_world_size: int | None = None,
    base_rev: str | None = None,
    answered_by: tuple[str, RehearsalFacts] | None = None,
    model_config: Path | None = None,
    model_configs: dict[str, Path] | None = None,
    home: Path | None = None,
) -> HardReport:
    """Run the layers of one recipe. `stages`: stage configs the change touches (each gets a smoke command).
    `overrides` (--config-override) go to the smoke layer and to the rehearsal; `model_config(s)` to the
    rehearsal (`--model-config [NAME=]PATH`). `home`: the repository whose environment runs the recipe when
    PATH lies in a temporary tree of it (a merge result, a revision), which has no `.venv` of its own."""
    recipe_root, repo_root = resolve_recipe(Path(path), recipe)
    if world_size is not None and world_size < 1:
        raise InputError("--world-size must be >= 1")
    if timeout_s <= 0:
        raise InputError("--timeout must be > 0")
    for item in overrides or []:
        if "=" not in item:
            raise InputError(f"--config-override {item!r} is not KEY=VALUE")
    rehearse_options = rehearse.Options(
        # on a change that touches one stage: that one; else the rehearsal's own choice (as `rehearse` makes it)
        config_name=config_name or (stages[0] if stages and len(stages) == 1 else None),
        backend=backend,
        steps=steps,
        timeout_s=min(timeout_s, rehearse.DEFAULT_TIMEOUT_S),
        world_size=rehearsal_world_size,
        base=base_rev,
        model_config=model_config,
        model_configs=dict(model_configs or {}),
        config_overrides=list(overrides or []),
    )
    rehearse.check(rehearse_options)  # --backend, --steps, --model-config, --config-override: before any work
    if overrides:
        from model_compile.analyze import analyze_path

        found = analyze_path(recipe_root, recipe=None).recipes
        rehearse.check_overrides(found[0] if found else None, recipe_root, repo_root, rehearse_options)
    interp = interpreter.resolve(home or repo_root, python)
    out_dir = Path(out).resolve() if out else Path(tempfile.mkdtemp(prefix="model-compile-hard-"))
    out_dir.mkdir(parents=True, exist_ok=True)
    env = interpreter.child_environ(interp, child_env(out_dir))
    check = preflight.run(interp, recipe_root, repo_root, env)
    environment = check.environment
    probe_dir = None
    if check.ok and probe.needed(check.model_compile_file) and probe.used_by(recipe_root):
        probe_dir = probe.build(out_dir)
        env = probe.on_path(env, probe_dir)
    label = environment.label
    kind = "cpu-only runtime checks" if environment.cpu_only else "runtime compile validation"
    report = HardReport(
        version=model_compile.__version__,
        kind=kind,
        recipe=recipe_root.name,
        repo_root=str(repo_root),
        out_dir=str(out_dir),
        environment=environment,
        probe=str(probe_dir) if probe_dir else None,
        preflight=check.lines(),
        require_complete=require_complete,
    )
    interrupt.track(report)
    soft, report.wiring, recipe_facts = run_soft(recipe_root)
    report.layers.append(soft)
    conv = conventions.read(recipe_root, repo_root)
    specs = layers.plan(
        recipe_root,
        config_name,
        world_size,
        list(overrides or []),
        soft.compile_path,
        conv,
        environment.device_count,
        repo_root,
        stages,
        # the recipe's own switch: `model.compile.enabled=true`, or `model.compile=true` in the older flat form
        compile_on=f"{config_key(recipe_facts.config.form, 'enabled')}=true" if recipe_facts else layers.COMPILE_ON,
        rebuilt=partial(layers.rebuilt, recipe_facts),
    )
    if soft.compile_path not in (None, "none"):
        spec = _rehearsal_spec(
            report, recipe_facts, recipe_root, repo_root, interp, env, check, out_dir, rehearse_options, answered_by
        )
        if not rehearsal or os.environ.get(rehearse.SKIP_ENV, "").lower() in ("0", "off", "false", "no"):
            spec.blocked = f"not asked for (--no-rehearsal or {rehearse.SKIP_ENV}=off): run it with the command"
        specs.insert(1, spec)
    if environment.cpu_only and check.ok:
        for spec in specs:
            if spec.name == "smoke" and (refused := refusal.smoke_refusal(recipe_root, repo_root, spec.test_file)):
                spec.needs_accelerator = (
                    f"needs an accelerator, so not started: {refused.describe()}, and this machine has none "
                    f"(preflight: torch {environment.torch}, device {environment.device_type})"
                )
    ctx = pipeline.Context(
        recipe_root,
        repo_root,
        interp,
        env,
        out_dir,
        timeout_s,
        label,
        environment.cpu_only,
        trace,
        probe_dir,
        base_rev=base_rev,
        compile_off_switch=_compile_off_switch(recipe_facts),
    )
    pipeline.run_layers(report, specs, ctx, check)
    if trace and not any(t.ranks for t in report.traces.values()):
        report.trace = report.trace or TraceSummary()
        report.trace.note = f"--trace recorded nothing: {_why_no_trace(report)}"
    judge(report)
    return report


def _compile_off_switch(recipe_facts: RecipeReport | None) -> str | None:
    """The switch that turns compile on, when the recipe's files keep it off in every stage; else None."""
    from model_compile.rules.wrapping import compile_state

    if recipe_facts is None or not recipe_facts.config.stages:
        return None
    state = compile_state(recipe_facts.config)
    if not state or any(value is not False for value in state.values()):
        return None
    return f"{config_key(recipe_facts.config.form, 'enabled')}=true"

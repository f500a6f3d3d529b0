"""Rehearse one recipe: plan it statically, then run it in the repository's interpreter.

Used by the rehearsal layer of `validate --hard` / `review --hard` (after the
structure test) and alone by `model-compile rehearse RECIPE`.
"""

from __future__ import annotations

import shlex
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from model_compile.errors import InputError
from model_compile.hard.env import interpreter, preflight, probe
from model_compile.hard.models import Environment, LayerResult, RehearsalFacts
from model_compile.hard.rehearsal import run as rehearsal
from model_compile.hard.rehearsal import stage_keys
from model_compile.hard.rehearsal.planning import overrides
from model_compile.hard.rehearsal.planning.overrides import read_model_config
from model_compile.hard.rehearsal.planning.plan import NotPlanned, Plan, plan
from model_compile.hard.rehearsal.render import instead_of_inductor
from model_compile.vocabulary import BACKENDS

if TYPE_CHECKING:
    from model_compile.findings.models import RecipeReport

DEFAULT_STEPS = 8
MAX_WORLD = 8
SKIP_ENV = "MODEL_COMPILE_REHEARSAL"  # "off": --hard lists the rehearsal layer as not run, with its command
DEFAULT_TIMEOUT_S = 900.0


@dataclass
class Options:
    config_name: str | None = None
    backend: str | None = None
    steps: int = DEFAULT_STEPS
    model_config: Path | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    world_size: int | None = None
    base: str | None = None  # a revision: rehearse it too, in a temporary worktree, and mark what differs
    model_configs: dict[str, Path] = field(default_factory=dict)  # --model-config NAME=PATH: a config for NAME
    config_overrides: list[str] = field(default_factory=list)  # --config-override K=V, in order


def check(options: Options) -> None:
    """Bad input is one line (exit 2)."""
    if options.backend is not None and options.backend not in BACKENDS:
        raise InputError(f"--backend {options.backend!r} is not one of {', '.join(BACKENDS)}")
    if options.steps < 2:
        raise InputError("--steps must be >= 2 (a first step and a steady one)")
    if options.world_size is not None and not 1 <= options.world_size <= MAX_WORLD:
        raise InputError(f"--world-size must be between 1 and {MAX_WORLD} (CPU ranks over gloo)")
    if options.timeout_s <= 0:
        raise InputError("--timeout must be > 0")
    if options.model_config is not None:
        read_model_config(options.model_config, f"--model-config {options.model_config}")
    for name, path in options.model_configs.items():
        read_model_config(path, f"--model-config {name}={path}")
    overrides.parse(options.config_overrides)


def supplied_configs(options: Options) -> dict[str, dict[str, Any]]:
    """The spec's `model_configs`: {NAME: {"file", "config"}} (read once, checked by `check`)."""
    return {
        name: {"file": str(path.resolve()), "config": read_model_config(path, f"--model-config {name}={path}")}
        for name, path in options.model_configs.items()
    }


def extra_flags(options: Options) -> list[str]:
    """The options a printed `rehearse` command repeats (beside stage, backend and world size)."""
    extra = [] if options.steps == DEFAULT_STEPS else ["--steps", str(options.steps)]
    if options.model_config is not None:
        extra += ["--model-config", str(options.model_config)]
    for name, path in options.model_configs.items():
        extra += ["--model-config", f"{name}={path}"]
    for item in options.config_overrides:
        extra += ["--config-override", item]
    if options.base:
        extra += ["--base", options.base]
    return extra


def python_flag(interp: interpreter.Interpreter) -> str | None:
    """The `--python` a printed command needs: none when the tool's own interpreter runs the recipe."""
    return interp.path if interp.source != "tool" else None


def base_command(recipe_root: Path, interp: interpreter.Interpreter) -> str:
    """`model-compile rehearse RECIPE [--python P]`: the rehearsal of a recipe as a report lists it before it ran."""
    flag = python_flag(interp)
    return shlex.join(["model-compile", "rehearse", str(recipe_root), *(["--python", flag] if flag else [])])


def plan_for(
    recipe: RecipeReport,
    recipe_root: Path,
    repo_root: Path,
    out_dir: Path,
    options: Options,
    cpu_only: bool = True,
    world_size: int | None = None,
) -> Plan:
    """The rehearsal's plan for these options (NotPlanned when it cannot run); `world_size` overrides theirs."""
    return plan(
        recipe,
        recipe_root,
        repo_root,
        out_dir,
        stage=options.config_name,
        conftest_default=stage_keys.conftest_default(recipe_root, repo_root),
        backend=options.backend,
        steps=options.steps,
        model_config=options.model_config,
        world_size=world_size or options.world_size,
        cpu_only=cpu_only,
        model_configs=supplied_configs(options),
        config_overrides=options.config_overrides,
    )


def execute(
    recipe: RecipeReport | None,
    recipe_root: Path,
    repo_root: Path,
    interp: interpreter.Interpreter,
    env: dict[str, str],
    environment: Environment,
    out_dir: Path,
    options: Options,
    flag: str | None,
    trial_fixes: bool = True,
) -> tuple[RehearsalFacts, str]:
    """(facts, the command that reruns it); never raises for a recipe that cannot be rehearsed. `trial_fixes`:
    rerun the fixes that can be applied at run time (a base's rehearsal does not: only the head's fixes count)."""
    label = rehearsal.label_of(environment)
    base_cmd = f"model-compile rehearse {recipe_root}" + (f" --python {flag}" if flag else "")
    if recipe is None:
        return rehearsal.not_run("static review found no recipe here", label), base_cmd
    try:
        planned = plan_for(recipe, recipe_root, repo_root, out_dir, options, environment.cpu_only)
    except NotPlanned as exc:
        part = exc.part or ("not wired for compile" if "does not compile" in str(exc) else "its files")
        return rehearsal.not_run(str(exc), label, exc.owner, part), base_cmd
    job = None
    if options.base:
        from model_compile.hard.env.worktree import since
        from model_compile.hard.rehearsal import beside

        planned.spec["changed_lines"] = since(repo_root, options.base)
        # the base's rehearsal runs beside the head's (its own processes): the two use the machine's cores together
        job = beside.start(recipe_root, repo_root, interp, env, environment, out_dir, options, flag, execute)
    try:
        return _head(
            recipe, planned, recipe_root, repo_root, interp, env, environment, out_dir, options, flag, job, trial_fixes
        )
    except BaseException:  # interrupted (or a fault of the tool's): the base's ranks end with the head's
        if job is not None:
            from model_compile.hard.rehearsal import beside

            beside.cancel(job)
        raise


def _head(
    recipe: RecipeReport,
    planned: Plan,
    recipe_root: Path,
    repo_root: Path,
    interp: interpreter.Interpreter,
    env: dict[str, str],
    environment: Environment,
    out_dir: Path,
    options: Options,
    flag: str | None,
    job: Any,
    trial_fixes: bool = True,
) -> tuple[RehearsalFacts, str]:
    """The head's own rehearsal (and its one-rank fallback, its fixes' trials, the base joined)."""
    label = rehearsal.label_of(environment)
    extra = extra_flags(options)
    cmd = rehearsal.command(recipe_root, planned, flag, extra)
    facts = rehearsal.run(planned, interp, env, out_dir, options.timeout_s, label)
    used, used_dir = planned, out_dir
    in_setup = any(w in (facts.reason or "") for w in ("set-up (before_train)", "process group"))
    if facts.status == "not-run" and in_setup and planned.world.world_size > 1 and options.world_size is None:
        # the stage's multi-rank wrap may need what a CPU lacks (an NCCL-only call, a device assert): one rank
        one = plan_for(recipe, recipe_root, repo_root, out_dir / "one-rank", options, environment.cpu_only, 1)
        single = rehearsal.run(one, interp, env, out_dir / "one-rank", options.timeout_s, label)
        if single.status != "not-run" or single.steps:
            single.notes.insert(
                0,
                f"the stage's {planned.world.world_size}-rank run did not start here ({facts.reason}): rehearsed on "
                "one rank instead, so its multi-rank wrap is not exercised",
            )
            facts = single
            used, used_dir = one, out_dir / "one-rank"
            cmd = rehearsal.command(recipe_root, one, flag, extra)
    if facts.status != "passed":
        from model_compile.hard.rehearsal import controls

        facts = controls.without_instruments(facts, used, interp, env, used_dir, options.timeout_s)
        _whole_environment(facts, interp, recipe_root, repo_root, env)
        rehearsal.write_summary(facts, used_dir)
    if job is not None:  # the base ran beside the head's run: joined before the fixes, which it decides on
        from model_compile.hard.rehearsal import beside

        beside.finish(facts, job, repo_root, recipe_root)
    if facts.fixes and trial_fixes:
        from model_compile.hard.rehearsal import beside, trials

        started = time.monotonic()
        skip = beside.fixes_at_the_base(facts, recipe_root) if job is not None else {}
        trials.try_fixes(facts, used, interp, env, used_dir, options.timeout_s, skip=skip)
        facts.timings["trials"] = round(time.monotonic() - started, 2)
        rehearsal.write_summary(facts, used_dir)
    elif facts.fixes:
        for fix in facts.fixes:
            if fix.override and fix.tried == "not tried" and not fix.reason:
                fix.reason = "not tried: the base's fixes are not the change's (only the head's are rerun)"
    if job is not None:
        rehearsal.write_summary(facts, out_dir)  # the head's record with the base beside it
    return facts, cmd


def _whole_environment(
    facts: RehearsalFacts, interp: interpreter.Interpreter, recipe_root: Path, repo_root: Path, env: dict[str, str]
) -> None:
    """A run stopped on a package the interpreter lacks: every module the run needs that it lacks, in one line,
    each with what the repository's pins say, and the one command that supplies them (not one module a run)."""
    att = facts.attribution[0] if facts.attribution else None
    if att is None or att.owner != "environment" or att.part != "a package":
        return
    pre = preflight.run(interp, recipe_root, repo_root, env)
    line = pre.missing_line()
    if line:
        att.evidence.append(f"every module the run needs that {interp.path} lacks: {line}")
        att.supply = pre.fixes()
        facts.reason = f"{facts.reason}; everything missing: {line}; fix: {att.supply}"


def with_base(
    facts: RehearsalFacts,
    recipe_root: Path,
    repo_root: Path,
    interp: interpreter.Interpreter,
    env: dict[str, str],
    environment: Environment,
    out_dir: Path,
    options: Options,
    flag: str | None,
) -> None:
    """The same rehearsal of `options.base` beside the head's, each measure marked (hard.rehearsal.beside)."""
    from model_compile.hard.rehearsal import beside

    job = beside.start(recipe_root, repo_root, interp, env, environment, out_dir, options, flag, execute, wait=True)
    beside.finish(facts, job, repo_root, recipe_root)


def child_env_with_probe(env: dict[str, str], model_compile_file: str | None, out_dir: Path) -> dict[str, str]:
    """The child must import `model_compile.runtime.rehearsal`: put the probe first unless it already imports ours."""
    return probe.on_path(env, probe.build(out_dir)) if probe.needed(model_compile_file) else env


def layer(
    recipe: RecipeReport | None,
    recipe_root: Path,
    repo_root: Path,
    interp: interpreter.Interpreter,
    env: dict[str, str],
    environment: Environment,
    model_compile_file: str | None,
    out_dir: Path,
    options: Options,
) -> tuple[LayerResult, RehearsalFacts]:
    """The rehearsal layer of --hard."""
    child_env = child_env_with_probe(env, model_compile_file, out_dir)
    facts, cmd = execute(
        recipe,
        recipe_root,
        repo_root,
        interp,
        child_env,
        environment,
        out_dir / "rehearsal",
        options,
        python_flag(interp),
    )
    return rehearsal.to_layer(facts, cmd, str(repo_root), layer_where(facts, str(interp.path))), facts


def layer_where(facts: RehearsalFacts, interpreter_path: str) -> str:
    """The rehearsal row's "where": the label, the backend in the table itself (a pass with aot_eager says
    nothing of inductor's numerics, and a stage that compiles with inductor is told so), the interpreter."""
    backend = f", backend {facts.backend}" if facts.backend else ""
    if facts.backend and instead_of_inductor(facts):
        backend += " (not the stage's inductor)"
    ranks = f", {facts.world_size} rank(s)" if facts.world_size else ""
    stage = f", stage {facts.stage}" if facts.stage else ""
    return f"{facts.label}{backend}{ranks}{stage}, {interpreter_path}"


def check_overrides(recipe: RecipeReport | None, recipe_root: Path, repo_root: Path, options: Options) -> None:
    """Each --config-override names a key of the stage the rehearsal would run (hard.rehearsal.stage_keys)."""
    stage_keys.check_overrides(recipe, recipe_root, repo_root, options.config_overrides, options.config_name)


def standalone(
    path: Path, python: str | None, options: Options, out: Path | None
) -> tuple[RehearsalFacts, Environment, str]:
    """`model-compile rehearse RECIPE`: preflight, soft read of the recipe, the rehearsal."""
    from model_compile.analyze import analyze_path
    from model_compile.hard.env.recipe import child_env, resolve_recipe

    check(options)
    recipe_root, repo_root = resolve_recipe(path, None)
    if options.base:
        from model_compile.hard.env.worktree import resolve

        try:
            resolve(repo_root, options.base)
        except ValueError as exc:
            raise InputError(f"--base {options.base}: not a revision of {repo_root} ({exc})") from exc
    report = analyze_path(recipe_root, recipe=None)
    recipe = report.recipes[0] if report.recipes else None
    check_overrides(recipe, recipe_root, repo_root, options)
    interp = interpreter.resolve(repo_root, python)
    out_dir = Path(out).resolve() if out else Path(tempfile.mkdtemp(prefix="model-compile-rehearse-"))
    out_dir.mkdir(parents=True, exist_ok=True)
    env = interpreter.child_environ(interp, child_env(out_dir))
    pre = preflight.run(interp, recipe_root, repo_root, env)
    environment = pre.environment
    if not pre.ok:
        facts = rehearsal.not_run(
            f"{pre.reason(interp)}; fix: {pre.fixes()}",
            rehearsal.label_of(environment),
            "environment",
            "a package",
            pre.fixes(),
        )
        return facts, environment, f"model-compile rehearse {recipe_root}"
    probed = child_env_with_probe(env, pre.model_compile_file, out_dir)
    facts, cmd = execute(
        recipe, recipe_root, repo_root, interp, probed, environment, out_dir, options, python_flag(interp)
    )
    return facts, environment, cmd

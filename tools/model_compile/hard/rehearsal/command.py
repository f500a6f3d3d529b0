"""Rehearse one recipe: plan it statically, then run it in the repository's interpreter.

Used by the rehearsal layer of `validate --hard` / `review --hard` (after the
structure test) and alone by `model-compile rehearse RECIPE`.
"""

from __future__ import annotations

import shlex
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from model_compile.errors import InputError
from model_compile.hard.console import say
from model_compile.hard.env import interpreter, preflight, probe
from model_compile.hard.models import Environment, LayerResult, RehearsalFacts
from model_compile.hard.rehearsal import run as rehearsal
from model_compile.hard.rehearsal.planning import overrides
from model_compile.hard.rehearsal.planning.overrides import read_model_config
from model_compile.hard.rehearsal.planning.plan import NotPlanned, Plan, plan
from model_compile.hard.rehearsal.render import instead_of_inductor
from model_compile.parse import recipe_test_options as test_options
from model_compile.parse.recipe_test_options import CONFIG_NAME
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


def label_of(environment: Environment) -> str:
    return f"{environment.label} (tiny model)"


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
        conftest_default=_conftest_default(recipe_root, repo_root),
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
) -> tuple[RehearsalFacts, str]:
    """(facts, the command that reruns it); never raises for a recipe that cannot be rehearsed."""
    label = label_of(environment)
    base_cmd = f"model-compile rehearse {recipe_root}" + (f" --python {flag}" if flag else "")
    if recipe is None:
        return rehearsal.not_run("static review found no recipe here", label), base_cmd
    try:
        planned = plan_for(recipe, recipe_root, repo_root, out_dir, options, environment.cpu_only)
    except NotPlanned as exc:
        part = exc.part or ("not wired for compile" if "does not compile" in str(exc) else "its files")
        return rehearsal.not_run(str(exc), label, exc.owner, part), base_cmd
    extra = extra_flags(options)
    cmd = rehearsal.command(recipe_root, planned, flag, extra)
    if options.base:
        planned.spec["changed_lines"] = changed_lines(repo_root, options.base)
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
    if facts.fixes:
        from model_compile.hard.rehearsal import trials

        trials.try_fixes(facts, used, interp, env, used_dir, options.timeout_s)
        rehearsal.write_summary(facts, used_dir)
    if options.base:
        with_base(facts, recipe_root, repo_root, interp, env, environment, out_dir, options, flag)
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


def changed_lines(repo_root: Path, rev: str) -> dict[str, list[int]]:
    """The Python lines the work tree changed against REV, by path from the repository root (the rehearsal
    counts whether each ran); empty when git cannot say."""
    from model_compile.hard.env.worktree import changed_lines as diff_lines
    from model_compile.hard.env.worktree import resolve, toplevel

    try:
        commit, _ = resolve(repo_root, rev)
        top = toplevel(repo_root)
        prefix = repo_root.resolve().relative_to(top.resolve()).as_posix()
        found = diff_lines(top, commit)
    except (ValueError, OSError):
        return {}
    if prefix in ("", "."):
        return found
    return {p[len(prefix) + 1 :]: v for p, v in found.items() if p.startswith(prefix + "/")}


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
    """The same rehearsal of `options.base` (cached by its tree) beside the head's, each measure marked."""

    from model_compile.analyze import analyze_path
    from model_compile.hard.env.worktree import Worktree, resolve, toplevel
    from model_compile.hard.rehearsal import base

    rev = str(options.base)
    try:
        commit, tree = resolve(repo_root, rev)
        top = toplevel(repo_root)
        rel = recipe_root.resolve().relative_to(top)
        rel_repo = repo_root.resolve().relative_to(top)
    except ValueError as exc:
        facts.notes.append(f"the base {rev} was not rehearsed: {exc}")
        return
    same = base.only_the_switch(top, commit)
    if same is not None:
        what = f"only in {', '.join(same[:4])}{' ...' if len(same) > 4 else ''}" if same else "in no file"
        facts.base_rev = rev
        facts.versus_base = [
            f"the base ({rev}) differs from what was rehearsed {what}: documentation, comments or docstrings, or a "
            "stage's compile switch, which the rehearsal sets itself, so the base's rehearsal would be this same run "
            "(not run again): nothing is new with the change, everything measured here is already there at the base"
        ]
        if facts.status == "failed":
            facts.existing = True  # the same run fails at the base: not the change's failure
        return
    key = base.cache_key(tree, str(rel), options, interp.path)
    base_facts = base.load(key)
    if base_facts is not None:
        facts.notes.append(f"the base's rehearsal is the cached one of tree {tree[:12]} ({base.cache_path(key)})")
    else:
        with Worktree(repo_root, commit) as tree_dir:
            recipe_b = tree_dir / rel
            exists = recipe_b.is_dir()
            found = next(iter(analyze_path(recipe_b, recipe=None).recipes), None) if exists else None
            if not exists:
                base_facts = rehearsal.not_run(f"the recipe does not exist at {rev}", label_of(environment))
            elif found is not None and found.compile_path == "none":
                base_facts = rehearsal.not_run(base.NO_COMPILE, label_of(environment))
            else:
                say(
                    f"model-compile: rehearsing the base {rev} ({commit[:12]}) too, the same run in a temporary "
                    "worktree, for the comparison (cached by its tree after, so a rerun skips it)"
                )
                _share_compile_cache(out_dir, out_dir / "base")
                kept, dropped = _base_overrides(found, recipe_b, tree_dir / rel_repo, options)
                base_facts, _ = execute(
                    found,
                    recipe_b,
                    tree_dir / rel_repo,
                    interp,
                    env,
                    environment,
                    out_dir / "base",
                    replace(options, base=None, config_overrides=kept),
                    flag,
                )
                if dropped:
                    base_facts.notes.insert(
                        0,
                        f"--config-override {', '.join(dropped)}: not a key of the base's stage config, so the base "
                        "runs without it (as it runs by default)",
                    )
        base.save(key, base_facts)
    facts.base, facts.base_rev = base_facts, rev
    facts.versus_base = base.versus(facts, base_facts, rev)
    base.apply(facts, base_facts, rev)


def _base_overrides(
    recipe: RecipeReport | None, recipe_root: Path, repo_root: Path, options: Options
) -> tuple[list[str], list[str]]:
    """(the --config-override items the base's stage knows, those it does not): a key neither the base's stage
    file nor its schema is known to have (the change adds it) is not the base's, and the base runs without it
    rather than fail on an input of the head's."""
    from model_compile.hard.rehearsal.planning.plan import choose_stage, load_stage, schema_file_of
    from model_compile.hard.stages import stage_files

    if not options.config_overrides or recipe is None:
        return list(options.config_overrides), []
    try:
        name, _ = choose_stage(recipe, recipe_root, options.config_name, _conftest_default(recipe_root, repo_root))
        data = load_stage(stage_files(recipe_root)[name])
    except NotPlanned:
        return list(options.config_overrides), []
    schema = schema_file_of(recipe, recipe_root)
    kept: list[str] = []
    dropped: list[str] = []
    for item in options.config_overrides:
        key = item.split("=", 1)[0]
        known = overrides.has(data, key) or overrides.schema_knows(schema, recipe.config.schema_.root_class, key)
        (kept if known else dropped).append(item)
    return kept, dropped


def _share_compile_cache(head: Path, base: Path) -> None:
    """The base's rehearsal reuses the head's Inductor cache (what compiles the same on both sides is not compiled
    again); its first-step time is then no cold-start figure, and the comparison says so."""
    cache = head / "inductor-cache"
    link = base / "inductor-cache"
    try:
        cache.mkdir(parents=True, exist_ok=True)
        base.mkdir(parents=True, exist_ok=True)
        if not link.exists() and not link.is_symlink():
            link.symlink_to(cache, target_is_directory=True)
    except OSError:
        pass


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
    return f"{facts.label}{backend}{ranks}, {interpreter_path}"


def _conftest_default(recipe_root: Path, repo_root: Path) -> str | None:
    conv = test_options.read(recipe_root, repo_root)
    default = conv.default_of(CONFIG_NAME) if conv.registers(CONFIG_NAME) else conv.smoke_config_name
    return default if isinstance(default, str) else None


def check_overrides(recipe: RecipeReport | None, recipe_root: Path, repo_root: Path, options: Options) -> None:
    """Before anything runs: each --config-override names a key of the stage the rehearsal would run (InputError
    otherwise). A recipe the rehearsal cannot plan is left to say so when it runs."""
    if not options.config_overrides or recipe is None:
        return
    from model_compile.hard.rehearsal.planning.plan import choose_stage, load_stage, schema_file_of
    from model_compile.hard.stages import stage_files

    try:
        name, _ = choose_stage(recipe, recipe_root, options.config_name, _conftest_default(recipe_root, repo_root))
        data = load_stage(stage_files(recipe_root)[name])
    except NotPlanned:
        return
    overrides.check(
        options.config_overrides, data, name, schema_file_of(recipe, recipe_root), recipe.config.schema_.root_class
    )


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
            f"{pre.reason(interp)}; fix: {pre.fixes()}", label_of(environment), "environment", "a package", pre.fixes()
        )
        return facts, environment, f"model-compile rehearse {recipe_root}"
    probed = child_env_with_probe(env, pre.model_compile_file, out_dir)
    facts, cmd = execute(
        recipe, recipe_root, repo_root, interp, probed, environment, out_dir, options, python_flag(interp)
    )
    return facts, environment, cmd

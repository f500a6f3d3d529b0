"""The layers of hard validation: which file each runs and with which options."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from model_compile.findings.models import RecipeReport
from model_compile.hard.stages import StageRun, plan_stages, stage_run
from model_compile.parse.recipe_test_options import CONFIG_NAME, CONFIG_OVERRIDE, WORLD_SIZE, Conventions

if TYPE_CHECKING:
    from model_compile.hard.models import LayerResult

# Output of a smoke helper that refuses to run without an accelerator.
ACCELERATOR_REFUSAL = re.compile(
    r"require[sd]? (?:a )?(?:GPUs?|NPUs?|GPUs/NPUs|accelerators?)|CUDA is not available|no (?:GPU|CUDA|accelerator)[^\n]*(?:found|available)",
    re.IGNORECASE,
)

COMPILE_ON = "model.compile.enabled=true"
SKILL_DIR = Path("tests") / "skills" / "model-compile"


@dataclass
class LayerSpec:
    name: str
    test_file: Path  # relative to the recipe root
    options: list[str] = field(default_factory=list)
    required: bool = True
    generate_hint: str = ""
    notes: list[str] = field(default_factory=list)  # options not passed, and how to get their effect
    accelerator_options: list[str] | None = None  # the options for a machine with GPUs/NPUs (smoke)
    opt_in: bool = False  # the test runs only with a --run-xxx switch
    blocked: str | None = None  # why this layer cannot run as asked (e.g. compile cannot be enabled)
    runner: Callable[[], LayerResult] | None = None  # a layer the tool runs itself (the rehearsal), not a test file
    command: str | None = None  # the command of a `runner` layer
    accelerator_runs: list[list[str]] = field(default_factory=list)  # one option list per stage (smoke)
    stage_runs: list[StageRun] = field(default_factory=list)  # the stages those runs load, with prerequisites
    needs_accelerator: str | None = None  # known before starting: the helper refuses a CPU device (why)


def generate_command(recipe_root: Path, compile_path: str | None) -> str:
    """What to do about a missing impact test (optional: the verdict does not need one).

    `generate` writes the skill tests when it wires a recipe; on a recipe already wired it changes
    nothing, so for these the honest next step is a test of the recipe's own."""
    return (
        f"optional: add an eager-vs-compiled parity test under {recipe_root}/tests/skills/model-compile/ "
        "(model-compile generate writes one only as it wires a recipe whose engine has get_batch/compute_loss; "
        "for a recipe wired already it writes none: the rehearsal layer is the eager-vs-compiled check then)"
    )


def plan(
    recipe_root: Path,
    config_name: str | None,
    world_size: int | None,
    overrides: list[str],
    compile_path: str | None = None,
    conventions: Conventions | None = None,
    device_count: int = 0,
    repo_root: Path | None = None,
    touched_stages: list[str] | None = None,
    compile_on: str = COMPILE_ON,
    rebuilt: Callable[[str | None], list[str]] | None = None,
) -> list[LayerSpec]:
    """structure, smoke, then one impact layer per tests/skills/model-compile/test_*.py.

    Options follow the recipe's conftest.py (`conventions`): only registered options are passed,
    opt-in switches such as `--run-smoke` are added, and `--world-size` defaults to the visible
    devices (1 on CPU). Without `conventions` every option is passed as given (the old behaviour).
    `rebuilt(stage)`: the overrides a stage's smoke run needs besides the switch (where the recipe's tests replace
    the compile section wholesale, MC211: the stage's own backend and mode).
    """
    conv = conventions or Conventions(dynamic=["not read"])
    notes: list[str] = []
    common: list[str] = []
    if config_name:
        if conv.registers(CONFIG_NAME):
            common = [CONFIG_NAME, config_name]
        else:
            notes.append(_no_config_name(recipe_root, config_name, conv))
    flags = conv.opt_in_flags("smoke")
    smoke = [*flags, *common]
    default_ws = _int(conv.default_of(WORLD_SIZE))
    root = repo_root or recipe_root.parent
    if config_name:
        runs = [stage_run(recipe_root, root, config_name, config_name, default_ws, device_count)]
    else:
        default_stage = conv.smoke_config_name or _str(conv.default_of(CONFIG_NAME))
        runs = plan_stages(recipe_root, root, touched_stages, default_ws, device_count, default_stage)
    if world_size:
        for run in runs:
            run.world_size, run.world_size_from = world_size, "--world-size"
    accel_runs: list[list[str]] = []
    for run in runs:
        opts = [*flags]
        if run.name and (CONFIG_NAME in conv.options or (run.name == config_name and conv.registers(CONFIG_NAME))):
            opts += [CONFIG_NAME, run.name]
        elif run.name and run.name != config_name:
            notes.append(_no_config_name(recipe_root, run.name, conv))
        if WORLD_SIZE in conv.options or (world_size and not conv.known):
            opts += [WORLD_SIZE, str(run.world_size or max(device_count, 1))]
        accel_runs.append(opts)
    if world_size and WORLD_SIZE not in conv.options and conv.known:
        notes.append(f"{WORLD_SIZE} {world_size} not passed: no conftest.py of the recipe registers {WORLD_SIZE}")
    first = runs[0]
    if first.name and not config_name and CONFIG_NAME in conv.options:
        smoke += [CONFIG_NAME, first.name]
    if WORLD_SIZE in conv.options:  # registered: the devices here (1 on CPU), or the stage's mesh when they suffice
        here = world_size or max(device_count, 1)
        if not world_size and device_count and first.world_size and device_count >= first.world_size:
            here = first.world_size
        smoke += [WORLD_SIZE, str(here)]
    elif world_size and not conv.known:
        smoke += [WORLD_SIZE, str(world_size)]
    blocked = None
    if conv.registers(CONFIG_OVERRIDE):
        extra = rebuilt or (lambda _stage: [])
        loaded = conv.smoke_config_name or _str(conv.default_of(CONFIG_NAME))  # what a run without a name loads
        for item in [compile_on, *extra(first.name or config_name or loaded), *overrides]:
            smoke += [CONFIG_OVERRIDE, item]
        for run, opts in zip(runs, accel_runs, strict=True):
            for item in [compile_on, *extra(run.name or config_name or loaded), *overrides]:
                opts += [CONFIG_OVERRIDE, item]
    else:
        stage = config_name or conv.smoke_config_name or "<stage>"
        where = (
            ", ".join(conv.files) if conv.files else "no conftest.py pytest loads for this recipe registers an option"
        )
        blocked = (
            f"no {CONFIG_OVERRIDE} option is registered ({where}): compile cannot be switched on from the "
            f"command line (`{compile_on}`); add a repeatable {CONFIG_OVERRIDE} option to the recipe's "
            "conftest.py and apply its values in tests/test_smoke.py (never set the switch in "
            f"configs/{stage}.yaml to test), or try compile with the rehearsal layer "
            "(`model-compile rehearse`: eager vs compiled on a tiny model)"
        )
    specs = [
        LayerSpec(
            "structure",
            Path("tests/test_structure.py"),
            list(common),
            generate_hint="the recipe's own structure test is missing: add tests/test_structure.py as the other recipes have it",
            notes=list(notes),
        ),
        LayerSpec(
            "smoke",
            Path("tests/test_smoke.py"),
            smoke,
            generate_hint="the recipe's own smoke test is missing: add tests/test_smoke.py as the other recipes have it",
            notes=list(notes),
            accelerator_options=accel_runs[0],
            opt_in=bool(flags),
            blocked=blocked,
            accelerator_runs=accel_runs,
            stage_runs=runs,
        ),
    ]
    impact = sorted((recipe_root / SKILL_DIR).glob("test_*.py"))
    impact_opts = [*conv.opt_in_flags("impact"), *common]
    for path in impact:
        specs.append(
            LayerSpec(
                f"impact:{path.name}",
                path.relative_to(recipe_root),
                list(impact_opts),
                required=False,
                notes=list(notes),
            )
        )
    if not impact:
        specs.append(
            LayerSpec(
                "impact",
                SKILL_DIR / "test_compile_parity.py",
                list(impact_opts),
                required=False,
                generate_hint=generate_command(recipe_root, compile_path),
            )
        )
    return specs


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _no_config_name(recipe_root: Path, config_name: str, conv: Conventions) -> str:
    """How to run stage `config_name` when the recipe's tests take no --config-name."""
    if config_name == conv.smoke_config_name:
        return (
            f"{CONFIG_NAME} {config_name} not passed (the recipe's conftest.py does not register it): "
            f"tests/test_smoke.py already loads configs/{config_name}.yaml (CONFIG_NAME)"
        )
    loads = (
        f"tests/test_smoke.py loads configs/{conv.smoke_config_name}.yaml (CONFIG_NAME)"
        if conv.smoke_config_name
        else ("the tests choose their config themselves")
    )
    how = f"set CONFIG_NAME = {config_name!r} in tests/test_smoke.py for that run"
    if conv.registers(CONFIG_OVERRIDE):
        how += f", or pass the values configs/{config_name}.yaml changes as {CONFIG_OVERRIDE} K=V"
    return f"{CONFIG_NAME} {config_name} not passed: the recipe's conftest.py does not register it; {loads}. To run {config_name}: {how}"


def refused_for_accelerator(output: str, skip_reasons: list[str], messages: list[str]) -> str | None:
    """The refusal line when a smoke run would not run on this machine, else None.

    Prefers the exception line (`RuntimeError: ... require GPUs/NPUs.`) over pytest's echo of the source.
    """
    for text in [*messages, *skip_reasons, output]:
        lines = [re.sub(r"^E\s+", "", ln).strip() for ln in (text or "").splitlines()]
        hits = [ln for ln in lines if ACCELERATOR_REFUSAL.search(ln)]
        if hits:
            best = next((ln for ln in hits if re.match(r"^[\w.]+(?:Error|Exception|Skipped): ", ln)), None)
            best = best or next((ln for ln in hits if not ln.startswith("raise ")), hits[0])
            return best[:300]
    return None


def rebuilt(facts: RecipeReport | None, stage: str | None) -> list[str]:
    """Where the recipe's tests replace the compile section wholesale (MC211), a smoke run's switch rebuilds it from
    that key alone: the stage's own backend and mode go with it (else the schema's defaults would run)."""
    if facts is None or not any(f.rule == "MC211" for f in facts.findings) or facts.config.form != "section":
        return []
    found = next((s for s in facts.config.stages if s.name == stage), None)
    out = []
    for key in ("backend", "mode"):
        known, value = found.static_value(key) if found is not None else (False, None)
        if known and isinstance(value, str):
            out.append(f"model.compile.{key}={value}")
    return out

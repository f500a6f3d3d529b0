"""Plan a rehearsal, statically: the stage, its world size and wrap, the model at its real depth, the data the
recipe's own data path is fed, the backend, the schedule, and the overrides that make it run here.

Reads the stage YAML (C loader), the soft report's ledger and config facts, and where one is on this machine
a `config.json` of the model. Nothing of the repository is imported and torch is not imported. The plan
becomes the children's spec (`runtime/rehearsal/child.py`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from model_compile.hard.env.imports import import_name
from model_compile.hard.rehearsal.planning import hints, source
from model_compile.hard.rehearsal.planning import overrides as cli_overrides
from model_compile.hard.rehearsal.planning.data_plan import SEQ_LEAVES, DataPlan, plan_data
from model_compile.hard.rehearsal.planning.model_plan import ModelPlan, NotPlanned, plan_model
from model_compile.hard.rehearsal.planning.overrides import read_keys
from model_compile.hard.rehearsal.planning.world import WorldPlan, plan_world
from model_compile.hard.stages import stage_files
from model_compile.parse.models import config_key
from model_compile.runtime.rehearsal.inputs.batches import PACK_KEYS
from model_compile.runtime.rehearsal.models import names
from model_compile.runtime.rehearsal.models.names import PROCESSOR_FILES

if TYPE_CHECKING:
    from model_compile.findings.models import RecipeReport

__all__ = ["NotPlanned", "Plan", "plan"]

PRETRAINED_KEYS = ("pretrained_model_name_or_path", "model_name_or_path", "pretrained_path")
CPU_BACKEND = "aot_eager"
COVERAGE_ENV = "MODEL_COMPILE_COVERAGE"
DEFAULT_STEPS = 8


@dataclass
class Plan:
    stage: str
    stage_reason: str
    backend: str
    backend_reason: str
    mode: str
    steps: int
    world: WorldPlan
    model: ModelPlan
    data: DataPlan
    overrides: list[str]
    spec: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    user_overrides: list[str] = field(default_factory=list)  # --config-override, applied before the rehearsal's
    compile_call: str | None = None  # file:line and text of the compile call (for the advice)
    compile_kwargs: dict[str, str] = field(default_factory=dict)
    forward_step: str | None = None  # file:line of the model call in the recipe's forward_step (else its def)
    model_var: str = "model"  # what prepare_model() calls the model it compiles (generate's targets start with it)


def _walk(node: Any, prefix: str = "") -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    if isinstance(node, dict):
        for key, value in node.items():
            path = f"{prefix}.{key}" if prefix else str(key)
            out.append((path, value))
            out.extend(_walk(value, path))
    return out


def load_stage(path: Path) -> dict[str, Any]:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=loader)  # noqa: S506 - a safe loader
    except (OSError, yaml.YAMLError) as exc:
        raise NotPlanned(f"{path.name} does not load: {exc}", "recipe", "its stage file") from exc
    return data if isinstance(data, dict) else {}


def choose_stage(
    recipe: RecipeReport, recipe_root: Path, asked: str | None, conftest_default: str | None
) -> tuple[str, str]:
    """(stage, why): the one asked for, else the first that enables compile, else - among several - the one whose
    wrap and data regime are the heaviest (the tests' default when it is among those), else the only one."""
    stages = sorted(stage_files(recipe_root))
    if asked:
        if asked not in stages:
            raise NotPlanned(f"no configs/{asked}.yaml (stages: {', '.join(stages) or 'none'})")
        return asked, "asked for with --config-name"
    if not stages:
        raise NotPlanned("the recipe has no configs/*.yaml stage file")
    enabling = [s.name for s in recipe.config.stages if s.values.get("enabled") is True and s.name in stages]
    if enabling:
        return enabling[0], "the first stage that enables compile"
    if len(stages) == 1:
        if conftest_default in stages:
            return str(conftest_default), "the recipe tests' default --config-name"
        return stages[0], "the only stage file (it does not enable compile; the rehearsal turns compile on)"
    files = stage_files(recipe_root)
    weights = {name: _weight(files[name]) for name in stages}
    top = max(w[0] for w in weights.values())
    heaviest = [name for name in stages if weights[name][0] == top]
    what = f"no stage enables compile; of the {len(stages)} stages"
    if conftest_default in heaviest:
        tie = f" (tied with {', '.join(n for n in heaviest if n != conftest_default)})" if len(heaviest) > 1 else ""
        return str(conftest_default), (
            f"the recipe tests' default --config-name, and {what} the heaviest wrap and data regime"
            f"{tie}: {weights[str(conftest_default)][1]}"
        )
    chosen = heaviest[0]
    tie = f" (tied with {', '.join(heaviest[1:])}: the first by name)" if len(heaviest) > 1 else ""
    why = f"{what} it has the heaviest wrap and data regime{tie}: {weights[chosen][1]}"
    if conftest_default in stages:
        why += (
            f"; the recipe tests' default --config-name {conftest_default} was not taken, it is lighter: "
            f"{weights[str(conftest_default)][1]}"
        )
    return chosen, why + " (pass --config-name for another)"


def _weight(path: Path) -> tuple[tuple[int, int, int], str]:
    """((wrap, gradient accumulation, sequence length), in words) of one stage YAML: a sharded mesh (FSDP2 block by
    block, `shard` > 1 or -1) weighs more than a replicated one (DDP), which weighs more than one rank; then more
    micro-steps per optimizer step, then a longer `max_seq_len`. A file that does not load weighs least."""
    try:
        paths = dict(_walk(load_stage(path)))
    except NotPlanned:
        return (-1, 0, 0), "does not load"
    mesh = {k.rsplit(".", 1)[-1]: v for k, v in paths.items() if ".mesh." in f".{k}" and isinstance(v, int)}
    spans = {k: isinstance(v, int) and not isinstance(v, bool) and (v > 1 or v == -1) for k, v in mesh.items()}
    wrap, words = (
        (2, f"sharded (mesh shard {mesh['shard']})")
        if spans.get("shard")
        else (1, f"replicated (mesh replicate {mesh['replicate']}, shard {mesh.get('shard', 1)})")
        if spans.get("replicate")
        else (0, "one rank (no mesh dimension above 1)")
    )
    leaves = {k.rsplit(".", 1)[-1]: v for k, v in paths.items() if _is_int(v)}
    accumulation, acc_words = 1, "no gradient accumulation setting"
    ga, gbs, batch = (
        leaves.get("gradient_accumulation_steps"),
        leaves.get("global_batch_size"),
        leaves.get("batch_size"),
    )
    if ga is not None and ga >= 1:
        accumulation, acc_words = ga, f"gradient_accumulation_steps {ga}"
    elif ga == -1 and gbs:
        accumulation = max(1, gbs // max(1, batch or 1))
        acc_words = f"accumulation from global_batch_size {gbs} / batch_size {batch or 1} (on one data-parallel rank)"
    seq_key = next((k for k in paths if k.rsplit(".", 1)[-1] in SEQ_LEAVES and _is_int(paths[k])), None)
    seq = int(paths[seq_key]) if seq_key else 0
    seq_words = f"{seq_key.rsplit('.', 1)[-1]} {seq}" if seq_key else "no sequence length setting"
    return (wrap, accumulation, seq), f"{words}, {acc_words}, {seq_words}"


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def schema_file_of(recipe: RecipeReport, recipe_root: Path) -> Path | None:
    return (recipe_root / recipe.config.schema_.file) if recipe.config.schema_.file else None


def _recipe_mentions(recipe_root: Path, words: tuple[str, ...]) -> set[str]:
    """Which of `words` the recipe's own Python (not its tests) names as a string or attribute."""
    found: set[str] = set()
    for path in recipe_root.rglob("*.py"):
        if "tests" in path.relative_to(recipe_root).parts:
            continue
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        found.update(w for w in words if w in text)
    return found


def module_name(path: Path, repo_root: Path) -> tuple[str, Path]:
    """(dotted module, sys.path entry): relative to the repository root when the file lies in it (its
    recipes import as `recipes.<name>...`, namespace folders included), else as pytest would find it."""
    try:
        rel = path.relative_to(repo_root.resolve())
    except ValueError:
        return import_name(path)
    parts = list(rel.with_suffix("").parts)
    if parts and parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts), repo_root


def _backend(stage_backend: str, asked: str | None, cpu_only: bool) -> tuple[str, str]:
    if asked:
        return asked, "asked for with --backend"
    if cpu_only and stage_backend == "inductor":
        return CPU_BACKEND, (
            f"the stage's backend is inductor; on CPU the rehearsal uses {CPU_BACKEND} unless --backend inductor "
            "(graph breaks and guards do not depend on the backend; numerics and compile time do)"
        )
    return stage_backend, "the stage's own backend"


def _run_overrides(paths: dict[str, Any], out_dir: Path) -> tuple[list[str], list[str]]:
    overrides, notes = [], []
    for key, value in paths.items():
        leaf = key.split(".")[-1]
        if leaf == "attn_implementation" and isinstance(value, str) and value != "sdpa":
            overrides.append(f"{key}=sdpa")
            notes.append(f"{key}: {value} -> sdpa for the rehearsal (flash attention varlen is not exercised)")
        elif key == "log.backends" and isinstance(value, list) and "wandb" in value:
            kept = [b for b in value if b != "wandb"] or ["terminal"]
            overrides.append(f"{key}=[{','.join(kept)}]")
        elif key in ("project.dir", "output_dir", "train.output_dir") and isinstance(value, str):
            overrides.append(f"{key}={out_dir / 'outputs'}")
        elif key.endswith("num_workers") and isinstance(value, int) and value:
            overrides.append(f"{key}=0")
    return overrides, notes


def plan(
    recipe: RecipeReport,
    recipe_root: Path,
    repo_root: Path,
    out_dir: Path,
    *,
    stage: str | None = None,
    conftest_default: str | None = None,
    backend: str | None = None,
    steps: int = DEFAULT_STEPS,
    model_config: Path | None = None,
    world_size: int | None = None,
    cpu_only: bool = True,
    model_configs: dict[str, dict[str, Any]] | None = None,
    config_overrides: list[str] | None = None,
) -> Plan:
    """The rehearsal's spec, or NotPlanned with the reason and the flag that fixes it."""
    if recipe.compile_path == "none":
        raise NotPlanned(
            f"the recipe does not compile: wire it first with model-compile generate {recipe_root} --path kit --write "
            "(in a repository without a model kit, one of the fallback paths: submodule, graph-break, regional, "
            "post-wrap, with --reason)"
        )
    ledger = next((lg for lg in recipe.ledger if any(e.kind == "compile" for e in lg.events)), None)
    ledger = ledger or (recipe.ledger[0] if recipe.ledger else None)
    if ledger is None:
        raise NotPlanned("no engine class with prepare_model() was found")
    name, stage_reason = choose_stage(recipe, recipe_root, stage, conftest_default)
    config_file = stage_files(recipe_root)[name]
    stage_data = load_stage(config_file)
    user = list(config_overrides or [])
    if user:
        cli_overrides.check(
            user, stage_data, name, schema_file_of(recipe, recipe_root), recipe.config.schema_.root_class
        )
        stage_data = cli_overrides.apply(stage_data, user)
    paths = dict(_walk(stage_data))
    overrides, notes = _run_overrides(paths, out_dir)
    schema = recipe.config.schema_
    schema_file = schema_file_of(recipe, recipe_root)
    if "project" in paths and "project.dir" not in paths:
        # an engine that requires an output folder the stage leaves to its launcher (as the recipe's tests set it)
        if cli_overrides.schema_knows(schema_file, schema.root_class, "project.dir") is not False:
            overrides.append(f"project.dir={out_dir / 'outputs'}")
    # the world and the wrap
    mesh = {k.rsplit(".", 1)[-1]: v for k, v in paths.items() if k.startswith("parallel.mesh.")}
    world = plan_world(mesh, "parallel.mesh", world_size)
    overrides += world.overrides
    notes += world.notes
    # the model
    pretrained_key = next((k for k in paths if k.split(".")[-1] in PRETRAINED_KEYS and isinstance(paths[k], str)), None)
    model_prefix = pretrained_key.rsplit(".", 1)[0] if pretrained_key and "." in pretrained_key else "model"
    builder = {
        k: v
        for k, v in paths.items()
        if k.startswith(model_prefix + ".") and k.count(".") == model_prefix.count(".") + 1
    }
    bounds = {}
    for key, value in paths.items():
        leaf = key.rsplit(".", 1)[-1]
        if isinstance(value, int) and leaf in ("image_max_pixels", "max_pixels"):
            bounds["max_pixels"] = value
        elif isinstance(value, int) and leaf in ("image_min_pixels", "min_pixels"):
            bounds["min_pixels"] = value
    supplied = dict(model_configs or {})
    pretrained = paths[pretrained_key] if pretrained_key else None
    if model_config is None and pretrained is not None:
        main = names.lookup(supplied, pretrained, str(repo_root))
        model_config = Path(main["file"]) if main else None
    vendored = hints.vendored_configs(recipe_root, repo_root)
    model = plan_model(pretrained, repo_root, model_config, builder, bounds, vendored)
    overrides += model.overrides
    ckpt_dir = out_dir / "tiny-checkpoint"
    checkpoint = None
    aliases: dict[str, str] = {}
    model_hints: dict[str, list[dict[str, str]]] = {}
    if model.resolved_at_call and pretrained is not None:
        # resolved in the child at the recipe's load call; its stand-in is where synthetic batches read the config
        model_hints[str(pretrained)] = hints.recipe_hints(
            recipe_root, str(pretrained_key), stage_files(recipe_root), name
        )
        ckpt_dir = out_dir / "models" / names.slug(str(pretrained))
    if model.config is not None and pretrained_key is not None:
        checkpoint = {
            "dir": str(ckpt_dir),
            "reference_dir": str(out_dir / "tiny-checkpoint-reference"),
            "override_key": pretrained_key,
            "config": model.config,
            "seed": 0,
            "processor": model.processor,
            "code_files": list(model.code_files),
            # the real processor's settings beside a supplied config: the tiny checkpoint carries them too
            "processor_files": [
                str(model_config.parent / f)
                for f in PROCESSOR_FILES
                if model_config is not None and (model_config.parent / f).is_file()
            ],
        }
        overrides.append(f"{pretrained_key}={ckpt_dir}")
        aliases[str(pretrained)] = str(ckpt_dir)  # the real name, read anywhere else, is the tiny checkpoint
    # the data and the schedule
    mentioned = _recipe_mentions(recipe_root, PACK_KEYS)
    data = plan_data(
        paths,
        repo_root,
        recipe_root,
        steps=steps,
        world_size=world.world_size,
        vision=model.vision,
        model_dir=str(ckpt_dir),
        out_dir=out_dir,
        batch_keys=sorted(mentioned),
    )
    # a length the user set with --config-override is theirs: the rehearsal does not shorten it again
    set_by_user = {item.split("=", 1)[0] for item in user}
    overrides += [o for o in data.overrides if o.split("=", 1)[0] not in set_by_user]
    notes += [n for n in data.notes if n.split(" ", 1)[0] not in set_by_user]
    # the compile section and backend
    form = recipe.config.form
    compile_keys = {name: config_key(form, name) for name in ("enabled", "backend", "mode")}
    compile_event = next((e for lg in recipe.ledger for e in lg.events if e.kind == "compile"), None)
    compile_keys.update(read_keys(compile_event, paths) if compile_event else {})
    stage_facts = next((s for s in recipe.config.stages if s.name == name), None)
    stage_values = dict(stage_facts.values) if stage_facts else {}
    for key in ("backend", "mode"):  # the stage's value under the key the compile call reads, where it is elsewhere
        if isinstance(paths.get(compile_keys[key]), str):
            stage_values[key] = paths[compile_keys[key]]
    stage_backend = str(stage_values.get("backend") or "inductor")
    stage_mode = str(stage_values.get("mode") or "default")
    chosen, why = _backend(stage_backend, backend, cpu_only)
    mode = stage_mode if chosen == "inductor" else "default"
    if mode != stage_mode:
        notes.append(f"mode {stage_mode} applies to inductor only: the {chosen} rehearsal runs mode default")
    engine_file = (recipe_root / ledger.file).resolve()
    engine_module, engine_base = module_name(engine_file, repo_root)
    schema = recipe.config.schema_
    schema_module = None
    if schema.file and schema.root_class:
        schema_module, _ = module_name((recipe_root / schema.file).resolve(), repo_root)
    scope = recipe.scope
    disabled = sorted({m.split(".", 1)[1] for part in scope.parts for m in part.minus if "." in m})
    model_var = next((p.module.split(".")[0] for p in scope.parts if p.kind == "whole-model"), "model") or "model"
    fwd = source.model_call_line(engine_file, ledger.engine_class, "forward_step", model_var)
    call_site = (
        f"{_repo_relative((recipe_root / compile_event.file).resolve(), repo_root)}:{compile_event.line}"
        if compile_event
        else None
    )
    checkpointing = [
        f"{_repo_relative((recipe_root / e.file).resolve(), repo_root)}:{e.line}"
        + (f" when {' and '.join(e.condition)}" if e.condition else "")
        for e in ledger.events
        if e.kind == "checkpointing"
    ]
    spec: dict[str, Any] = {
        "repo_root": str(repo_root),
        "recipe_root": str(recipe_root),
        "sys_path": list(dict.fromkeys([str(repo_root), str(engine_base)])),
        "engine_module": engine_module,
        "engine_class": ledger.engine_class,
        "schema_module": schema_module,
        "schema_class": schema.root_class,
        "config_file": str(config_file),
        "overrides": user + overrides,
        "user_overrides": user,
        "model_configs": supplied,
        "aliases": aliases,
        "compile_keys": compile_keys,
        "backend": chosen,
        "mode": mode,
        "checkpoint": checkpoint,
        "data": {
            "mode": data.mode,
            "reason": data.reason,
            "rows_path": str(out_dir / "rows" / "rows.jsonl"),
            "rows": data.rows,
            "batches": data.batches,
            "model_dir": str(ckpt_dir),
            "stand_in": model.resolved_at_call,
        },
        "model_hints": model_hints,
        "model_calls": hints.model_calls(recipe_root, str(pretrained_key)) if model_hints else [],
        "vendored_configs": vendored,
        "steps": steps,
        "targets": list(scope.patterns),
        "disabled": disabled,
        "disable_sites": {region: call_site for region in disabled} if call_site else {},
        "checkpointing": checkpointing,
        # the coverage map (what ran compiled); MODEL_COMPILE_COVERAGE=off leaves it out (the bench's baseline)
        "coverage": os.environ.get(COVERAGE_ENV, "on").lower() not in ("0", "off", "false", "no"),
        "precision": {},  # filled from the prepare child's reading of the validated config
        "out_dir": str(out_dir),
    }
    return Plan(
        stage=name,
        stage_reason=stage_reason,
        backend=chosen,
        backend_reason=why,
        mode=mode,
        steps=steps,
        world=world,
        model=model,
        data=data,
        overrides=overrides,
        spec=spec,
        notes=notes,
        user_overrides=user,
        compile_call=(
            f"{_repo_relative((recipe_root / compile_event.file).resolve(), repo_root)}:{compile_event.line}: "
            f"{compile_event.call}"
            if compile_event
            else None
        ),
        compile_kwargs=dict(compile_event.arguments or {}) if compile_event else {},
        forward_step=f"{_repo_relative(engine_file, repo_root)}:{fwd}" if fwd else None,
        model_var=model_var,
    )


def _repo_relative(path: Path, repo_root: Path) -> str:
    """The path as a user at the repository root types it (a recipe-relative path names no file there)."""
    try:
        return path.relative_to(repo_root.resolve()).as_posix()
    except ValueError:
        return str(path)

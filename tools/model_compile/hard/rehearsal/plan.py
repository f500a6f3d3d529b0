"""Plan a rehearsal, statically: which stage, which tiny architecture, which overrides, which backend.

Reads the stage YAML (C loader), the soft report's ledger and config facts, and
where a checkpoint folder or the hub cache has one, a `config.json`. Nothing of
the repository is imported and torch is not imported. The plan becomes the
child's spec (`runtime/rehearsal.py`).
"""

from __future__ import annotations

import ast
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from model_compile.hard.env.preflight import import_name
from model_compile.hard.stages import hub_cache, stage_files
from model_compile.runtime.batches import PACK_KEYS
from model_compile.runtime.tiny_models import FAMILIES

if TYPE_CHECKING:
    from model_compile.findings.models import RecipeReport

PRETRAINED_KEYS = ("pretrained_model_name_or_path", "model_name_or_path", "pretrained_path")
LOAD_FLAGS = ("load_pretrained_weights", "load_pretrained_model")
# A recipe-local builder's size fields under the model section -> the tiny value (only when larger).
SIZE_FIELDS = {
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "image_size": 32,
    "patch_size": 8,
    "num_layers": 2,
    "num_heads": 4,
    "d_model": 32,
    "dim": 32,
}
# Hub ids and folder names -> family (the most specific first).
NAME_PATTERNS = (
    (re.compile(r"qwen3[-_.]?vl", re.I), "qwen3_vl"),
    (re.compile(r"qwen2[._-]5[-_.]?vl", re.I), "qwen2_5_vl"),
    (re.compile(r"qwen2[-_.]?vl", re.I), "qwen2_vl"),
    (re.compile(r"qwen3(?![-_.]?vl)", re.I), "qwen3"),
    (re.compile(r"(^|/)vit[-_]|google/vit", re.I), "vit"),
)
CPU_BACKEND = "aot_eager"


class NotPlanned(Exception):
    """The rehearsal cannot run as asked; the message says why and what fixes it."""


@dataclass
class Plan:
    stage: str
    stage_reason: str
    family: str | None
    family_source: str
    backend: str
    backend_reason: str
    mode: str
    overrides: list[str]
    spec: dict[str, Any]
    notes: list[str] = field(default_factory=list)


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
        raise NotPlanned(f"{path.name} does not load: {exc}") from exc
    return data if isinstance(data, dict) else {}


def choose_stage(
    recipe: RecipeReport, recipe_root: Path, asked: str | None, conftest_default: str | None
) -> tuple[str, str]:
    """(stage, why): the one asked for, else the first that enables compile, else the tests' default, else the first."""
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
    if conftest_default in stages:
        return str(conftest_default), "the recipe tests' default --config-name"
    return stages[0], "the first stage file (none enables compile; pass --config-name for another)"


# Variants of a family that are another architecture (mixture of experts, hybrid attention, omni models).
OTHER_ARCHITECTURE = re.compile(r"moe|-a\d+(\.\d+)?b\b|next|omni", re.I)


def family_from_name(name: str) -> str | None:
    """The family a hub id or folder name names, or None (never a guess across architectures)."""
    if OTHER_ARCHITECTURE.search(name):
        return None
    for pattern, family in NAME_PATTERNS:
        if pattern.search(name):
            return family
    return None


def _hub_config(name: str) -> Path | None:
    """config.json of a hub id in the local Hugging Face cache (read statically), if one is there."""
    folder = hub_cache() / ("models--" + name.replace("/", "--")) / "snapshots"
    found = sorted(folder.glob("*/config.json")) if folder.is_dir() else []
    return found[-1] if found else None


def _read_config_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise NotPlanned(f"{path} is not a readable config.json: {exc}") from exc
    if not isinstance(data, dict):
        raise NotPlanned(f"{path} is not a config.json object")
    return data


def _family_of_config(data: dict[str, Any], where: str) -> str:
    model_type = str(data.get("model_type") or "")
    family = model_type if model_type in FAMILIES else None  # a family is named by its config.json model_type
    if family is None:
        raise NotPlanned(
            f"architecture {model_type or '(no model_type)'} of {where} has no tiny family here "
            f"(known: {', '.join(sorted(FAMILIES))})"
        )
    return family


def resolve_family(
    value: str | None, repo_root: Path, model_config: Path | None
) -> tuple[str | None, str, dict[str, Any] | None]:
    """(family, how it was found, the config.json to keep structure from)."""
    if model_config is not None:
        data = _read_config_json(model_config)
        return _family_of_config(data, str(model_config)), f"--model-config {model_config}", data
    if value is None:
        return None, "the recipe's own config fields (no checkpoint to shrink)", None
    local = Path(value) if os.path.isabs(value) else repo_root / value
    if (local / "config.json").is_file():
        data = _read_config_json(local / "config.json")
        return _family_of_config(data, f"{value}/config.json"), f"{value}/config.json (local checkpoint)", data
    cached = _hub_config(value)
    if cached is not None:
        data = _read_config_json(cached)
        return (
            _family_of_config(data, f"the hub cache's {value}"),
            f"{value} (config.json in the local hub cache)",
            data,
        )
    family = family_from_name(value)
    if family is None:
        raise NotPlanned(
            f"the architecture of {value!r} is not recognised from its name and no config.json of it is here "
            f"(families known: {', '.join(sorted(FAMILIES))}); pass --model-config PATH to a config.json of it"
        )
    return family, f"{value} (recognised by name)", None


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


def schema_size_defaults(recipe: RecipeReport, recipe_root: Path) -> dict[str, int]:
    """Integer defaults of the size fields of the schema's model class (`hidden_size: int = 768`), read with ast."""
    schema = recipe.config.schema_
    if not schema.file or not schema.model_class:
        return {}
    try:
        tree = ast.parse((recipe_root / schema.file).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return {}
    out: dict[str, int] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == schema.model_class:
            for item in node.body:
                if (
                    isinstance(item, ast.AnnAssign)
                    and isinstance(item.target, ast.Name)
                    and item.target.id in SIZE_FIELDS
                ):
                    value = _default_of(item.value)
                    if type(value) is int:
                        out[item.target.id] = value
    return out


def _default_of(node: ast.expr | None) -> object:
    """`768`, `Field(768, ...)` or `Field(default=768, ...)` -> 768."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) == "Field":
        if node.args and isinstance(node.args[0], ast.Constant):
            return node.args[0].value
        for kw in node.keywords:
            if kw.arg == "default" and isinstance(kw.value, ast.Constant):
                return kw.value.value
    return None


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


def plan(
    recipe: RecipeReport,
    recipe_root: Path,
    repo_root: Path,
    out_dir: Path,
    *,
    stage: str | None = None,
    conftest_default: str | None = None,
    backend: str | None = None,
    steps: int = 12,
    model_config: Path | None = None,
    cpu_only: bool = True,
) -> Plan:
    """The rehearsal's spec, or NotPlanned with the reason and the flag that fixes it."""
    if recipe.compile_path == "none":
        raise NotPlanned("the recipe does not compile (run model-compile generate RECIPE --path kit first)")
    ledger = next((lg for lg in recipe.ledger if any(e.kind == "compile" for e in lg.events)), None)
    ledger = ledger or (recipe.ledger[0] if recipe.ledger else None)
    if ledger is None:
        raise NotPlanned("no engine class with prepare_model() was found")
    name, stage_reason = choose_stage(recipe, recipe_root, stage, conftest_default)
    config_file = stage_files(recipe_root)[name]
    data = load_stage(config_file)
    paths = dict(_walk(data))
    notes: list[str] = []
    overrides: list[str] = []
    # the architecture
    pretrained_key = next((k for k in paths if k.split(".")[-1] in PRETRAINED_KEYS and isinstance(paths[k], str)), None)
    load_flag = next((k for k in paths if k.split(".")[-1] in LOAD_FLAGS), None)
    loads_weights = load_flag is None or paths[load_flag] is not False
    value = str(paths[pretrained_key]) if pretrained_key else None
    try:
        family, family_source, base = resolve_family(value, repo_root, model_config)
    except NotPlanned as exc:
        if loads_weights or model_config is not None:
            raise
        # the stage builds from the recipe's own fields: the name may not matter (the eager twin tells)
        family, family_source, base = None, f"the recipe's own config fields ({exc})", None
    checkpoint = None
    if family is not None and pretrained_key is not None:
        # written even when the stage does not load weights: a builder may still read the config there
        ckpt_dir = out_dir / "tiny-checkpoint"
        checkpoint = {"family": family, "dir": str(ckpt_dir), "base": base}
        overrides.append(f"{pretrained_key}={ckpt_dir}")
        if not loads_weights:
            family_source = (
                f"the recipe's builder and its own size fields, shrunk ({load_flag} is false; a tiny {family} "
                f"checkpoint from {family_source} sits at the pretrained path for a builder that reads its config)"
            )
    model_prefix = pretrained_key.rsplit(".", 1)[0] if pretrained_key and "." in pretrained_key else "model"
    if checkpoint is None or not loads_weights:
        defaults = schema_size_defaults(recipe, recipe_root)
        for key, tiny in SIZE_FIELDS.items():
            full = f"{model_prefix}.{key}"
            value = paths.get(full, defaults.get(key))
            if isinstance(value, int) and not isinstance(value, bool) and value > tiny:
                overrides.append(f"{full}={tiny}")
        if any(o.split("=")[0].endswith(tuple(SIZE_FIELDS)) for o in overrides):
            notes.append("the recipe builds its model from its own size fields: those were shrunk for the rehearsal")
    for key, value in paths.items():
        leaf = key.split(".")[-1]
        if leaf == "attn_implementation" and isinstance(value, str) and value != "sdpa":
            overrides.append(f"{key}=sdpa")
            notes.append(f"{key}: {value} -> sdpa for the rehearsal (flash attention varlen is not exercised)")
        elif key.startswith("parallel.mesh.") and isinstance(value, int) and not isinstance(value, bool) and value != 1:
            overrides.append(f"{key}=1")
        elif key == "log.backends" and isinstance(value, list) and "wandb" in value:
            kept = [b for b in value if b != "wandb"] or ["terminal"]
            overrides.append(f"{key}=[{','.join(kept)}]")
        elif key in ("project.dir", "output_dir", "train.output_dir") and isinstance(value, str):
            overrides.append(f"{key}={out_dir / 'outputs'}")
        elif key.endswith("num_workers") and isinstance(value, int) and value:
            overrides.append(f"{key}=0")
    if any(o.startswith("parallel.mesh.") for o in overrides):
        notes.append(
            "parallel.mesh set to one rank (replicate/shard/tensor 1): the distributed wrap is DDP-style, not FSDP2"
        )
    # the compile section and backend
    section = "model.compile"
    stage_facts = next((s for s in recipe.config.stages if s.name == name), None)
    stage_backend = str((stage_facts.values.get("backend") if stage_facts else None) or "inductor")
    stage_mode = str((stage_facts.values.get("mode") if stage_facts else None) or "default")
    if backend:
        chosen, why = backend, "asked for with --backend"
    elif cpu_only and stage_backend == "inductor":
        chosen, why = (
            CPU_BACKEND,
            (
                f"the stage's backend is inductor; on CPU the rehearsal uses {CPU_BACKEND} unless --backend inductor "
                "(graph breaks and guards do not depend on the backend; numerics and compile time do)"
            ),
        )
    else:
        chosen, why = stage_backend, "the stage's own backend"
    mode = stage_mode if chosen == "inductor" else "default"
    if mode != stage_mode:
        notes.append(f"mode {stage_mode} applies to inductor only: the {chosen} rehearsal runs mode default")
    low_precision = any(
        str(v).lower() in ("bf16", "fp16", "bfloat16", "float16")
        for k, v in paths.items()
        if k.endswith("mixed_precision")
    )
    engine_module, engine_base = module_name((recipe_root / ledger.file).resolve(), repo_root)
    schema = recipe.config.schema_
    schema_module = None
    if schema.file and schema.root_class:
        schema_module, _ = module_name((recipe_root / schema.file).resolve(), repo_root)
    scope = recipe.scope
    disabled = sorted({m.split(".", 1)[1] for part in scope.parts for m in part.minus if "." in m})
    mentioned = _recipe_mentions(recipe_root, PACK_KEYS)  # one read of the recipe's Python
    spec: dict[str, Any] = {
        "repo_root": str(repo_root),
        "recipe_root": str(recipe_root),
        "sys_path": list(dict.fromkeys([str(repo_root), str(engine_base)])),
        "engine_module": engine_module,
        "engine_class": ledger.engine_class,
        "schema_module": schema_module,
        "schema_class": schema.root_class,
        "config_file": str(config_file),
        "overrides": overrides,
        "compile_section": section,
        "backend": chosen,
        "mode": mode,
        "checkpoint": checkpoint,
        "steps": steps,
        "seed": 0,
        "targets": list(scope.patterns),
        "disabled": disabled,
        "batch_keys": sorted(mentioned),
        "packed": "pack_segment_ids" in mentioned,
        "low_precision": low_precision,
        "out": str(out_dir / "rehearsal.json"),
    }
    return Plan(name, stage_reason, family, family_source, chosen, why, mode, overrides, spec, notes)

"""Which stage configs a smoke command runs, with how many ranks, and what each needs that is not here.

Read statically from `configs/<stage>.yaml` (safe YAML, nothing imported):

- stages: those that enable compile (`model.compile.enabled: true`) and those the change touches; none of
  them -> the recipe's default stage (no `--config-name`);
- world size: the stage's `parallel.mesh` (product of its sizes; a `-1` dimension fills: the conftest's
  default world size or the devices, rounded up to a multiple of the fixed sizes), else the conftest default
  or the devices;
- prerequisites: the pretrained model (`*_name_or_path`: a local folder, or a hub id in the local Hugging
  Face cache - looked up on disk, never through huggingface_hub) and every `*_path` the stage names that
  does not exist here.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from model_compile.parse.stages import stage_facts
from model_compile.runtime.rehearsal.models.names import hub_cache_dir

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_MAX_BYTES = 2_000_000


@dataclass
class StageRun:
    """One smoke command's stage: its name, world size (and why), and what this machine lacks for it."""

    name: str | None  # None: the recipe's default stage (no --config-name)
    world_size: int | None
    world_size_from: str = ""
    prerequisites: list[str] = field(default_factory=list)


def _read(path: Path) -> str | None:
    try:
        if not path.is_file() or path.stat().st_size > _MAX_BYTES:
            return None
        return path.read_text(encoding="utf-8")
    except (OSError, ValueError):
        return None


def stage_files(recipe_root: Path) -> dict[str, Path]:
    """{stage name: configs/<stage>.yaml}."""
    folder = recipe_root / "configs"
    if not folder.is_dir():
        return {}
    return {p.stem: p for p in sorted(folder.glob("*.yaml")) + sorted(folder.glob("*.yml")) if p.is_file()}


def compile_stages(recipe_root: Path) -> list[str]:
    """The stages whose YAML sets `model.compile.enabled: true`."""
    out = []
    for name, path in stage_files(recipe_root).items():
        text = _read(path)
        if text is not None and stage_facts(text, str(path), name).values.get("enabled") is True:
            out.append(name)
    return out


def world_size_for(mesh: dict[str, int], default: int | None, devices: int) -> tuple[int | None, str]:
    """(world size, where it comes from) for a stage's `parallel.mesh`."""
    fallback = default or (devices if devices > 0 else None)
    fixed = [v for v in mesh.values() if v > 0]
    fill = any(v <= 0 for v in mesh.values())
    product = math.prod(fixed) if fixed else 1
    dims = " x ".join(f"{k} {v}" for k, v in mesh.items())
    if not mesh:
        return fallback, "the conftest default" if default else ("the visible devices" if fallback else "")
    if not fill:
        return product, f"parallel.mesh ({dims})"
    base = fallback or 1
    if mesh.get("shard", 1) <= 0:
        base = max(base, 2 * product)  # a shard that fills over one rank is data parallel, not the stage's FSDP2
    size = product * max(1, -(-base // product))
    return size, f"parallel.mesh ({dims}; -1 fills: {base} rounded up to a multiple of {product})"


def hub_cache() -> Path:
    """The local Hugging Face hub cache, as huggingface_hub finds it (HF_HUB_CACHE, HF_HOME, XDG_CACHE_HOME)."""
    return hub_cache_dir()


def _is_local(value: str) -> bool:
    return value.startswith(("./", "../", "/", "~")) or value.startswith(".\\") or os.sep + os.sep in value


def _walk(node: Any, prefix: str = "") -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    if isinstance(node, dict):
        for k, v in node.items():
            key = f"{prefix}.{k}" if prefix else str(k)
            if isinstance(v, (dict, list)):
                out += _walk(v, key)
            elif isinstance(v, str) and str(k).endswith("_path"):
                out.append((key, v))
    return out


# A stage that does not read what a key names: weights not loaded, synthetic data instead of the files.
_NO_WEIGHTS = ("load_pretrained_weights", "load_pretrained_model", "load_pretrained")
_FAKE_DATA = ("use_fake_data", "fake_data", "use_synthetic_data", "synthetic_data", "dummy_data")


def _switched_off(data: Any, key: str) -> bool:
    """The stage's own switch says the thing `key` names is not read (`load_pretrained_weights: false` beside
    a pretrained path, `use_fake_data: true` beside data paths in the same section)."""
    *parents, leaf = key.split(".")
    node = data
    for part in parents:
        node = node.get(part) if isinstance(node, dict) else None
    if not isinstance(node, dict):
        return False
    if leaf.endswith("name_or_path"):
        return any(node.get(flag) is False for flag in _NO_WEIGHTS)
    return any(node.get(flag) is True for flag in _FAKE_DATA)


def prerequisites(recipe_root: Path, repo_root: Path, stage: str) -> list[str]:
    """What the stage's config names that does not exist on this machine (pretrained model, data files)."""
    path = stage_files(recipe_root).get(stage)
    text = _read(path) if path else None
    if text is None or path is None:
        return []
    try:
        data = yaml.load(text, Loader=_LOADER)
    except yaml.YAMLError:
        return []
    rel = os.path.relpath(path, repo_root)
    out: list[str] = []
    for key, value in _walk(data):
        value = value.strip()
        if not value or "${" in value or _switched_off(data, key):
            continue
        here = (
            [Path(os.path.expanduser(value))]
            if os.path.isabs(os.path.expanduser(value))
            else [repo_root / value, recipe_root / value]
        )
        if any(p.exists() for p in here):
            continue
        if key.endswith("name_or_path"):
            if _is_local(value) or value.count("/") != 1:
                out.append(f"{key} = {value} ({rel}): no such folder here (a local path, not a hub id)")
                continue
            cache = hub_cache() / ("models--" + value.replace("/", "--"))
            if not cache.is_dir():
                out.append(f"{key} = {value} ({rel}): hub id not in the local Hugging Face cache ({cache.parent})")
            continue
        out.append(f"{key} = {value} ({rel}): no such file or folder here")
    return out


def stage_run(
    recipe_root: Path, repo_root: Path, name: str | None, file_stage: str | None, default: int | None, devices: int
) -> StageRun:
    """One stage's run: `name` is what --config-name passes (None: none), `file_stage` the YAML it loads."""
    path = stage_files(recipe_root).get(file_stage or "")
    mesh = stage_facts(_read(path) or "", str(path), file_stage or "").mesh if path else {}
    size, why = world_size_for(mesh, default, devices)
    return StageRun(name, size, why, prerequisites(recipe_root, repo_root, file_stage) if file_stage else [])


def plan_stages(
    recipe_root: Path,
    repo_root: Path,
    touched: list[str] | None,
    default: int | None,
    devices: int,
    default_stage: str | None = None,
) -> list[StageRun]:
    """The smoke's stage runs: compile-enabling and touched stages (sorted), else the default stage."""
    files = stage_files(recipe_root)
    names = [n for n in dict.fromkeys([*compile_stages(recipe_root), *(touched or [])]) if n in files]
    if not names:
        return [stage_run(recipe_root, repo_root, None, default_stage, default, devices)]
    return [stage_run(recipe_root, repo_root, n, n, default, devices) for n in sorted(names)]


def labelled_prerequisites(runs: list[StageRun]) -> list[str]:
    """Every run's prerequisites, prefixed with the stage when there are several."""
    return [
        (f"{run.name}: " if run.name and len(runs) > 1 else "") + item for run in runs for item in run.prerequisites
    ]

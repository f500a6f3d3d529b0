"""Helpers for recipe tests: config loading, skill asserts, the smoke runner."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import socket
import sys
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any, Iterable, Sequence

import yaml
from pydantic import BaseModel

from demo_engine.engine import PHASES, Engine, get_engine_class

# Applied to every smoke run before the user's overrides: a few steps (so a
# steady-state step exists next to the first one), no data workers.
SMOKE_OVERRIDES = ("train.max_steps=4", "data.num_workers=0", "train.log_every=1")


# -- recipe paths and imports ------------------------------------------------
def recipe_paths(recipe_root: str | Path) -> tuple[Path, Path, str]:
    """(recipe root, repository root, recipe name); puts the repo root on sys.path."""
    root = Path(recipe_root).resolve()
    repo = root.parents[1]
    if str(repo) not in sys.path:
        sys.path.insert(0, str(repo))
    return root, repo, root.name


def import_recipe_module(recipe_root: str | Path, relative: str) -> ModuleType:
    """Import `recipes.<name>.<relative>` (dotted)."""
    _, _, name = recipe_paths(recipe_root)
    return importlib.import_module(f"recipes.{name}.{relative}")


def root_config_class(schema: ModuleType) -> type[BaseModel]:
    """The schema's root: the pydantic model no other model of the module uses as a field."""
    local = [
        obj
        for obj in vars(schema).values()
        if inspect.isclass(obj) and issubclass(obj, BaseModel) and obj.__module__ == schema.__name__
    ]
    used: set[type] = set()
    for cls in local:
        for field in cls.model_fields.values():
            for candidate in local:
                if candidate is field.annotation or candidate in getattr(field.annotation, "__args__", ()):
                    used.add(candidate)
    roots = [cls for cls in local if cls not in used]
    if len(roots) != 1:
        raise ValueError(f"{schema.__name__}: expected one root config class, found {[c.__name__ for c in roots]}")
    return roots[0]


# -- config ------------------------------------------------------------------
def apply_dotlist(data: dict[str, Any], overrides: Iterable[str]) -> dict[str, Any]:
    """Apply `a.b.c=value` overrides in place; values are parsed as YAML scalars."""
    for item in overrides:
        if "=" not in item:
            raise ValueError(f"override {item!r} is not KEY=VALUE")
        key, raw = item.split("=", 1)
        parts = key.strip().split(".")
        node = data
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ValueError(f"override {item!r}: {part!r} is not a section")
        node[parts[-1]] = yaml.safe_load(raw) if raw.strip() else ""
    return data


def config_files(recipe_root: str | Path) -> list[Path]:
    return sorted((Path(recipe_root) / "configs").glob("*.yaml"))


def load_config(recipe_root: str | Path, config_name: str = "train", overrides: Sequence[str] = ()) -> BaseModel:
    """Load `configs/<config_name>.yaml` through the recipe schema, after dotlist overrides."""
    root, _, _ = recipe_paths(recipe_root)
    path = root / "configs" / f"{config_name}.yaml"
    if not path.is_file():
        raise FileNotFoundError(f"no config {path}")
    data = yaml.safe_load(path.read_text()) or {}
    apply_dotlist(data, overrides)
    schema = import_recipe_module(root, "configs.schema")
    return root_config_class(schema).model_validate(data)


def resolve_engine_class(recipe_root: str | Path, config: BaseModel) -> type[Engine]:
    """Import the recipe's engine module(s) so they register, then look up `config.engine`."""
    root, _, _ = recipe_paths(recipe_root)
    for path in sorted((root / "engine").glob("*_engine.py")):
        import_recipe_module(root, f"engine.{path.stem}")
    return get_engine_class(config.engine)


# -- skill asserts -----------------------------------------------------------
def load_recipe_skill_asserts(recipe_root: str | Path) -> list[ModuleType]:
    """Every `tests/skills/<skill>/asserts.py` of the recipe, imported from its file."""
    root, _, name = recipe_paths(recipe_root)
    modules = []
    for path in sorted((root / "tests" / "skills").glob("*/asserts.py")):
        mod_name = f"_skill_asserts_{name}_{path.parent.name.replace('-', '_')}"
        spec = importlib.util.spec_from_file_location(mod_name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[mod_name] = module
        spec.loader.exec_module(module)
        modules.append(module)
    return modules


def _call_hook(hook, available: dict[str, Any]) -> None:
    params = inspect.signature(hook).parameters
    hook(**{name: available[name] for name in params if name in available})


def inject_engine_assert_hooks(engine: Engine, modules: Sequence[ModuleType]) -> Engine:
    """Wrap each engine phase so `assert_<phase>_start/_end` of every module runs around it.

    Hooks take any of `engine`, `ctx`, `result`, `args`, `kwargs` by name; `ctx`
    is the step context dict when the phase gets one, else None.
    """
    for phase in PHASES:
        starts = [getattr(m, f"assert_{phase}_start") for m in modules if hasattr(m, f"assert_{phase}_start")]
        ends = [getattr(m, f"assert_{phase}_end") for m in modules if hasattr(m, f"assert_{phase}_end")]
        if not starts and not ends:
            continue
        original = getattr(engine, phase)

        def wrapped(*args, __original=original, __starts=starts, __ends=ends, **kwargs):
            ctx = kwargs.get("ctx", args[0] if args and isinstance(args[0], dict) else None)
            available = {"engine": engine, "ctx": ctx, "args": args, "kwargs": kwargs}
            for hook in __starts:
                _call_hook(hook, available)
            result = __original(*args, **kwargs)
            available["result"] = result
            for hook in __ends:
                _call_hook(hook, available)
            return result

        setattr(engine, phase, wrapped)
    return engine


# -- smoke -------------------------------------------------------------------
def has_accelerator() -> bool:
    import torch

    return torch.cuda.is_available()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _smoke_worker(rank: int, world_size: int, port: int, recipe_root: str, config_name: str, overrides: list[str]):
    import torch
    import torch.distributed as dist

    os.environ.update(
        MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world_size)
    )
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    if torch.cuda.is_available():
        torch.cuda.set_device(rank % torch.cuda.device_count())
    dist.init_process_group(backend, rank=rank, world_size=world_size)
    try:
        config = load_config(recipe_root, config_name, overrides)
        engine = resolve_engine_class(recipe_root, config)(config)
        inject_engine_assert_hooks(engine, load_recipe_skill_asserts(recipe_root))
        engine.train()
        dist.barrier()
    finally:
        dist.destroy_process_group()


def run_smoke(
    recipe_root: str | Path,
    config_name: str = "train",
    world_size: int = 1,
    overrides: Sequence[str] = (),
    allow_cpu: bool = True,
) -> None:
    """One short real training run in `world_size` spawned workers.

    Production repos refuse CPU here; this demo allows it (gloo) so the
    example runs anywhere. Pass allow_cpu=False to get the usual refusal.
    """
    import torch.multiprocessing as mp

    if not allow_cpu and not has_accelerator():
        raise RuntimeError("Distributed tests require GPUs/NPUs.")
    out = tempfile.mkdtemp(prefix="smoke-")
    all_overrides = [*SMOKE_OVERRIDES, f"train.output_dir={out}", *overrides]
    mp.spawn(
        _smoke_worker,
        args=(world_size, _free_port(), str(Path(recipe_root).resolve()), config_name, all_overrides),
        nprocs=world_size,
        join=True,
    )

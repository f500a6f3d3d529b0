"""The stage config as the recipe's tests build it (the stage YAML, then the rehearsal's overrides as an OmegaConf
dotlist; a launcher's own default config merged under it is not read), and how the reference twin widens the
precision the config holds. Nothing here imports torch."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any


def load_config(spec: dict[str, Any], overrides: list[str], engine_class: Any = None) -> Any:
    """The stage YAML merged with `overrides`, as the engine class wants it.

    An engine that validates its config itself (a `ConfigClass` or `prepare_config`) gets the OmegaConf node,
    as its launcher gives it; otherwise the recipe's schema root class validates it first.
    """
    path = Path(spec["config_file"])
    try:
        from omegaconf import OmegaConf
    except ImportError:
        pass
    else:
        config = OmegaConf.merge(OmegaConf.load(path), OmegaConf.from_dotlist(overrides))
        if _validates_itself(engine_class):
            return config
        return _validate(spec, OmegaConf.to_container(config, resolve=True))
    import yaml

    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    for item in overrides:
        key, value = item.split("=", 1)
        *parents, leaf = key.split(".")
        node = data
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = yaml.safe_load(value)
    return _validate(spec, data) if spec.get("schema_module") else data


def _validates_itself(engine_class: Any) -> bool:
    return engine_class is not None and (
        hasattr(engine_class, "ConfigClass") or hasattr(engine_class, "prepare_config")
    )


def _validate(spec: dict[str, Any], data: Any) -> Any:
    if not spec.get("schema_module") or not spec.get("schema_class"):
        return data
    schema = importlib.import_module(spec["schema_module"])
    return getattr(schema, spec["schema_class"]).model_validate(data)


LOW = ("bf16", "fp16", "bfloat16", "float16", "half")
WIDER = {"bf16": "fp32", "fp16": "fp32", "bfloat16": "float32", "float16": "float32", "half": "float"}


def precision_plan(precision: dict[str, Any]) -> dict[str, Any]:
    """How the reference twin runs, from the precision the recipe's config holds: a recipe that trains in
    bf16/fp16 gets an fp32 reference (its precision setting widened), an fp32 one a float64 reference."""
    value = str(precision.get("value") or "").lower()
    if precision.get("path") and value in WIDER:
        return {
            "value": value,
            "path": precision["path"],
            "reference_overrides": [f"{precision['path']}={WIDER[value]}"],
        }
    return {
        "value": value or None,
        "path": precision.get("path"),
        "reference_overrides": [],
        "reference_dtype": "float64",
    }


def twin_overrides(spec: dict[str, Any], twin: str) -> list[str]:
    keys = spec["compile_keys"]  # the compile switch and choices in the recipe's form (section or flat)
    overrides = list(spec["overrides"])
    if twin == "compiled":
        overrides += [
            f"{keys['enabled']}=true",
            f"{keys['backend']}={spec['backend']}",
            f"{keys['mode']}={spec['mode']}",
        ]
    else:
        overrides.append(f"{keys['enabled']}=false")
    if twin == "reference":
        overrides += list(spec["precision"].get("reference_overrides") or [])
        ckpt = spec.get("checkpoint") or {}
        if ckpt.get("reference_ready") and ckpt.get("override_key"):
            overrides = [o for o in overrides if not o.startswith(ckpt["override_key"] + "=")]
            overrides.append(f"{ckpt['override_key']}={ckpt['reference_dir']}")
    return overrides


PRECISION_LEAVES = ("mixed_precision", "precision", "amp_dtype", "autocast_dtype")


def _leaves(node: Any, prefix: str = "") -> list[tuple[str, Any]]:
    if hasattr(node, "model_dump"):
        node = node.model_dump()
    elif not isinstance(node, dict):
        try:
            from omegaconf import OmegaConf

            if OmegaConf.is_config(node):
                node = OmegaConf.to_container(node, resolve=True)
        except ImportError:
            pass
    out: list[tuple[str, Any]] = []
    if isinstance(node, dict):
        for key, value in node.items():
            path = f"{prefix}.{key}" if prefix else str(key)
            out.append((path, value))
            out += _leaves(value, path)
    return out


def read_precision(spec: dict[str, Any]) -> dict[str, Any]:
    """The training precision the recipe's validated config holds (schema defaults included)."""
    cls = getattr(importlib.import_module(spec["engine_module"]), spec["engine_class"])
    config = load_config(spec, twin_overrides(spec, "eager"), engine_class=cls)
    validator = getattr(cls, "ConfigClass", None)
    if validator is not None and hasattr(validator, "model_validate"):
        try:
            from omegaconf import OmegaConf

            config = validator.model_validate(OmegaConf.to_container(config, resolve=True))
        except Exception:  # noqa: BLE001 - the raw config still says what the YAML says
            pass
    for path, value in _leaves(config):
        if path.rsplit(".", 1)[-1] in PRECISION_LEAVES and isinstance(value, str):
            return {"path": path, "value": value}
    return {"path": None, "value": None}


def full_precision_wrap() -> None:
    """The reference twin only: FSDP2's mixed-precision policy dropped, so the reference computes in fp32."""
    try:
        import torch.distributed.fsdp as fsdp
    except ImportError:
        return
    original = fsdp.fully_shard

    def fully_shard(*args: Any, **kwargs: Any) -> Any:
        kwargs.pop("mp_policy", None)
        return original(*args, **kwargs)

    for name in ("__wrapped__", "state"):
        if hasattr(original, name):
            setattr(fully_shard, name, getattr(original, name))
    fsdp.fully_shard = fully_shard

"""The stage config as the recipe's launcher builds it, plus the rehearsal's overrides (OmegaConf dotlist), and how the
reference twin widens the precision the config holds. Nothing here imports torch."""

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

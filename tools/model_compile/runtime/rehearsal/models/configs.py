"""Config objects shrunk in place: a transformers config (`shrink_config`, its widths through `shrink`) and a
recipe's own config object (`shrink_object`: a dataclass, a pydantic model, a dict or OmegaConf section of its
model fields). Each object is shrunk once (a weak reference marks it), unless a second try asks for each head
at its real size."""

from __future__ import annotations

import dataclasses
import weakref
from typing import Any

from model_compile.runtime.rehearsal.models import shrink

_SHRUNK: dict[int, Any] = {}  # id(config) -> weakref: configs shrunk already (a weakref: ids are reused)


def was_shrunk(config: Any) -> bool:
    ref = _SHRUNK.get(id(config))
    return ref is not None and ref() is config


def mark_shrunk(config: Any) -> None:
    try:
        _SHRUNK[id(config)] = weakref.ref(config)
    except TypeError:
        return
    for key in ("text_config", "vision_config", "audio_config", "encoder", "decoder"):
        sub = getattr(config, key, None)
        if sub is not None and hasattr(sub, "to_dict"):
            mark_shrunk(sub)


def apply_values(config: Any, before: dict[str, Any], after: dict[str, Any]) -> None:
    """Set on the config object (and its sub-config objects) each value `shrink` changed."""
    for key, value in after.items():
        if before.get(key) == value:
            continue
        current = getattr(config, key, None)
        if isinstance(value, dict) and hasattr(current, "to_dict"):
            apply_values(current, before.get(key) or {}, value)
            continue
        try:
            setattr(config, key, value)
        except (AttributeError, TypeError, ValueError):
            continue


def view_of(config: Any) -> dict[str, Any] | None:
    try:
        view = config.to_dict()
    except Exception:  # noqa: BLE001 - a config that cannot say its fields is left as it is
        return None
    for alias, target in (getattr(config, "attribute_map", None) or {}).items():
        if target in view and alias not in view:
            view[alias] = view[target]
    return view


def shrink_config(config: Any, vocab_too: bool) -> list[str]:
    """Shrink a transformers config object in place, once; what changed."""
    if config is None or not hasattr(config, "to_dict") or was_shrunk(config):
        return []
    view = view_of(config)
    if view is None:
        return []
    new, changed = shrink.shrink(view, vocab_too=vocab_too)
    new.pop("_name_or_path", None)
    apply_values(config, view, new)
    mark_shrunk(config)
    return changed


# -- a recipe's own config objects -------------------------------------------


def _fields_of(value: Any) -> dict[str, Any] | None:
    if isinstance(value, (str, bytes, int, float, bool)) or value is None or hasattr(value, "to_dict"):
        return None
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name, None) for f in dataclasses.fields(value)}
    model_fields = getattr(type(value), "model_fields", None)
    if isinstance(model_fields, dict):
        return {k: getattr(value, k, None) for k in model_fields}
    if isinstance(value, dict):
        return dict(value)
    try:
        from omegaconf import DictConfig, OmegaConf

        if isinstance(value, DictConfig):
            data = OmegaConf.to_container(value, resolve=True)
            return {str(k): v for k, v in data.items()} if isinstance(data, dict) else None
    except ImportError:
        pass
    if type(value).__module__ == "types" and hasattr(value, "__dict__"):  # SimpleNamespace
        return dict(vars(value))
    return None


def _set(value: Any, key: str, new: Any) -> bool:
    try:
        if isinstance(value, dict):
            value[key] = new
        elif dataclasses.is_dataclass(value):
            object.__setattr__(value, key, new)
        else:
            setattr(value, key, new)
        return True
    except Exception:  # noqa: BLE001 - a frozen or read-only config keeps its value (said in the record)
        return False


def shrink_object(value: Any) -> list[str]:
    """Shrink a recipe's own config object in place (widths above 256); what changed."""
    fields = _fields_of(value)
    if not fields:
        return []
    new = shrink.shrink_fields(fields)
    done = []
    for key, tiny in new.items():
        if _set(value, key, tiny):
            done.append(f"{type(value).__name__}.{key} {fields[key]} -> {tiny}")
        else:
            done.append(f"{type(value).__name__}.{key} {fields[key]} kept (read-only)")
    return done

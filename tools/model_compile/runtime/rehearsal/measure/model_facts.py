"""Facts of the model prepare_model() returned: keys, compiled modules, the regions kept eager."""

from __future__ import annotations

from typing import Any

from model_compile.runtime.dynamo_adapter import compiled_modules, unwrap
from model_compile.runtime.targets import check_targets


def key_facts(model: Any) -> dict[str, Any]:
    """state_dict keys, parameter names and the distributed-checkpoint keys (`get_model_state_dict`)."""
    facts: dict[str, Any] = {
        "state_dict": sorted(model.state_dict().keys()),
        "parameters": sorted(n for n, _ in model.named_parameters()),
    }
    try:
        from torch.distributed.checkpoint.state_dict import get_model_state_dict

        facts["dcp"] = sorted(get_model_state_dict(model).keys())
    except Exception as exc:  # noqa: BLE001 - reported, not fatal
        facts["dcp"] = None
        facts["dcp_error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
    return facts


def optimizer_keys(model: Any, optimizer: Any) -> dict[str, Any]:
    """What an optimizer-state checkpoint is keyed by after training: the distributed-checkpoint FQNs of the
    parameters with state (`get_optimizer_state_dict`), and the parameter names `named_parameters()` gives them
    (a save that keys the state by parameter name)."""
    out: dict[str, Any] = {}
    if optimizer is None or model is None:
        return {"optimizer_error": "no optimizer step was seen"}
    try:  # an instrument: it never changes the run's outcome
        by_id = {id(p): n for n, p in model.named_parameters()}
        out["optimizer_by_name"] = sorted(by_id.get(id(p), "?") for p in optimizer.state)
    except Exception as exc:  # noqa: BLE001 - said in the record
        return {"optimizer_error": f"{type(exc).__name__}: {exc}"[:300]}
    try:
        from torch.distributed.checkpoint.state_dict import get_optimizer_state_dict

        state = get_optimizer_state_dict(model, optimizer).get("state") or {}
        out["optimizer"] = sorted(str(k) for k in state)
    except Exception as exc:  # noqa: BLE001 - reported, not fatal
        out["optimizer"] = None
        out["optimizer_error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
    return out


def compare_keys(eager: dict[str, Any], compiled: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in ("state_dict", "parameters", "dcp"):
        a, b = eager.get(name), compiled.get(name)
        if a is None or b is None:
            out[name] = {
                "checked": False,
                "reason": compiled.get("dcp_error") or eager.get("dcp_error") or "unavailable",
            }
            continue
        only_eager = sorted(set(a) - set(b))
        only_compiled = sorted(set(b) - set(a))
        out[name] = {
            "checked": True,
            "count": len(b),
            "same": not only_eager and not only_compiled,
            "only_eager": only_eager[:5],
            "only_compiled": only_compiled[:5],
            "orig_mod": sum(1 for k in b if "_orig_mod." in k),
        }
    return out


def disabled_regions(model: Any, patterns: list[str]) -> list[dict[str, Any]]:
    """Each region the compile path keeps eager: present? its forward wrapped by torch.compiler.disable?"""
    root = unwrap(model)
    out = []
    for pattern in patterns:
        module: Any = root
        for part in pattern.split(".") if pattern else []:
            module = getattr(module, part, None)
            if module is None:
                break
        if module is None:
            out.append({"region": pattern, "present": False})
            continue
        forward = getattr(module, "forward", None)
        disabled = bool(getattr(forward, "_torchdynamo_disable", False)) or "DisableContext" in repr(
            getattr(forward, "__closure__", None)
        )
        out.append({"region": pattern, "present": True, "eager": disabled})
    return out


def wrap_facts(model: Any) -> dict[str, Any]:
    """What wraps the model: DDP, FSDP2 (modules that carry FSDP state), or nothing; and how many blocks."""
    names = type(model).__name__
    fsdp = [n for n, m in model.named_modules() if type(m).__name__.startswith("FSDP")]
    if fsdp:
        return {"wrap": "FSDP2 (fully_shard)", "sharded_modules": len(fsdp), "root": names}
    if names == "DistributedDataParallel":
        return {"wrap": "DistributedDataParallel", "sharded_modules": 0, "root": names}
    return {
        "wrap": f"no distributed wrap (prepare_model() returned the {names} itself)",
        "sharded_modules": 0,
        "root": names,
    }


def class_name(module: Any) -> str:
    """The module's own class: FSDP2 swaps in a generated `FSDP<Name>` subclass, named here by its base."""
    cls = type(module)
    if cls.__name__.startswith("FSDP") and len(cls.__mro__) > 2 and cls.__name__ == "FSDP" + cls.__mro__[2].__name__:
        return cls.__mro__[2].__name__
    for base in cls.__mro__[1:]:
        if cls.__name__ == "FSDP" + base.__name__:
            return base.__name__
    return cls.__name__


def model_facts(model: Any, targets: list[str], disabled: list[str]) -> dict[str, Any]:
    inner = unwrap(model)
    found = compiled_modules(model)
    names = [n for n, _ in inner.named_modules()]
    return {
        "returned": type(model).__name__,
        "model": class_name(inner),
        "parameters": sum(p.numel() for p in inner.parameters()),
        "trainable": sum(p.numel() for p in inner.parameters() if p.requires_grad),
        "compiled_modules": [f"{c['name'] or '(model)'} [{c['kind']}]" for c in found[:20]],
        "compiled_module_count": len(found),
        "targets": check_targets(names, [c["name"] for c in found], targets),
        "disabled": disabled_regions(model, disabled),
        **wrap_facts(model),
    }

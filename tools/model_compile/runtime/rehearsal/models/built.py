"""What the recipe built, measured on the module trees: each model, its class, parameters, the depth of each of
its stacks (the repeated blocks of a `ModuleList`/`Sequential`, counted on the built tree, never read from a
config), what was shrunk, and where its config came from.

The models are the one `prepare_model()` returned, every model built while the recipe ran whose module is not
inside another (a second tower, an encoder, a teacher the engine holds), and every other module the engine
keeps as an attribute. A wrap (DDP, FSDP2, `torch.compile`'s `_orig_mod`, a checkpoint wrapper) is seen
through: paths are the model's own.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from model_compile.runtime.rehearsal.models.state import STATE
from model_compile.runtime.rehearsal.record import NotHere

WRAPPERS = ("_orig_mod.", "module.", "_checkpoint_wrapped_module.", "_fsdp_wrapped_module.")


def _clean(path: str) -> str:
    for part in WRAPPERS:
        path = path.replace(part, "")
    return path.removeprefix("_orig_mod").removeprefix("module").strip(".")


def _class(module: Any) -> str:
    from model_compile.runtime.rehearsal.measure.model_facts import class_name

    return class_name(module)


def unwrap(module: Any) -> Any:
    for _ in range(4):
        inner = getattr(module, "_orig_mod", None) or getattr(module, "module", None)
        if inner is None or inner is module or not hasattr(inner, "named_modules"):
            break
        module = inner
    return module


def stacks(model: Any) -> dict[str, str]:
    """{path: 'N Block'} of every stack of repeated blocks, outermost only (the experts inside each layer of a
    stack are not a stack of the model's)."""
    import torch

    found: dict[str, str] = {}
    for path, module in unwrap(model).named_modules():
        if not isinstance(module, (torch.nn.ModuleList, torch.nn.Sequential)):
            continue
        children = list(module.children())
        kinds = Counter(_class(c) for c in children)
        if not kinds:
            continue
        top, count = kinds.most_common(1)[0]
        block = next(c for c in children if _class(c) == top)
        # a ModuleList of blocks is a stack even of one (a 1-layer model); a Sequential needs two of a kind
        least = 1 if isinstance(module, torch.nn.ModuleList) else 2
        if count < least or not any(True for _ in block.children()):
            continue  # leaves (Linear, norms, activations) are a block's parts, not blocks
        clean = _clean(path)
        if any(clean.startswith(outer + ".") for outer in found):
            continue
        found[clean] = f"{len(children)} {top}" + (
            "" if len(kinds) == 1 else " (" + ", ".join(f"{n} {k}" for k, n in kinds.most_common()) + ")"
        )
    return found


def _params(module: Any) -> tuple[int, int]:
    total = trainable = 0
    for p in module.parameters():
        n = int(p.numel())
        total += n
        trainable += n if p.requires_grad else 0
    return total, trainable


def _contains(outer: Any, inner: Any) -> bool:
    return outer is not inner and any(m is inner for m in outer.modules())


def _merge(into: dict[str, Any], part: dict[str, Any]) -> None:
    into["shrunk"] = list(dict.fromkeys(list(into.get("shrunk") or []) + list(part.get("shrunk") or [])))
    if part.get("source") and not into.get("source"):
        into["source"] = part["source"]


def models(prepared: Any, engine: Any) -> list[dict[str, Any]]:
    """Every model built, the prepared one first; each with its measured facts."""
    import torch

    candidates: list[tuple[Any, dict[str, Any]]] = []
    root = unwrap(prepared)
    candidates.append((root, {"role": "prepare_model() returned it"}))
    for entry in STATE["built"]:
        module = entry["ref"]()
        if module is not None:
            candidates.append((module, {"role": "built while the recipe ran", **entry}))
    for attr, value in sorted(vars(engine).items()) if engine is not None else []:
        if isinstance(value, torch.nn.Module):
            candidates.append((unwrap(value), {"role": f"the engine's `{attr}`"}))
    kept: list[tuple[Any, dict[str, Any]]] = []
    for module, info in candidates:
        owner = next((i for k, i in kept if module is k or _contains(k, module)), None)
        if owner is not None:  # the same module, or a part of a model listed: its shrinking is that model's
            _merge(owner, info)
            continue
        inside = [(k, i) for k, i in kept if _contains(module, k)]
        info = dict(info)
        for _, part in inside:
            _merge(info, part)
        kept = [(k, i) for k, i in kept if not any(k is m for m, _ in inside)] + [(module, info)]
    out = []
    for module, info in kept:
        total, trainable = _params(module)
        if total == 0:
            continue
        out.append(
            {
                "class": _class(module),
                "role": info.get("role", ""),
                "source": info.get("source") or "",
                "parameters": total,
                "trainable": trainable,
                "stacks": stacks(module),
                "shrunk": list(info.get("shrunk") or []),
            }
        )
    return out


def loads() -> list[dict[str, Any]]:
    """Each `from_pretrained` the rehearsal answered (name -> the folder read instead)."""
    return [dict(entry) for entry in STATE["loads"]]


def record_models(model: Any, engine: Any, world: int, record: Any) -> None:
    """Every model the recipe built (measured), what the rehearsal loaded in place of what, and whether the
    ranks fit in this machine's free memory once they step; a run that would not fit is not started."""
    import os

    from model_compile.runtime.rehearsal.measure import memory

    found = models(model, engine)
    params = sum(m["parameters"] for m in found)
    trainable = sum(m["trainable"] for m in found)
    rss = memory.rss_mb(os.getpid()) or 0.0
    expected = memory.expected_mb(rss, params, trainable, world)
    free = memory.machine()
    record.phase("models", built=found, loads=loads(), memory={**expected, **free, "rss_mb": rss})
    if not memory.fits(expected["more_mb"], free["available_mb"]):
        big = max(found, key=lambda m: m["parameters"]) if found else {}
        raise NotHere(
            f"the model(s) built here would not fit in this machine's free memory: {params:,} parameters "
            f"(largest: {big.get('class')}, {big.get('parameters', 0):,}); each of the {world} rank(s) holds "
            f"{rss:.0f} MB now and needs about {expected['state_mb'] + expected['activations_mb']:.0f} MB more to "
            f"step, {expected['more_mb']:.0f} MB in all, and {free['available_mb']} MB is free ({free['source']}, "
            f"{memory.RESERVE_MB} MB kept in reserve); shrink it (--config-override on its width fields) or "
            "rehearse on a machine with more memory"
        )

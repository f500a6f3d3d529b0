"""The models the recipe built, as the child measured them, into the rehearsal's facts.

The depth the facts carry is the built model's (its stacks counted on the module tree), not the plan's. Where
the recipe never read the tiny checkpoint the plan wrote (it builds from its own fields, say), the plan's
source, preset and "real depth unknown" are not what ran: the facts say what did.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from model_compile.hard.models import RehearsalFacts
from model_compile.hard.rehearsal.planning.plan import Plan


def phase(recs: dict[str, list[dict[str, Any]]], name: str) -> dict[str, Any]:
    """The phase of rank 0 of the last twin that recorded it (compiled, else eager, else reference)."""
    for twin in ("compiled", "eager", "reference"):
        rows = recs.get(twin) or []
        found = ((rows[0] if rows else {}).get("phases") or {}).get(name)
        if found:
            return dict(found)
    return {}


def _under(path: str, folder: str) -> bool:
    try:
        return Path(path).resolve().is_relative_to(Path(folder).resolve())
    except (OSError, ValueError):
        return False


def read(facts: RehearsalFacts, plan: Plan, recs: dict[str, list[dict[str, Any]]]) -> None:
    found = phase(recs, "models")
    if not found:
        return
    facts.models = list(found.get("built") or [])
    facts.loads = list(found.get("loads") or [])
    facts.memory = dict(found.get("memory") or {})
    if not facts.models:
        return
    main = facts.models[0]
    if main.get("stacks"):
        facts.depth = {path: text for path, text in main["stacks"].items()}
    shrunk = [s for m in facts.models for s in m.get("shrunk") or []]
    ckpt = (plan.spec.get("checkpoint") or {}).get("dir")
    # the plan's architecture is what ran when the recipe read the checkpoint's model or its config (a recipe that
    # builds from the config with random weights reads only the config)
    read_ckpt = bool(ckpt) and any(
        load.get("kind") in ("model", "config") and _under(str(load.get("to")), str(Path(str(ckpt)).parent))
        for load in facts.loads
    )
    if ckpt and not read_ckpt:
        facts.model_source = (
            f"built by the recipe itself ({main.get('source') or 'its own code'}), at the depth its config sets; "
            f"it never loaded the rehearsal's checkpoint of {plan.model.model_type} (which the plan prepared "
            "from its pretrained path)"
        )
        facts.depth_known = True
        facts.shrunk = shrunk
    elif getattr(plan.model, "resolved_at_call", False):
        _resolved(facts, plan, main, shrunk)
    elif not ckpt:
        facts.model_source = f"{plan.model.source}; {main.get('source') or 'built by the recipe itself'}"
        facts.shrunk = list(dict.fromkeys(list(plan.model.shrunk) + shrunk))
        facts.depth_known = True
    else:
        facts.shrunk = list(dict.fromkeys(list(plan.model.shrunk) + shrunk))
    others = [m for m in facts.models[1:] if m.get("parameters")]
    if others:
        facts.notes.append(
            "other models built: "
            + "; ".join(
                f"{m['class']} ({m['parameters']:,} parameters, {m.get('role')}"
                + (f", depth {', '.join(f'{k} {v}' for k, v in m['stacks'].items())}" if m.get("stacks") else "")
                + ")"
                for m in others[:4]
            )
        )
    stand_ins = [ld for ld in facts.loads if ld.get("source") and ld.get("source") != "planned"]
    for load in stand_ins[:4]:
        facts.notes.append(
            f"{load.get('class')}.from_pretrained({load.get('name')!r}) read a stand-in: {load.get('source')}, widths "
            "shrunk, random weights (the real weights are never read)"
        )


def _resolved(facts: RehearsalFacts, plan: Plan, main: dict[str, Any], shrunk: list[str]) -> None:
    """The main model's architecture, resolved in the child at the recipe's load call: what it was, and whether
    its depth is the policy's (unknown) or the recipe's own."""
    from model_compile.runtime.rehearsal.models import names

    wanted = next(iter(plan.spec.get("model_hints") or {}), None)
    repo = str(plan.spec.get("repo_root") or "")
    load = next(
        (
            ld
            for ld in facts.loads
            if ld.get("kind") == "model" and wanted and names.lookup({str(ld.get("name")): 1}, wanted, repo)
        ),
        None,
    )
    facts.shrunk = shrunk
    if load is None:
        facts.model_source = (
            f"built by the recipe itself ({main.get('source') or 'its own code'}), at the depth its config sets; it "
            f"never loaded the stage's pretrained path {wanted!r}"
        )
        facts.depth_known = True
        return
    facts.model_source = (
        f"{load.get('class')}.from_pretrained({load.get('name')!r}) (not on this machine) built {load.get('source')}"
    )
    facts.depth_known = not load.get("depth_unknown")
    facts.notes += [n for n in load.get("notes") or [] if n not in facts.notes]


def line(model: dict[str, Any]) -> str:
    """One model in a line: class, parameters, stacks, what was shrunk, where its config came from."""
    stacks = ", ".join(f"{k}: {v}" for k, v in (model.get("stacks") or {}).items()) or "no repeated blocks"
    shrunk = model.get("shrunk") or []
    width = (
        f"; shrunk: {', '.join(shrunk[:4])}" + (f" (+{len(shrunk) - 4})" if len(shrunk) > 4 else "") if shrunk else ""
    )
    return f"{model.get('class')} ({model.get('parameters', 0):,} parameters; {model.get('role')}): {stacks}{width}" + (
        f"; from {model['source']}" if model.get("source") else ""
    )

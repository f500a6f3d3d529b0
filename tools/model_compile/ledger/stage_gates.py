"""Which stages turn a step of prepare_model() on: the config keys its gate reads, looked up in each stage YAML.

A step's conditions (aliases resolved by the ledger) name config keys through whatever variable the code holds
them in: `self.config.model.gradient_checkpointing.enabled`, or `model_config.gradient_checkpointing.enabled`
after `model_config = self.config.model.model_copy()`. A key is matched in a stage's YAML by its longest dotted
tail that the YAML holds (the code's own variable dropped), so neither the variable's name nor the depth of the
section has to be known. Only `and`-joined switches are judged (`x`, `bool(x)`, `not x`, `x is True`); any other
condition (`hasattr(...)`, a comparison with a run-time value) is not a stage's to decide and is left aside.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from typing import Any

import yaml

from model_compile.ledger.models import Event

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_MISSING = object()


def load_stages(texts: Mapping[str, str]) -> dict[str, Any]:
    """{stage name (file stem): its YAML as data}; a stage that does not load is left out."""
    out: dict[str, Any] = {}
    for path, text in texts.items():
        name = path.rsplit("/", 1)[-1].rsplit(".", 1)[0]
        try:
            out[name] = yaml.load(text, Loader=_LOADER)  # noqa: S506 - a safe loader
        except yaml.YAMLError:
            continue
    return out


def _chain(node: ast.expr) -> list[str] | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name) and parts:
        return [node.id, *reversed(parts)]
    return None


def _paths(data: Any, prefix: tuple[str, ...] = ()) -> Iterable[tuple[tuple[str, ...], Any]]:
    if isinstance(data, dict):
        for key, value in data.items():
            if isinstance(key, str):
                yield (*prefix, key), value
                yield from _paths(value, (*prefix, key))


def lookup(data: Any, chain: list[str]) -> Any:
    """The value a stage gives the key `chain` names (its longest tail the YAML holds, one value, two segments at
    least where the chain has them), else _MISSING."""
    found = list(_paths(data))
    shortest = min(2, len(chain) - 1)  # `x.enabled` alone would match any section's `enabled`
    for n in range(len(chain) - 1, shortest - 1, -1):
        tail = tuple(chain[-n:])
        values = [v for path, v in found if path[-n:] == tail]
        if values and all(v == values[0] for v in values):
            value = values[0]
            return value.get("enabled", _MISSING) if isinstance(value, dict) else value
        if values:
            return _MISSING  # two places give it different values: not decided here
    return _MISSING


def _switches(condition: str) -> list[tuple[list[str], bool]]:
    """The config switches an `and`-joined condition reads, each with the value that makes it true."""
    try:
        node = ast.parse(condition, mode="eval").body
    except SyntaxError:
        return []
    parts = node.values if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And) else [node]
    out: list[tuple[list[str], bool]] = []
    for part in parts:
        want = True
        if isinstance(part, ast.UnaryOp) and isinstance(part.op, ast.Not):
            part, want = part.operand, False
        if isinstance(part, ast.Call) and isinstance(part.func, ast.Name) and part.func.id == "bool" and part.args:
            part = part.args[0]
        if isinstance(part, ast.Compare) and len(part.ops) == 1 and isinstance(part.ops[0], (ast.Is, ast.Eq)):
            right = part.comparators[0]
            if isinstance(right, ast.Constant) and isinstance(right.value, bool):
                part, want = part.left, right.value == want
        chain = _chain(part)
        if chain is not None and len(chain) > 1:
            out.append((chain, want))
    return out


def gate_on(event: Event, stages: Mapping[str, Any], defaults: Any = None) -> dict[str, bool | None]:
    """{stage: whether the event's gate is on there}: True when every switch it reads that the stage sets is on
    (an ungated step is on everywhere), False when one is off, None when it reads a switch the stage leaves out
    and `defaults` (the schema's field defaults as nested sections: parse.schema) does not decide either."""
    switches = [s for cond in event.condition for s in _switches(cond)]
    out: dict[str, bool | None] = {}
    for name, data in stages.items():
        state: bool | None = True
        for chain, want in switches:
            value = lookup(data, chain)
            if value is _MISSING and defaults:
                value = lookup(defaults, chain)
            if value is _MISSING or not isinstance(value, bool):
                state = None if state is True else state
            elif value != want:
                state = False
                break
        out[name] = state
    return out


def stages_with(events: list[Event], stages: Mapping[str, Any], defaults: Any = None) -> dict[str, bool | None]:
    """{stage: whether any of `events` (say, every checkpointing call prepare_model() reaches) runs there}; a
    switch a stage leaves out is the schema's default (`defaults`) where it has one."""
    out: dict[str, bool | None] = {name: False for name in stages}
    for event in events:
        for name, on in gate_on(event, stages, defaults).items():
            if on is True or (on is None and out[name] is False):
                out[name] = on
    return out

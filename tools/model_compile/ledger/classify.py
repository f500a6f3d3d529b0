"""Name the step a call performs: build, patch, freeze, compile, wrap ...

Recognition is by method and function names, never by import path, so a kit
held under any attribute (`self.model_kit`, `self.kit`, `kit`) is recognised.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from model_compile.ledger.models import EventKind
from model_compile.parse.python import dotted

# Model-kit methods and the step each performs.
KIT_METHODS: dict[str, EventKind] = {
    "apply_model_compile": "compile",
    "apply_model_patches": "patch",
    "apply_freeze_policy": "freeze",
    "apply_gradient_checkpointing": "checkpointing",
    "build_model": "build",
}

GRAPH_BREAK_CALLS = {
    "torch.compiler.disable",
    "torch._dynamo.disable",
    "compiler.disable",
    "_dynamo.disable",
    "dynamo.disable",
}

WRAP_NAMES = {
    "DistributedDataParallel",
    "DDP",
    "FullyShardedDataParallel",
    "FSDP",
    "fully_shard",
    "parallelize_module",
    "parallelize_model",
    "deepspeed.initialize",
}
WRAP_WORDS = re.compile(r"(^|_)(parallelize|parallelise|shard|fsdp|ddp|data_parallel)(\d*)(_|$)", re.I)
CHECKPOINT_WORDS = re.compile(
    r"gradient_checkpointing|activation_checkpointing|checkpoint_wrapper|(^|_)ac(_|$)|apply_ac\b", re.I
)
FREEZE_WORDS = re.compile(r"freeze", re.I)
PATCH_WORDS = re.compile(r"patch|liger", re.I)
BUILD_WORDS = re.compile(r"^(build|create|make|load|init)_.*model|^build_|from_pretrained$|from_config$", re.I)

# Receivers whose `.compile(...)` is not torch's (regex, code objects).
NOT_MODULE_COMPILE = {"re", "regex", "torch", "jit", "torch.jit", "builtins"}


_NONE: tuple[EventKind | None, Mapping[str, Any]] = (None, MappingProxyType({}))
# What the names alone cannot decide: the call's arguments are read too.
_BY_ARGUMENTS = "arguments"


def classify_call(call: ast.Call) -> tuple[EventKind | None, Mapping[str, Any]]:
    """The event kind of a call (or None) and extra facts (kit, style), read-only."""
    func = call.func
    if type(func) is ast.Attribute:
        receiver = dotted(func.value)
        last = func.attr
        full = f"{receiver}.{last}" if receiver is not None else ""
        found = _by_name(full, last, receiver, True)
    elif type(func) is ast.Name:
        found = _by_name(func.id, func.id, None, False)
        last = func.id
    else:  # `f()(...)`, `fns[0](...)`: no name to go by
        found = _NONE
        last = ""
    if found[0] != _BY_ARGUMENTS:
        return found  # type: ignore[return-value]
    if last == "requires_grad_":
        arg = call.args[0] if call.args else None
        if isinstance(arg, ast.Constant) and arg.value is False:
            return "freeze", _NONE[1]
        return _NONE
    if last in ("float", "bfloat16", "half") and not call.args:
        return "upcast", _NONE[1]
    if last == "to" and _has_dtype(call):
        return "upcast", _NONE[1]
    return _NONE


@functools.lru_cache(maxsize=4096)
def _by_name(full: str, last: str, receiver: str | None, is_attribute: bool) -> tuple[str | None, Mapping[str, Any]]:
    """The kind a call gets from its names alone, or `_BY_ARGUMENTS` when its arguments decide.

    Cached: a repository calls the same few hundred names over and over, and
    the word patterns below are the costly part of telling them apart.
    """
    if is_attribute and last in KIT_METHODS and receiver != "torch":
        return KIT_METHODS[last], _KIT
    if full in ("torch.compile",):
        return "compile", _TORCH_COMPILE
    if last == "compile" and is_attribute:
        if receiver in NOT_MODULE_COMPILE:
            return _NONE
        return "compile", _INPLACE
    if full in GRAPH_BREAK_CALLS or (last == "disable" and (receiver or "").endswith(("compiler", "_dynamo"))):
        return "graph_break", _NONE[1]
    if full in WRAP_NAMES or last in WRAP_NAMES or (last == "prepare" and "accelerator" in (receiver or "")):
        return "wrap", _NONE[1]
    if last == "initialize" and (receiver or "").endswith("deepspeed"):
        return "wrap", _NONE[1]
    if last.startswith("unshard"):
        return _NONE
    if WRAP_WORDS.search(last):
        return "wrap", _NONE[1]
    if CHECKPOINT_WORDS.search(last):
        return "checkpointing", _NONE[1]
    if last == "requires_grad_":
        return _BY_ARGUMENTS, _NONE[1]
    if FREEZE_WORDS.search(last):
        return "freeze", _NONE[1]
    if PATCH_WORDS.search(last):
        return "patch", _NONE[1]
    if BUILD_WORDS.search(last):
        return "build", _NONE[1]
    if last in ("float", "bfloat16", "half", "to"):
        return _BY_ARGUMENTS, _NONE[1]
    return _NONE


_KIT: Mapping[str, Any] = MappingProxyType({"kit": True})
_TORCH_COMPILE: Mapping[str, Any] = MappingProxyType({"style": "torch.compile"})
_INPLACE: Mapping[str, Any] = MappingProxyType({"style": "inplace"})


def _has_dtype(call: ast.Call) -> bool:
    if any(kw.arg == "dtype" for kw in call.keywords):
        return True
    for arg in call.args:
        text = dotted(arg) or ""
        if text.startswith("torch.") and any(t in text for t in ("float", "bfloat", "half")):
            return True
    return False


def is_graph_break_call(call: ast.Call) -> bool:
    """`torch.compiler.disable(...)` / `torch._dynamo.disable(...)` (any import spelling)."""
    return classify_call(call)[0] == "graph_break"


def is_graph_break_decorator(node: ast.expr) -> bool:
    """`@torch.compiler.disable` or `@torch._dynamo.disable(...)` style decorators."""
    target = node.func if isinstance(node, ast.Call) else node
    name = dotted(target) or ""
    return name in GRAPH_BREAK_CALLS or name.endswith(("compiler.disable", "_dynamo.disable"))

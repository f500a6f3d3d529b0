"""Name the step a call performs: build, patch, freeze, compile, wrap ...

Recognition is by method and function names, never by import path, so a kit
held under any attribute (`self.model_kit`, `self.kit`, `kit`) is recognised.
"""

from __future__ import annotations

import ast
import re
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


def call_name(call: ast.Call) -> tuple[str, str]:
    """(full dotted name or '', last component) of the called function."""
    full = dotted(call.func) or ""
    if isinstance(call.func, ast.Attribute):
        return full, call.func.attr
    if isinstance(call.func, ast.Name):
        return full, call.func.id
    return full, ""


def classify_call(call: ast.Call) -> tuple[EventKind | None, dict[str, Any]]:
    """The event kind of a call (or None) and extra facts (kit, style)."""
    full, last = call_name(call)
    receiver = dotted(call.func.value) if isinstance(call.func, ast.Attribute) else None

    if isinstance(call.func, ast.Attribute) and last in KIT_METHODS and receiver != "torch":
        return KIT_METHODS[last], {"kit": True}
    if full in ("torch.compile",):
        return "compile", {"style": "torch.compile"}
    if last == "compile" and isinstance(call.func, ast.Attribute):
        if receiver in NOT_MODULE_COMPILE:
            return None, {}
        return "compile", {"style": "inplace"}
    if full in GRAPH_BREAK_CALLS or (last == "disable" and (receiver or "").endswith(("compiler", "_dynamo"))):
        return "graph_break", {}
    if full in WRAP_NAMES or last in WRAP_NAMES or (last == "prepare" and "accelerator" in (receiver or "")):
        return "wrap", {}
    if last == "initialize" and (receiver or "").endswith("deepspeed"):
        return "wrap", {}
    if last.startswith("unshard"):
        return None, {}
    if WRAP_WORDS.search(last):
        return "wrap", {}
    if CHECKPOINT_WORDS.search(last):
        return "checkpointing", {}
    if last == "requires_grad_":
        arg = call.args[0] if call.args else None
        if isinstance(arg, ast.Constant) and arg.value is False:
            return "freeze", {}
        return None, {}
    if FREEZE_WORDS.search(last):
        return "freeze", {}
    if PATCH_WORDS.search(last):
        return "patch", {}
    if BUILD_WORDS.search(last):
        return "build", {}
    if last in ("float", "bfloat16", "half") and not call.args:
        return "upcast", {}
    if last == "to" and _has_dtype(call):
        return "upcast", {}
    return None, {}


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

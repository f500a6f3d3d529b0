"""A fix tried at run time: the compiled twin rerun with one change the rehearsal proposes, nothing written.

`spec["fix"]` holds one override (the parent's `reading/fixes.py` chooses it from a root cause):

- `compile_targets`: the recipe's own compile call (wherever it is, kit or recipe) compiles these modules of
  the model in place instead (patterns relative to the unwrapped model, `layers.*.mlp`), with its own backend
  and mode: the per-block scope of a `generate --path regional` edit, at the recipe's own placement;
- `drop_compile_kwargs`: the recipe's compile call without these arguments (a hard-coded `dynamic=False`);
- `call_kwargs`: the model called with these keyword arguments (`use_cache=False` in a training forward), where
  its forward takes them;
- `mark_dynamic`: `torch._dynamo.mark_dynamic(batch[key], dim)` on each micro-step's batch before the step.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterator
from typing import Any

from model_compile.runtime.targets import segment_match


@contextlib.contextmanager
def compile_calls(fix: dict[str, Any]) -> Iterator[list[str]]:
    """While the recipe prepares its model: its compile calls lose the fix's arguments, or, for a fix with
    `compile_targets`, compile nothing (each is recorded); `compile_targets()` then compiles the targets on the
    model prepare_model() returned. Yields the list the patched calls append what they did to."""
    import torch
    from torch import nn

    targets = list(fix.get("compile_targets") or [])
    drop = set(fix.get("drop_compile_kwargs") or [])
    done: list[str] = []
    if not targets and not drop:
        yield done
        return
    original_method = nn.Module.compile
    original_function = torch.compile
    kept: list[dict[str, Any]] = []

    def instead(module: nn.Module, kwargs: dict[str, Any]) -> None:
        kwargs = {k: v for k, v in kwargs.items() if k not in drop}
        if targets:
            kept.append(kwargs)  # the recipe's own compile, left out: the targets compile in its place
            return
        original_method(module, **kwargs)
        done.append(f"compiled {type(module).__name__} with {', '.join(sorted(drop))} dropped")

    def method(self: nn.Module, *args: Any, **kwargs: Any) -> None:
        instead(self, dict(kwargs))

    def function(model: Any = None, *args: Any, **kwargs: Any) -> Any:
        if isinstance(model, nn.Module):
            instead(model, dict(kwargs))
            return model
        return original_function(model, *args, **{k: v for k, v in kwargs.items() if k not in drop})

    setattr(nn.Module, "compile", method)  # noqa: B010 - patched for the trial, restored below
    setattr(torch, "compile", function)  # noqa: B010
    try:
        yield done
    finally:
        setattr(nn.Module, "compile", original_method)  # noqa: B010
        setattr(torch, "compile", original_function)  # noqa: B010
    if targets:
        fix["_recipe_compile"] = kept[0] if kept else {}
        done.append(f"the recipe's {len(kept)} compile call(s) left out")


def compile_targets(model: Any, fix: dict[str, Any]) -> str | None:
    """The fix's targets compiled in place on the prepared model, with the recipe's backend and mode."""
    targets = list(fix.get("compile_targets") or [])
    if not targets:
        return None
    from torch import nn

    from model_compile.runtime.dynamo_adapter import unwrap

    kwargs = dict(fix.get("_recipe_compile") or {})
    root = unwrap(model)
    hits = [m for n, m in root.named_modules() if any(segment_match(p, n) for p in targets)]
    for module in hits:
        nn.Module.compile(module, **kwargs)
    return f"compiled {len(hits)} module(s) matching {', '.join(targets)} after prepare_model()"


def call_kwargs(model: Any, fix: dict[str, Any]) -> str | None:
    """The model called with the fix's keyword arguments (a forward pre-hook), where its forward takes them."""
    wanted = dict(fix.get("call_kwargs") or {})
    if not wanted:
        return None
    from model_compile.runtime.dynamo_adapter import unwrap

    root = unwrap(model)
    try:
        params: Any = inspect.signature(root.forward).parameters
    except (TypeError, ValueError):
        params = {}
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    usable = {k: v for k, v in wanted.items() if k in params or takes_any}
    if not usable:
        return f"the model's forward takes none of {', '.join(wanted)}: nothing changed"

    def hook(_module: Any, args: Any, kwargs: dict[str, Any]) -> Any:
        return args, {**kwargs, **usable}

    root.register_forward_pre_hook(hook, with_kwargs=True)
    return "the model is called with " + ", ".join(f"{k}={v!r}" for k, v in usable.items())


def mark_dynamic(data: Any, fix: dict[str, Any]) -> None:
    """Each pair `[key, dim]` of the fix marked dynamic on this micro-step's batch."""
    pairs = fix.get("mark_dynamic") or []
    if not pairs or not isinstance(data, dict):
        return
    import torch

    for key, dim in pairs:
        value = data.get(key)
        if isinstance(value, torch.Tensor) and value.dim() > int(dim):
            torch._dynamo.mark_dynamic(value, int(dim))

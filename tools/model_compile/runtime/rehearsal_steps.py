"""One rehearsal step: the recipe's forward and loss path, backward, and what dynamo did during it.

Runs inside the rehearsal child (`runtime/rehearsal.py`); imports torch lazily.
"""

from __future__ import annotations

import inspect
import logging
import sys
from pathlib import Path
from typing import Any

_LIMIT_MARKERS = ("recompile_limit", "cache_size_limit", "recompile limit", "cache size limit")


def unwrap(model: Any) -> Any:
    from model_compile.runtime.dynamo_adapter import unwrap as _unwrap

    return _unwrap(model)


def short_error(exc: BaseException) -> str:
    """`Type: first line of the message`, whitespace collapsed."""
    text = f"{type(exc).__name__}: {exc}".strip()
    return " ".join(text.splitlines()[0].split())[:400]


class StepRunner:
    """Runs one training step's forward and backward through the recipe's own path where it has one."""

    def __init__(self, engine: Any, spec: dict[str, Any]) -> None:
        self.engine = engine
        self.path = "model"
        self.pre_step = False
        self.notes: list[str] = []
        cls = type(engine)
        recipe_root = Path(spec["recipe_root"]).resolve()
        if callable(getattr(cls, "compute_loss", None)) and _params(cls.compute_loss)[:2] in (["model", "batch"],):
            self.path = "engine.compute_loss"
        elif _defined_in(cls, "forward_step", recipe_root):
            self.path = "engine.forward_step"
            self.pre_step = _defined_in(cls, "train_pre_step", recipe_root)
        self.ctx_class = _ctx_class(engine) if self.path == "engine.forward_step" else None
        self.captured: dict[str, Any] = {}

    def describe(self) -> str:
        if self.path == "engine.forward_step":
            return "the recipe's " + ("train_pre_step + " if self.pre_step else "") + "forward_step"
        if self.path == "engine.compute_loss":
            return "the recipe's compute_loss"
        return "the model's forward with labels"

    def _hook(self, model: Any) -> Any:
        """A forward hook on the outermost module when it is not compiled itself (it sees the model output)."""
        import torch

        if isinstance(model, torch._dynamo.eval_frame.OptimizedModule) or getattr(model, "_compiled_call_impl", None):
            return None

        def keep(_module: Any, _args: Any, _kwargs: Any, output: Any) -> None:
            logits = getattr(output, "logits", None)
            if logits is None and isinstance(output, dict):
                logits = output.get("logits")
            if isinstance(logits, torch.Tensor):
                self.captured["logits"] = logits.detach().float().clone()

        return model.register_forward_hook(keep, with_kwargs=True)

    def run(self, model: Any, batch: dict[str, Any]) -> Any:
        """Forward + backward of one batch; returns the loss tensor (detached)."""
        import torch

        self.captured = {}
        device = getattr(self.engine, "device", None) or torch.device("cpu")
        batch = {k: (v.to(device) if isinstance(v, torch.Tensor) else v) for k, v in batch.items()}
        self.engine.model = model
        handle = self._hook(model)
        try:
            loss = self._forward(model, batch)
        finally:
            if handle is not None:
                handle.remove()
        if not isinstance(loss, torch.Tensor):
            raise TypeError(f"the forward path gave no loss tensor ({type(loss).__name__})")
        scalar = loss.float().sum() if loss.dim() else loss.float()
        scalar.backward()
        return loss.detach().float().clone()

    def _forward(self, model: Any, batch: dict[str, Any]) -> Any:
        if self.path == "engine.compute_loss":
            return (
                type(self.engine).compute_loss(model, batch)
                if _is_static(type(self.engine), "compute_loss")
                else (self.engine.compute_loss(model, batch))
            )
        if self.path == "engine.forward_step":
            ctx = _make_ctx(self.ctx_class, batch)
            if self.pre_step:
                returned = self.engine.train_pre_step(ctx)
                ctx = returned if returned is not None else ctx
            returned = self.engine.forward_step(ctx)
            return _loss_of(ctx, returned)
        inner = unwrap(model)
        accepted = set(inspect.signature(inner.forward).parameters)
        kwargs = {k: v for k, v in batch.items() if k in accepted}
        if "use_cache" in accepted:
            kwargs["use_cache"] = False
        out = model(**kwargs)
        logits = getattr(out, "logits", None)
        if logits is not None:
            self.captured.setdefault("logits", logits.detach().float().clone())
        return out.loss


def _params(fn: Any) -> list[str]:
    try:
        return [p for p in inspect.signature(fn).parameters if p != "self"]
    except (TypeError, ValueError):
        return []


def _is_static(cls: type, name: str) -> bool:
    for klass in cls.__mro__:
        if name in vars(klass):
            return isinstance(vars(klass)[name], staticmethod)
    return False


def _defined_in(cls: type, name: str, recipe_root: Path) -> bool:
    """`name` is defined by a class whose source file lies in the recipe (not only by the shared base)."""
    for klass in cls.__mro__:
        if name in vars(klass):
            try:
                file = Path(inspect.getsourcefile(klass) or "").resolve()
            except (TypeError, OSError):
                return False
            return recipe_root in file.parents
    return False


def _ctx_class(engine: Any) -> Any:
    """The step-context class the engine's forward_step takes (its annotation, or a module global)."""
    module = sys.modules.get(type(engine).__module__)
    try:
        annotation = inspect.signature(type(engine).forward_step).parameters.get("ctx")
        name = annotation.annotation if annotation is not None else None
    except (TypeError, ValueError):
        name = None
    if isinstance(name, str) and module is not None and hasattr(module, name):
        return getattr(module, name)
    if isinstance(name, type):
        return name
    for candidate in ("TrainStepContext", "StepContext"):
        if module is not None and hasattr(module, candidate):
            return getattr(module, candidate)
    return None


def _make_ctx(cls: Any, batch: dict[str, Any]) -> Any:
    import dataclasses
    from types import SimpleNamespace

    values = {"data": batch, "step": 0, "epoch": 0, "micro_step": 0}
    if cls is not None and dataclasses.is_dataclass(cls):
        kwargs = {}
        for f in dataclasses.fields(cls):
            if f.name in values:
                kwargs[f.name] = values[f.name]
            elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                kwargs[f.name] = None
        return cls(**kwargs)  # type: ignore[operator]
    return SimpleNamespace(outputs=None, loss=None, should_sync=True, **values)


def _loss_of(ctx: Any, returned: Any) -> Any:
    import torch

    if isinstance(returned, torch.Tensor):
        return returned
    outputs = getattr(ctx, "outputs", None) if not isinstance(ctx, dict) else ctx.get("outputs")
    if isinstance(outputs, dict) and isinstance(outputs.get("loss"), torch.Tensor):
        return outputs["loss"]
    loss = getattr(ctx, "loss", None) if not isinstance(ctx, dict) else ctx.get("loss")
    if isinstance(loss, torch.Tensor):
        return loss
    return getattr(returned, "loss", None)


def grads_of(model: Any) -> dict[str, Any]:
    out = {}
    for name, param in unwrap(model).named_parameters():
        if param.grad is not None:
            out[name] = param.grad.detach().float().clone()
        param.grad = None
    return out


def rel_err(a: Any, b: Any) -> float:
    """max|a - b| / max|b| (0 for two empty or all-zero tensors)."""
    import torch

    if a.shape != b.shape:
        return float("inf")
    diff = (a - b).abs().max().item() if a.numel() else 0.0
    scale = b.abs().max().item() if b.numel() else 0.0
    if not torch.isfinite(torch.tensor(diff)):
        return float("inf")
    return diff / max(scale, 1e-12) if diff else 0.0


class DynamoWatch:
    """Per-step compile events: new recompiles (failed guard, frame), recompile-limit hits, graph-break reasons."""

    def __init__(self) -> None:
        from model_compile.runtime.dynamo_adapter import _LimitHandler

        self.handler = _LimitHandler()
        # Where dynamo logs the limit warning, as RuntimeProbe listens: a handler on the parent logger
        # too would get every message twice (the child's record propagates to it).
        logging.getLogger("torch._dynamo.convert_frame").addHandler(self.handler)
        self._guards: dict[Any, int] = {}
        self._breaks: dict[str, int] = {}
        self._graphs = 0
        self.snapshot()

    def snapshot(self) -> None:
        from torch._dynamo.utils import counters, guard_failures

        self._guards = {k: len(v) for k, v in guard_failures.items()}
        self._breaks = dict(counters["graph_break"])
        self._graphs = int(counters["stats"].get("unique_graphs", 0))
        self.handler.messages.clear()

    def delta(self) -> dict[str, Any]:
        from torch._dynamo.utils import counters, guard_failures

        from model_compile.runtime.dynamo_adapter import _code_label

        recompiles = []
        for code, items in guard_failures.items():
            for reason in items[self._guards.get(code, 0) :]:
                recompiles.append({"frame": _code_label(code), "guard": " ".join(str(reason).split())[:300]})
        breaks = {}
        for reason, n in counters["graph_break"].items():
            d = n - self._breaks.get(reason, 0)
            if d > 0:
                breaks[" ".join(str(reason).split())[:200]] = d
        graphs = int(counters["stats"].get("unique_graphs", 0)) - self._graphs
        limit = list(self.handler.messages)
        limit += [r for r in breaks if any(m in r.lower() for m in _LIMIT_MARKERS)]  # "recompile limit exceeded"
        self.snapshot()
        return {"recompiles": recompiles, "graph_breaks": breaks, "new_graphs": graphs, "limit_hits": limit}

    def close(self) -> None:
        logging.getLogger("torch._dynamo.convert_frame").removeHandler(self.handler)

"""Drive the recipe's own training loop and watch it: `before_train()` then `do_train()`, as the recipe's
launcher runs them, until the planned number of optimizer steps has been taken.

Nothing of the loop is replaced. The engine's phase methods are wrapped on the instance to observe them:
`prepare_model` (the keys and compiled modules of what it returns; the twin's initial weights made equal),
`train_exec_step`
(one micro-step: its time, what dynamo compiled during it, the batch's shapes; on the last optimizer step's
micro-steps also which operators ran compiled, `measure/coverage.py`), `forward_step` (the loss) and
`backward_step` (on a micro-step that should not sync, whether gradients were reduced anyway); torch's global
optimizer step pre-hook takes the gradients each optimizer step applies, however the recipe built it. After the
planned optimizer steps the wrapper raises `Enough`, which ends the loop without its `after_train()`.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

from model_compile.runtime.rehearsal.inputs.rows import STATE as rows_state
from model_compile.runtime.rehearsal.measure.watch import Watch


class Enough(Exception):
    """The planned optimizer steps are done."""


def _strip(name: str) -> str:
    for prefix in ("_orig_mod.", "module."):
        name = name.replace(prefix, "")
    return name


def _local(tensor: Any) -> Any:
    to_local = getattr(tensor, "to_local", None)
    return to_local() if callable(to_local) else tensor


def describe(data: Any) -> str:
    """One step's batch in a few words: token shape, images and their grids."""
    import torch

    if not isinstance(data, dict):
        return type(data).__name__
    parts = []
    ids = data.get("input_ids")
    if isinstance(ids, torch.Tensor):
        parts.append("tokens " + "x".join(str(d) for d in ids.shape))
    grid = data.get("image_grid_thw")
    if isinstance(grid, torch.Tensor) and grid.numel():
        sizes = sorted({f"{int(h)}x{int(w)}" for _, h, w in grid.tolist()})
        parts.append(f"{grid.shape[0]} image(s) {'/'.join(sizes)}")
    pixels = data.get("pixel_values")
    if isinstance(pixels, torch.Tensor) and grid is None:
        parts.append("pixels " + "x".join(str(d) for d in pixels.shape))
    if not parts:
        shapes = [f"{k} {'x'.join(str(d) for d in v.shape)}" for k, v in data.items() if isinstance(v, torch.Tensor)]
        parts = shapes[:3] or ["no tensors"]
    return ", ".join(parts)


def shapes_of(data: Any) -> dict[str, list[int]]:
    import torch

    if not isinstance(data, dict):
        return {}
    return {k: list(v.shape) for k, v in data.items() if isinstance(v, torch.Tensor)}


class Driver:
    """Wraps one engine's phases; `run()` trains until `steps` optimizer steps are done."""

    def __init__(
        self,
        engine: Any,
        steps: int,
        initial: dict[str, Any] | None,
        on_model: Any,
        feed: Any,
        wide: Any = None,
        meter: Any = None,
        fix: dict[str, Any] | None = None,
        upcast: bool = False,
    ) -> None:
        self.engine = engine
        # the fp32 reference of a bf16/fp16 recipe: parameters the recipe holds in low precision go to fp32 too
        self.upcast = upcast
        self.upcast_note: str | None = None
        self.fix = fix or {}  # one override a fix trial applies (runtime/rehearsal/override.py)
        self.fix_applied: list[str] = []
        self.make_meter = meter  # model -> a coverage Meter (measure/coverage.py), or None: coverage not measured
        self.meter: Any = None
        self.measuring = False  # the coverage meter is counting the micro-step running now
        self.wide = wide  # the float64 reference: the model built in this dtype, its floating inputs cast to it
        self.feed = feed  # replaces the train loader where the recipe's data path cannot feed the run
        self.steps = steps
        self.initial = initial  # local parameter tensors to start from (the reference twin's), or None
        self.on_model = on_model  # called with the prepared model (keys, targets)
        self.micro: list[dict[str, Any]] = []
        self.grads: list[dict[str, Any]] = []  # each optimizer step: names, sizes, one flat tensor
        self.losses: list[float] = []
        self.sync_checks: list[dict[str, Any]] = []
        self.optimizer_steps = 0
        self.model: Any = None
        self.init_params: dict[str, Any] = {}
        self.copied = 0
        self.watch: Watch | None = None
        self._loss: float | None = None
        self._names: dict[int, str] = {}
        self.optimizer: Any = None  # the optimizer the recipe steps (seen by the step pre-hook)
        self._wrap()

    # -- wrapping ----------------------------------------------------------
    def _wrap(self) -> None:
        engine = self.engine
        for name in (
            "prepare_dataloader",
            "prepare_model",
            "train_exec_step",
            "forward_step",
            "backward_step",
        ):
            original = getattr(engine, name, None)
            if callable(original):
                setattr(engine, name, getattr(self, f"_{name}")(original))
        older = getattr(engine, "train_one_step", None)  # an older engine's micro-step: its forward, then
        if not callable(getattr(engine, "train_exec_step", None)) and callable(older):  # train_after_step
            engine.train_one_step = self._train_exec_step(older)

    def _prepare_dataloader(self, original: Any) -> Any:
        def wrapped(workflow: str = "train", *args: Any, **kwargs: Any) -> Any:
            if workflow == "train":  # the recipe's loader, or synthetic batches where it cannot feed the run here
                return self.feed.train_loader(original, workflow, *args, **kwargs)
            return original(workflow, *args, **kwargs)

        return wrapped

    def _prepare_model(self, original: Any) -> Any:
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            if self.wide is not None:
                import torch

                before = torch.get_default_dtype()
                torch.set_default_dtype(self.wide)  # the model only: the recipe's data keeps its own dtype
                try:
                    model = original(*args, **kwargs)
                finally:
                    torch.set_default_dtype(before)
                model.register_forward_pre_hook(_cast_inputs(self.wide), with_kwargs=True)
            else:
                from model_compile.runtime.rehearsal import override

                with override.compile_calls(self.fix) as done:
                    model = original(*args, **kwargs)
                self.fix_applied += done
                for applied in (override.compile_targets(model, self.fix), override.call_kwargs(model, self.fix)):
                    if applied:
                        self.fix_applied.append(applied)
                if self.upcast:
                    self.upcast_note = _upcast(model)
            self.model = model
            self._names = {id(p): _strip(n) for n, p in model.named_parameters()}
            self._start_from(model)
            if self.make_meter is not None:
                self.meter = self.make_meter(model)
            self.on_model(model)
            return model

        return wrapped

    def _before_optimizer_step(self, optimizer: Any, _args: Any, _kwargs: Any) -> None:
        """The gradients this step applies, as one flat fp32 copy with the names and sizes (`parity.pack`'s
        form of a step): one allocation a step, not one a parameter."""
        import torch

        names: list[str] = []
        parts: list[Any] = []
        self.optimizer = optimizer
        for group in optimizer.param_groups:
            for param in group["params"]:
                if param.grad is not None:
                    names.append(self._names.get(id(param), f"param{len(names)}"))
                    parts.append(_local(param.grad).detach().float().reshape(-1))
        flat = torch.cat(parts) if parts else torch.zeros(0)
        self.grads.append({"names": names, "sizes": [int(p.numel()) for p in parts], "flat": flat})
        self.optimizer_steps += 1

    def _train_exec_step(self, original: Any) -> Any:
        def wrapped(ctx: Any, *args: Any, **kwargs: Any) -> Any:
            if self.optimizer_steps >= self.steps:
                raise Enough  # (an engine whose optimizer steps after this method returns)
            data = ctx.get("batch", ctx.get("data", ctx)) if isinstance(ctx, dict) else getattr(ctx, "data", ctx)
            before = self.optimizer_steps
            self._loss = None
            rows_state["batches"] += 1
            assert self.watch is not None
            self.watch.snapshot()
            # the coverage map is measured on the micro-steps of the last optimizer step, after any limit hit
            measured = self.meter is not None and before == self.steps - 1
            if self.fix.get("mark_dynamic"):
                from model_compile.runtime.rehearsal.override import mark_dynamic

                mark_dynamic(data, self.fix)
            t0 = time.perf_counter()
            self.measuring = measured  # a failure while the coverage meter counts: the parent runs a control
            with self.meter.measure(len(self.micro)) if measured else contextlib.nullcontext():
                out = original(ctx, *args, **kwargs)
            self.measuring = False
            seconds = time.perf_counter() - t0
            if self._loss is None and (loss := loss_of(ctx, out)) is not None:
                self._loss = float(loss.detach().float().sum())
            row = {
                "micro": len(self.micro),
                "step": before,
                "shape": describe(data),
                "shapes": shapes_of(data),
                "seconds": round(seconds, 4),
                "loss": self._loss,
                "optimizer_step": self.optimizer_steps > before,
                "coverage": measured,
                **self.watch.delta(),
            }
            self.micro.append(row)
            if self._loss is not None:
                self.losses.append(self._loss)
            if self.optimizer_steps >= self.steps:
                raise Enough
            return out

        return wrapped

    def _forward_step(self, original: Any) -> Any:
        def wrapped(ctx: Any, *args: Any, **kwargs: Any) -> Any:
            out = original(ctx, *args, **kwargs)
            loss = loss_of(ctx, out)
            if loss is not None:
                self._loss = float(loss.detach().float().sum())
            return out

        return wrapped

    def _backward_step(self, original: Any) -> Any:
        def wrapped(ctx: Any, *args: Any, **kwargs: Any) -> Any:
            out = original(ctx, *args, **kwargs)
            should_sync = ctx.get("should_sync") if isinstance(ctx, dict) else getattr(ctx, "should_sync", None)
            if should_sync is False and self.model is not None:
                self.sync_checks.append({"micro": len(self.micro), **sync_state(self.model)})
            return out

        return wrapped

    # -- weights -----------------------------------------------------------
    def _start_from(self, model: Any) -> None:
        """Record this twin's initial local parameters, and check them against the first twin's: the twins
        build their models from the same seed, so they start equal; a parameter that does not is copied over
        (and counted), so each twin trains the same function."""
        import torch

        self.copied = 0
        with torch.no_grad():
            for name, param in model.named_parameters():
                key = _strip(name)
                local = _local(param)
                if self.initial is not None and key in self.initial:
                    theirs = self.initial[key]
                    if theirs.shape == local.shape and not torch.equal(theirs.to(local.dtype), local.detach()):
                        local.copy_(theirs.to(local.dtype))
                        self.copied += 1
                self.init_params[key] = local.detach().clone()

    # -- running -----------------------------------------------------------
    def run(self) -> None:
        """The recipe's loop; every optimizer's step (whatever built it) is seen through torch's global
        step pre-hook, so the gradients it applies are taken and the planned steps counted."""
        from torch.optim.optimizer import register_optimizer_step_pre_hook

        engine = self.engine
        self.watch = Watch()
        handle = register_optimizer_step_pre_hook(self._before_optimizer_step)
        try:
            if callable(getattr(engine, "before_train", None)) and callable(getattr(engine, "do_train", None)):
                engine.before_train()
                engine.do_train()
            else:
                engine.train()
        except Enough:
            pass
        finally:
            handle.remove()
            self.watch.close()


def _cast_inputs(dtype: Any) -> Any:
    """A forward pre-hook that casts the floating tensors a model is called with to `dtype`."""
    import torch

    def cast(value: Any) -> Any:
        if isinstance(value, torch.Tensor) and value.is_floating_point() and value.dtype != dtype:
            return value.to(dtype)
        if isinstance(value, dict):
            return {k: cast(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return type(value)(cast(v) for v in value)
        return value

    def hook(_module: Any, args: Any, kwargs: Any) -> Any:
        return cast(args), cast(kwargs)

    return hook


def loss_of(ctx: Any, returned: Any) -> Any:
    """The micro-step's loss: what forward_step returned, else the context's outputs['loss'] or loss."""
    import torch

    if isinstance(returned, torch.Tensor):
        return returned
    if isinstance(returned, dict) and isinstance(returned.get("loss"), torch.Tensor):
        return returned["loss"]  # an older engine's micro-step returns the model's outputs
    get = ctx.get if isinstance(ctx, dict) else (lambda key: getattr(ctx, key, None))
    outputs = get("outputs")
    if isinstance(outputs, dict) and isinstance(outputs.get("loss"), torch.Tensor):
        return outputs["loss"]
    loss = getattr(outputs, "loss", None)
    if isinstance(loss, torch.Tensor):
        return loss
    loss = get("loss")
    return loss if isinstance(loss, torch.Tensor) else None


def sync_state(model: Any) -> dict[str, Any]:
    """After a micro-step that should not sync: were the gradients reduced across ranks anyway?

    FSDP2: a sharded parameter holds a gradient only after its reduce-scatter (no-sync micro-steps accumulate
    the unsharded gradient inside FSDP), so any sharded `.grad` means the step synced. DDP and other replicated
    wraps: the ranks see different data, so equal gradient sums on every rank mean an all-reduce ran.
    """
    import torch
    import torch.distributed as dist

    world = dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1
    params = [p for p in model.parameters() if p.requires_grad]
    sharded = [p for p in params if hasattr(p, "to_local") and hasattr(p, "placements")]
    if sharded:
        reduced = any(p.grad is not None for p in sharded)
        return {"world": world, "wrap": "fsdp2", "reduced": reduced, "how": "a sharded .grad exists after backward"}
    if world < 2:
        return {"world": world, "wrap": "replicated", "reduced": None, "how": "one rank: nothing to compare"}
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return {"world": world, "wrap": "replicated", "reduced": None, "how": "no gradient yet"}
    total = torch.stack([g.detach().float().sum() for g in grads[:8]])
    gathered = [torch.zeros_like(total) for _ in range(world)]
    dist.all_gather(gathered, total)
    equal = all(torch.allclose(gathered[0], g, rtol=1e-6, atol=0) for g in gathered[1:])
    sums = [[round(float(x), 6) for x in g[:3]] for g in gathered]
    return {
        "world": world,
        "wrap": "replicated",
        "reduced": bool(equal),
        "how": "gradient sums equal on every rank",
        "sums": sums,
    }


def _upcast(model: Any) -> str | None:
    """The fp32 reference's model in fp32 throughout: a submodule the recipe keeps in bf16/fp16 (a frozen tower
    loaded in its checkpoint's dtype) would meet fp32 activations once autocast is off. What was cast, or None."""
    import torch

    low = (torch.bfloat16, torch.float16)
    held = [(n, p) for n, p in model.named_parameters() if p.dtype in low]
    if not held:
        return None
    for _, param in held:
        param.data = param.data.float()
    names = [n for n, _ in held]
    for module in model.modules():
        for key, buf in list(module._buffers.items()):
            if buf is not None and buf.dtype in low:
                module._buffers[key] = buf.float()
    more = f" and {len(names) - 3} more" if len(names) > 3 else ""
    return f"the fp32 reference cast {len(names)} parameter(s) the recipe holds in low precision to fp32 ({', '.join(names[:3])}{more})"

"""The rehearsal child: the recipe's own prepare_model() on a tiny model, eager twin vs compiled.

Run by `model-compile rehearse` (and the rehearsal layer of `--hard`) in the
repository's own interpreter, as `python -m model_compile.runtime.rehearsal
SPEC.json`, with the probe on PYTHONPATH and a one-rank distributed
environment. It writes RESULT.json (the spec's `out`) after every phase, so a
crash or a timeout still leaves what was done.

Phases: tiny checkpoint (when the stage loads one) -> config (the stage YAML
plus the rehearsal's overrides) -> engine (the recipe's class, built from that
config) -> eager twin (`prepare_model()` with compile off) -> compiled
(`prepare_model()` with compile on: the real patches, freeze, upcast,
checkpointing, compile and distributed wrap) -> keys -> steps (the same
batches through both, loss/logits/gradient parity per step, graph breaks,
recompiles and recompile-limit hits per step, step times).

No optimizer step is taken: the weights stay equal, so every step's parity is
a comparison of the same function on the same inputs.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import json
import logging
import os
import resource
import statistics
import sys
import time
import traceback
from pathlib import Path
from typing import Any

PHASES = ("checkpoint", "config", "engine", "eager", "compiled", "keys", "steps")
_LIMIT_MARKERS = ("recompile_limit", "cache_size_limit", "recompile limit", "cache size limit")
# tolerances on max|compiled - eager| / max|eager| per tensor
TOLERANCE = {"fp32": 1e-5, "fp32-inductor": 1e-3, "low-precision": 1.6e-2}


class Result:
    """The record the parent reads; written after every phase."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.data: dict[str, Any] = {"schema": "model-compile-rehearsal/1", "phases": {}, "status": "running"}

    def phase(self, name: str, **facts: Any) -> None:
        self.data["phases"][name] = {"ok": True, **facts}
        self.flush()

    def stop(self, phase: str, status: str, reason: str, detail: str = "") -> None:
        self.data["phases"][phase] = {"ok": False, "reason": reason, "detail": detail[-4000:]}
        self.data["status"] = status
        self.data["stopped_at"] = phase
        self.data["reason"] = reason
        self.flush()

    def flush(self) -> None:
        self.data["peak_rss_mb"] = _peak_rss_mb()
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=2, default=str))
        tmp.replace(self.path)


def _peak_rss_mb() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    scale = 1024 * 1024 if sys.platform == "darwin" else 1024
    return round(max(own, kids) / scale, 1)


def _short_error(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    return " ".join(text.splitlines()[0].split())[:400]


# -- config ---------------------------------------------------------------


def load_config(spec: dict[str, Any], compile_on: bool, engine_class: Any = None) -> Any:
    """The stage config with the rehearsal's overrides, as the engine class wants it.

    An engine that validates its config itself (a `ConfigClass` or `prepare_config`) gets the OmegaConf
    node, as its launcher gives it; otherwise the recipe's schema root class validates it first.
    """
    overrides = list(spec["overrides"])
    section = spec["compile_section"]
    overrides.append(f"{section}.enabled={'true' if compile_on else 'false'}")
    if compile_on:
        overrides += [f"{section}.backend={spec['backend']}", f"{section}.mode={spec['mode']}"]
    try:
        from omegaconf import OmegaConf
    except ImportError:
        OmegaConf = None  # noqa: N806
    path = Path(spec["config_file"])
    if OmegaConf is not None:
        config = OmegaConf.merge(OmegaConf.load(path), OmegaConf.from_dotlist(overrides))
        if _validates_itself(engine_class):
            return config
        return _validate(spec, OmegaConf.to_container(config, resolve=True))
    import yaml

    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    for item in overrides:
        key, value = item.split("=", 1)
        *parents, leaf = key.split(".")
        node = data
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = yaml.safe_load(value)
    return _validate(spec, data) if spec.get("schema_module") else data


def _validates_itself(engine_class: Any) -> bool:
    return engine_class is not None and (hasattr(engine_class, "ConfigClass") or hasattr(engine_class, "prepare_config"))


def _validate(spec: dict[str, Any], data: Any) -> Any:
    if not spec.get("schema_module") or not spec.get("schema_class"):
        return data
    schema = importlib.import_module(spec["schema_module"])
    return getattr(schema, spec["schema_class"]).model_validate(data)


def set_path(obj: Any, dotted: str, value: Any) -> None:
    """obj.a.b.c = value for a pydantic model, an OmegaConf node or a dict."""
    *parents, leaf = dotted.split(".")
    for part in parents:
        obj = obj[part] if isinstance(obj, dict) else getattr(obj, part)
    if isinstance(obj, dict):
        obj[leaf] = value
    else:
        setattr(obj, leaf, value)


# -- model facts ----------------------------------------------------------


def unwrap(model: Any) -> Any:
    from model_compile.runtime.dynamo_adapter import unwrap as _unwrap

    return _unwrap(model)


def key_facts(model: Any) -> dict[str, Any]:
    """state_dict keys, parameter names and the distributed-checkpoint keys of what prepare_model() returned."""
    facts: dict[str, Any] = {
        "state_dict": sorted(model.state_dict().keys()),
        "parameters": sorted(n for n, _ in model.named_parameters()),
    }
    try:
        from torch.distributed.checkpoint.state_dict import get_model_state_dict

        facts["dcp"] = sorted(get_model_state_dict(model).keys())
    except Exception as exc:  # noqa: BLE001 - reported, not fatal
        facts["dcp"] = None
        facts["dcp_error"] = _short_error(exc)
    return facts


def compare_keys(eager: dict[str, Any], compiled: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in ("state_dict", "parameters", "dcp"):
        a, b = eager.get(name), compiled.get(name)
        if a is None or b is None:
            out[name] = {"checked": False, "reason": compiled.get("dcp_error") or eager.get("dcp_error") or "unavailable"}
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
        module = root
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


# -- stepping -------------------------------------------------------------


class StepRunner:
    """Runs one training step's forward and backward through the recipe's own path where it has one."""

    def __init__(self, engine: Any, spec: dict[str, Any]) -> None:
        self.engine = engine
        self.spec = spec
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
            return type(self.engine).compute_loss(model, batch) if _is_static(type(self.engine), "compute_loss") else (
                self.engine.compute_loss(model, batch)
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
            elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:  # type: ignore[misc]
                kwargs[f.name] = None
        return cls(**kwargs)
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
        self.handler = _LimitHandler()
        logging.getLogger("torch._dynamo").addHandler(self.handler)
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
        limit += [r for r in breaks if any(m in r.lower() for m in _LIMIT_MARKERS)]
        self.snapshot()
        return {"recompiles": recompiles, "graph_breaks": breaks, "new_graphs": graphs, "limit_hits": limit}

    def close(self) -> None:
        logging.getLogger("torch._dynamo").removeHandler(self.handler)
        logging.getLogger("torch._dynamo.convert_frame").removeHandler(self.handler)


class _LimitHandler(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            msg = record.getMessage()
        except Exception:  # noqa: BLE001 - a logging handler must never raise
            return
        if "hit config." in msg and any(m in msg for m in _LIMIT_MARKERS):
            self.messages.append(" ".join(" ".join(msg.strip().splitlines()[:3]).split())[:400])


def _code_label(code: Any) -> str:
    name = getattr(code, "co_name", str(code))
    file = getattr(code, "co_filename", "")
    line = getattr(code, "co_firstlineno", "")
    return f"{name} ({file}:{line})" if file else str(name)


# -- main -----------------------------------------------------------------


def _tolerance_class(spec: dict[str, Any], loss: Any) -> str:
    import torch

    low = spec.get("low_precision") or loss.dtype in (torch.bfloat16, torch.float16)
    if low:
        return "low-precision"
    return "fp32-inductor" if spec["backend"] == "inductor" else "fp32"


def rehearse(spec: dict[str, Any], result: Result) -> None:
    import torch

    for path in reversed(spec.get("sys_path", [])):
        if path not in sys.path:
            sys.path.insert(0, path)
    if spec.get("recompile_limit"):
        from model_compile.runtime.dynamo_adapter import set_recompile_limit

        set_recompile_limit(int(spec["recompile_limit"]))
    result.data["torch"] = torch.__version__
    result.data["device"] = _device()
    # 1. the tiny checkpoint
    ckpt = spec.get("checkpoint")
    if ckpt:
        t0 = time.perf_counter()
        try:
            from model_compile.runtime.tiny_models import write_checkpoint

            facts = write_checkpoint(ckpt["family"], Path(ckpt["dir"]), ckpt.get("base"), int(spec.get("seed", 0)))
        except Exception as exc:  # noqa: BLE001
            result.stop("checkpoint", "not-run", f"the tiny {ckpt['family']} checkpoint could not be built: {_short_error(exc)}", traceback.format_exc())
            return
        result.phase("checkpoint", seconds=round(time.perf_counter() - t0, 2), **facts)
    # 2-3. config and engine
    t0 = time.perf_counter()
    try:
        module = importlib.import_module(spec["engine_module"])
        cls = getattr(module, spec["engine_class"])
    except Exception as exc:  # noqa: BLE001
        result.stop("config", "not-run", f"the recipe's engine module did not import: {_short_error(exc)}", traceback.format_exc())
        return
    try:
        config = load_config(spec, compile_on=False, engine_class=cls)
        result.phase("config", file=spec["config_file"], overrides=spec["overrides"])
    except Exception as exc:  # noqa: BLE001
        result.stop("config", "not-run", f"the stage config did not load with the rehearsal's overrides: {_short_error(exc)}", traceback.format_exc())
        return
    try:
        engine = cls(config)
    except Exception as exc:  # noqa: BLE001
        result.stop("engine", "not-run", f"the recipe's engine could not be built outside its tests: {_short_error(exc)}", traceback.format_exc())
        return
    result.phase("engine", seconds=round(time.perf_counter() - t0, 2), engine=f"{spec['engine_module']}.{spec['engine_class']}")
    section = spec["compile_section"]
    # 4. eager twin
    t0 = time.perf_counter()
    try:
        set_path(engine.config, f"{section}.enabled", False)
        torch.manual_seed(int(spec.get("seed", 0)))
        eager = engine.prepare_model()
    except Exception as exc:  # noqa: BLE001
        result.stop("eager", "not-run", f"prepare_model() with compile off failed: {_short_error(exc)}", traceback.format_exc())
        return
    inner = unwrap(eager)
    result.phase(
        "eager",
        seconds=round(time.perf_counter() - t0, 2),
        returned=type(eager).__name__,
        model=type(inner).__name__,
        parameters=sum(p.numel() for p in inner.parameters()),
        trainable=sum(p.numel() for p in inner.parameters() if p.requires_grad),
    )
    # 5. compiled
    t0 = time.perf_counter()
    try:
        set_path(engine.config, f"{section}.enabled", True)
        set_path(engine.config, f"{section}.backend", spec["backend"])
        set_path(engine.config, f"{section}.mode", spec["mode"])
        torch._dynamo.reset()
        torch.manual_seed(int(spec.get("seed", 0)))
        compiled = engine.prepare_model()
    except Exception as exc:  # noqa: BLE001
        result.stop("compiled", "failed", f"prepare_model() with compile on failed: {_short_error(exc)}", traceback.format_exc())
        return
    from model_compile.runtime.dynamo_adapter import compiled_modules
    from model_compile.runtime.targets import check_targets

    found = compiled_modules(compiled)
    names = [n for n, _ in unwrap(compiled).named_modules()]
    targets = check_targets(names, [c["name"] for c in found], spec.get("targets", []))
    result.phase(
        "compiled",
        seconds=round(time.perf_counter() - t0, 2),
        returned=type(compiled).__name__,
        compiled_modules=[f"{c['name'] or '(model)'} [{c['kind']}]" for c in found[:20]],
        compiled_module_count=len(found),
        targets=targets,
        disabled=disabled_regions(compiled, spec.get("disabled", [])),
    )
    # 6. keys, then the same weights in both
    keys = compare_keys(key_facts(eager), key_facts(compiled))
    copied = "same seed"
    try:
        src = {k.replace("_orig_mod.", ""): v for k, v in unwrap(eager).state_dict().items()}
        dst = unwrap(compiled)
        dst_keys = dst.state_dict().keys()
        dst.load_state_dict({k: src[k.replace("_orig_mod.", "")] for k in dst_keys}, strict=True)
        copied = "eager weights loaded into the compiled model"
    except Exception as exc:  # noqa: BLE001
        copied = f"same seed (copy failed: {_short_error(exc)})"
    result.phase("keys", compare=keys, weights=copied)
    # 7. steps
    from model_compile.runtime.batches import kind_of, make_batch, schedule

    kind = kind_of(inner.config) if hasattr(inner, "config") else "causal_lm"
    runner = StepRunner(engine, spec)
    shapes = schedule(kind, int(spec.get("steps", 12)), bool(spec.get("packed")))
    keys_used = set(spec.get("batch_keys", []))
    result.data["batches"] = {"kind": kind, "path": runner.describe(), "packed": bool(spec.get("packed"))}
    watch = DynamoWatch()
    steps: list[dict[str, Any]] = []
    merge = int(getattr(getattr(inner.config, "vision_config", None), "spatial_merge_size", 2) or 2) if hasattr(inner, "config") else 2
    try:
        for i, shape in enumerate(shapes):
            batch = make_batch(kind, inner.config, shape, seed=1000 + i, keys=keys_used)
            row: dict[str, Any] = {"step": i, "shape": shape.describe(kind, merge)}
            t0 = time.perf_counter()
            try:
                ref = runner.run(eager, dict(batch))
            except Exception as exc:  # noqa: BLE001
                if i == 0 and runner.pre_step:
                    runner.pre_step = False
                    runner.notes.append(f"train_pre_step did not take a model-ready batch ({_short_error(exc)}): skipped")
                    grads_of(eager)
                    ref = runner.run(eager, dict(batch))
                else:
                    raise _EagerFailed(exc) from exc
            row["eager_s"] = round(time.perf_counter() - t0, 4)
            ref_logits = runner.captured.get("logits")
            ref_grads = grads_of(eager)
            watch.snapshot()
            t0 = time.perf_counter()
            try:
                out = runner.run(compiled, dict(batch))
            except Exception as exc:  # noqa: BLE001
                row["error"] = _short_error(exc)
                row.update(watch.delta())
                steps.append(row)
                result.data["steps"] = steps
                result.stop("steps", "failed", f"the compiled step {i} ({row['shape']}) raised: {_short_error(exc)}", traceback.format_exc())
                return
            row["compiled_s"] = round(time.perf_counter() - t0, 4)
            row.update(watch.delta())
            tol_class = _tolerance_class(spec, ref)
            row["tolerance"] = TOLERANCE[tol_class]
            row["tolerance_class"] = tol_class
            row["loss"] = {"eager": float(ref.sum()), "compiled": float(out.sum()), "rel_err": rel_err(out, ref)}
            logits = runner.captured.get("logits")
            if ref_logits is not None and logits is not None:
                row["logits_rel_err"] = rel_err(logits, ref_logits)
            grads = grads_of(compiled)
            worst, worst_name = 0.0, ""
            missing = sorted(set(ref_grads) - {k.replace("_orig_mod.", "") for k in grads})
            for name, g in grads.items():
                r = ref_grads.get(name.replace("_orig_mod.", ""))
                if r is None:
                    continue
                e = rel_err(g, r)
                if e > worst:
                    worst, worst_name = e, name
            row["grads"] = {"compared": len(grads), "rel_err": worst, "worst": worst_name, "missing": missing[:5]}
            steps.append(row)
            result.data["steps"] = steps
            result.flush()
    except _EagerFailed as failed:
        exc = failed.__cause__ or failed
        result.data["steps"] = steps
        result.stop(
            "steps",
            "not-run",
            f"the eager twin's step {len(steps)} failed on the rehearsal's synthetic {kind} batch through "
            f"{runner.describe()}: {_short_error(exc)}",
            "".join(traceback.format_exception(exc)),
        )
        return
    finally:
        watch.close()
    result.data["notes"] = runner.notes
    result.phase("steps", count=len(steps), path=runner.describe())
    result.data["status"] = "done"
    result.flush()


class _EagerFailed(Exception):
    pass


def _device() -> dict[str, Any]:
    from model_compile.runtime.dynamo_adapter import device_info

    return device_info()


def summarise_times(steps: list[dict[str, Any]]) -> dict[str, Any]:
    """First compiled step vs the steady state (compiled steps that compiled nothing new)."""
    if not steps:
        return {}
    first = steps[0].get("compiled_s")
    steady = [s["compiled_s"] for s in steps[1:] if "compiled_s" in s and not s.get("recompiles") and not s.get("new_graphs")]
    eager = [s["eager_s"] for s in steps[1:] if "eager_s" in s]
    return {
        "first_step_s": first,
        "steady_step_s": round(statistics.median(steady), 4) if steady else None,
        "steady_steps": len(steady),
        "eager_step_s": round(statistics.median(eager), 4) if eager else None,
    }


def main(argv: list[str]) -> int:
    spec = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    result = Result(Path(spec["out"]))
    result.flush()
    os.chdir(spec["repo_root"])
    try:
        with contextlib.redirect_stdout(sys.stderr):
            rehearse(spec, result)
    except BaseException as exc:  # noqa: BLE001 - the parent reads the record, whatever happened
        phase = next((p for p in PHASES if p not in result.data["phases"]), "steps")
        result.stop(phase, "failed", f"the rehearsal child stopped in {phase}: {_short_error(exc)}", traceback.format_exc())
        return 1
    if result.data.get("steps"):
        result.data["timing"] = summarise_times(result.data["steps"])
        result.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

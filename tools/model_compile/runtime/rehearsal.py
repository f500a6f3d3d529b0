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
import json
import os
import resource
import statistics
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from model_compile.runtime.rehearsal_steps import DynamoWatch, StepRunner, grads_of, rel_err, short_error, unwrap

PHASES = ("checkpoint", "config", "engine", "eager", "compiled", "keys", "steps")
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
        self.data["cpu_s"] = _cpu_seconds()
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=2, default=str))
        tmp.replace(self.path)


def _cpu_seconds() -> float:
    """User + system CPU seconds of this process and its finished children (compile workers)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return round(own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime, 2)


def _peak_rss_mb() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    scale = 1024 * 1024 if sys.platform == "darwin" else 1024
    return round(max(own, kids) / scale, 1)


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
    path = Path(spec["config_file"])
    try:
        from omegaconf import OmegaConf
    except ImportError:
        pass
    else:
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
    return engine_class is not None and (
        hasattr(engine_class, "ConfigClass") or hasattr(engine_class, "prepare_config")
    )


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
        facts["dcp_error"] = short_error(exc)
    return facts


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


# -- main -----------------------------------------------------------------


def _tolerance_class(spec: dict[str, Any], loss: Any) -> str:
    import torch

    if spec.get("low_precision") or loss.dtype in (torch.bfloat16, torch.float16):
        return "low-precision"
    return "fp32-inductor" if spec["backend"] == "inductor" else "fp32"


class Stop(Exception):
    """A phase could not be done: `status` is not-run (set-up) or failed (compile's fault)."""

    def __init__(self, phase: str, status: str, reason: str, detail: str = "") -> None:
        super().__init__(reason)
        self.phase, self.status, self.reason, self.detail = phase, status, reason, detail


def _guard(phase: str, status: str, what: str) -> Any:
    """Turn any exception of the block into Stop(phase, status, `what: error`)."""

    @contextlib.contextmanager
    def guarded() -> Any:
        try:
            yield
        except Stop:
            raise
        except Exception as exc:  # noqa: BLE001 - the reason goes into the record
            raise Stop(phase, status, f"{what}: {short_error(exc)}", traceback.format_exc()) from exc

    return guarded()


def _checkpoint(spec: dict[str, Any], result: Result) -> None:
    ckpt = spec.get("checkpoint")
    if not ckpt:
        return
    t0 = time.perf_counter()
    with _guard("checkpoint", "not-run", f"the tiny {ckpt['family']} checkpoint could not be built"):
        from model_compile.runtime.tiny_models import write_checkpoint

        facts = write_checkpoint(ckpt["family"], Path(ckpt["dir"]), ckpt.get("base"), int(spec.get("seed", 0)))
    result.phase("checkpoint", seconds=round(time.perf_counter() - t0, 2), **facts)


def _engine(spec: dict[str, Any], result: Result) -> Any:
    t0 = time.perf_counter()
    with _guard("config", "not-run", "the recipe's engine module did not import"):
        cls = getattr(importlib.import_module(spec["engine_module"]), spec["engine_class"])
    with _guard("config", "not-run", "the stage config did not load with the rehearsal's overrides"):
        config = load_config(spec, compile_on=False, engine_class=cls)
    result.phase("config", file=spec["config_file"], overrides=spec["overrides"])
    with _guard("engine", "not-run", "the recipe's engine could not be built outside its tests"):
        engine = cls(config)
    result.phase(
        "engine", seconds=round(time.perf_counter() - t0, 2), engine=f"{spec['engine_module']}.{spec['engine_class']}"
    )
    return engine


def _twins(spec: dict[str, Any], engine: Any, result: Result) -> tuple[Any, Any]:
    """prepare_model() with compile off (the eager twin), then on; both from the same seed."""
    import torch

    from model_compile.runtime.dynamo_adapter import compiled_modules
    from model_compile.runtime.targets import check_targets

    section = spec["compile_section"]
    t0 = time.perf_counter()
    with _guard("eager", "not-run", "prepare_model() with compile off failed"):
        set_path(engine.config, f"{section}.enabled", False)
        torch.manual_seed(int(spec.get("seed", 0)))
        eager = engine.prepare_model()
    inner = unwrap(eager)
    result.phase(
        "eager",
        seconds=round(time.perf_counter() - t0, 2),
        returned=type(eager).__name__,
        model=type(inner).__name__,
        parameters=sum(p.numel() for p in inner.parameters()),
        trainable=sum(p.numel() for p in inner.parameters() if p.requires_grad),
    )
    t0 = time.perf_counter()
    with _guard("compiled", "failed", "prepare_model() with compile on failed"):
        set_path(engine.config, f"{section}.enabled", True)
        set_path(engine.config, f"{section}.backend", spec["backend"])
        set_path(engine.config, f"{section}.mode", spec["mode"])
        torch._dynamo.reset()
        torch.manual_seed(int(spec.get("seed", 0)))
        compiled = engine.prepare_model()
    found = compiled_modules(compiled)
    names = [n for n, _ in unwrap(compiled).named_modules()]
    result.phase(
        "compiled",
        seconds=round(time.perf_counter() - t0, 2),
        returned=type(compiled).__name__,
        compiled_modules=[f"{c['name'] or '(model)'} [{c['kind']}]" for c in found[:20]],
        compiled_module_count=len(found),
        targets=check_targets(names, [c["name"] for c in found], spec.get("targets", [])),
        disabled=disabled_regions(compiled, spec.get("disabled", [])),
    )
    return eager, compiled


def _same_weights(eager: Any, compiled: Any, result: Result) -> None:
    """Compare the keys, then load the eager twin's weights into the compiled model (keys mapped)."""
    keys = compare_keys(key_facts(eager), key_facts(compiled))
    try:
        src = {k.replace("_orig_mod.", ""): v for k, v in unwrap(eager).state_dict().items()}
        dst = unwrap(compiled)
        dst.load_state_dict({k: src[k.replace("_orig_mod.", "")] for k in dst.state_dict()}, strict=True)
        copied = "eager weights loaded into the compiled model"
    except Exception as exc:  # noqa: BLE001 - same seed still gives the same weights for a deterministic build
        copied = f"same seed (copy failed: {short_error(exc)})"
    result.phase("keys", compare=keys, weights=copied)


def _step(
    spec: dict[str, Any],
    i: int,
    batch: dict[str, Any],
    runner: StepRunner,
    eager: Any,
    compiled: Any,
    watch: DynamoWatch,
    describe: str,
) -> dict[str, Any]:
    row: dict[str, Any] = {"step": i, "shape": describe}
    t0 = time.perf_counter()
    try:
        ref = runner.run(eager, dict(batch))
    except Exception as exc:  # noqa: BLE001
        if not (i == 0 and runner.pre_step):
            raise Stop(
                "steps",
                "not-run",
                f"the eager twin's step {i} failed on the rehearsal's synthetic batch through "
                f"{runner.describe()}: {short_error(exc)}",
                traceback.format_exc(),
            ) from exc
        runner.pre_step = False
        runner.notes.append(f"train_pre_step did not take a model-ready batch ({short_error(exc)}): skipped")
        grads_of(eager)
        ref = runner.run(eager, dict(batch))
    row["eager_s"] = round(time.perf_counter() - t0, 4)
    ref_logits = runner.captured.get("logits")
    ref_grads = grads_of(eager)
    watch.snapshot()
    t0 = time.perf_counter()
    try:
        out = runner.run(compiled, dict(batch))
    except Exception as exc:  # noqa: BLE001
        row["error"] = short_error(exc)
        row.update(watch.delta())
        row["failed"] = traceback.format_exc()
        return row
    row["compiled_s"] = round(time.perf_counter() - t0, 4)
    row.update(watch.delta())
    tol_class = _tolerance_class(spec, ref)
    row["tolerance"], row["tolerance_class"] = TOLERANCE[tol_class], tol_class
    row["loss"] = {"eager": float(ref.sum()), "compiled": float(out.sum()), "rel_err": rel_err(out, ref)}
    logits = runner.captured.get("logits")
    if ref_logits is not None and logits is not None:
        row["logits_rel_err"] = rel_err(logits, ref_logits)
    grads = grads_of(compiled)
    worst, worst_name = 0.0, ""
    for name, g in grads.items():
        r = ref_grads.get(name.replace("_orig_mod.", ""))
        if r is not None and (e := rel_err(g, r)) > worst:
            worst, worst_name = e, name
    missing = sorted(set(ref_grads) - {k.replace("_orig_mod.", "") for k in grads})
    row["grads"] = {"compared": len(grads), "rel_err": worst, "worst": worst_name, "missing": missing[:5]}
    return row


def _steps(spec: dict[str, Any], engine: Any, eager: Any, compiled: Any, result: Result) -> None:
    from model_compile.runtime.batches import kind_of, make_batch, schedule

    inner = unwrap(eager)
    config = getattr(inner, "config", None)
    kind = kind_of(config) if config is not None else "causal_lm"
    merge = int(getattr(getattr(config, "vision_config", None), "spatial_merge_size", 2) or 2)
    runner = StepRunner(engine, spec)
    shapes = schedule(kind, int(spec.get("steps", 10)), bool(spec.get("packed")))
    keys = set(spec.get("batch_keys", []))
    result.data["batches"] = {"kind": kind, "path": runner.describe(), "packed": bool(spec.get("packed"))}
    steps: list[dict[str, Any]] = []
    result.data["steps"] = steps
    watch = DynamoWatch()
    try:
        for i, shape in enumerate(shapes):
            batch = make_batch(kind, config, shape, seed=1000 + i, keys=keys)
            row = _step(spec, i, batch, runner, eager, compiled, watch, shape.describe(kind, merge))
            steps.append(row)
            result.flush()
            if "error" in row:
                raise Stop(
                    "steps",
                    "failed",
                    f"the compiled step {i} ({row['shape']}) raised: {row['error']}",
                    row.pop("failed"),
                )
    finally:
        watch.close()
        result.data["notes"] = runner.notes
        result.data["batches"]["path"] = runner.describe()  # a skipped train_pre_step shows
    result.phase("steps", count=len(steps), path=runner.describe())


def rehearse(spec: dict[str, Any], result: Result) -> None:
    """Every phase in order; a Stop ends the run with its status and reason in the record."""
    import torch

    for path in reversed(spec.get("sys_path", [])):
        if path not in sys.path:
            sys.path.insert(0, path)
    from model_compile.runtime.dynamo_adapter import device_info

    result.data.update(torch=torch.__version__, repo_root=spec["repo_root"], device=device_info())
    try:
        _checkpoint(spec, result)
        engine = _engine(spec, result)
        eager, compiled = _twins(spec, engine, result)
        _same_weights(eager, compiled, result)
        _steps(spec, engine, eager, compiled, result)
    except Stop as stop:
        result.stop(stop.phase, stop.status, stop.reason, stop.detail)
        return
    result.data["status"] = "done"
    result.flush()


def summarise_times(steps: list[dict[str, Any]]) -> dict[str, Any]:
    """First compiled step vs the steady state (compiled steps that compiled nothing new)."""
    if not steps:
        return {}
    first = steps[0].get("compiled_s")
    steady = [
        s["compiled_s"] for s in steps[1:] if "compiled_s" in s and not s.get("recompiles") and not s.get("new_graphs")
    ]
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
        result.stop(
            phase, "failed", f"the rehearsal child stopped in {phase}: {short_error(exc)}", traceback.format_exc()
        )
        return 1
    if result.data.get("steps"):
        result.data["timing"] = summarise_times(result.data["steps"])
        result.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

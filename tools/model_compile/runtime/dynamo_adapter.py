"""What torch.compile actually did during a training run, behind one adapter.

Everything that touches private torch APIs (`torch._dynamo.utils.counters`,
`guard_failures`, `torch._dynamo.config.recompile_limit`, the convert_frame
logger) lives here, and every record carries `torch.__version__` so a reader
knows which torch the numbers come from.

What is measured, honestly:
- graph breaks: `counters["graph_break"]` by reason, delta over the run;
- unique graphs: `counters["stats"]["unique_graphs"]`, delta;
- recompiles: entries added to `guard_failures` (one per recompile, with the
  failed guard as reason); `counters["recompiles"]` is never written by torch;
- recompile limit hit: the warning dynamo logs on `torch._dynamo.convert_frame`
  ("hit config.recompile_limit"), plus the "recompile limit exceeded" graph-break
  reason; after a hit those frames run eager without another word;
- compiled targets: modules with `_compiled_call_impl` set (in-place
  `.compile()`) or `OptimizedModule` wrappers, counted against what each target
  implies (runtime/targets.py: every block of a regional container, exactly the
  module of a submodule or kit target; patterns matched per dotted segment);
- compiled region executed: `torch.profiler` "Torch-Compiled Region" events
  during one training step (the second step when there is one, so the first
  step's compile latency is not inflated by the profiler);
- timing: wall time of the first step (includes compilation) vs the median
  of later unprofiled steps (steady state).
"""

from __future__ import annotations

import json
import logging
import os
import platform
import statistics
import time
from collections import Counter, defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from model_compile.runtime import RUNTIME_DIR_ENV, RUNTIME_SCHEMA
from model_compile.runtime.targets import check_targets

if TYPE_CHECKING:
    from torch.profiler import profile

ORIG_MOD = "_orig_mod."
_REGION_EVENT = "Torch-Compiled Region"
_LIMIT_MARKERS = ("hit config.recompile_limit", "hit config.cache_size_limit", "hit config.accumulated_")


def _counters() -> defaultdict[str, Counter[str]]:
    from torch._dynamo.utils import counters

    return counters


def _guard_failures() -> dict:
    from torch._dynamo.utils import guard_failures

    return guard_failures


def recompile_limit() -> int | None:
    cfg = torch._dynamo.config
    return getattr(cfg, "recompile_limit", getattr(cfg, "cache_size_limit", None))


def device_info() -> dict[str, Any]:
    """Device type, count and name of the accelerator this process can use."""
    if torch.cuda.is_available():
        kind = "rocm" if getattr(torch.version, "hip", None) else "cuda"
        return {"type": kind, "count": torch.cuda.device_count(), "name": torch.cuda.get_device_name(0)}
    npu = getattr(torch, "npu", None)
    if npu is not None and npu.is_available():
        return {"type": "npu", "count": npu.device_count(), "name": "npu"}
    xpu = getattr(torch, "xpu", None)
    if xpu is not None and xpu.is_available():
        return {"type": "xpu", "count": xpu.device_count(), "name": xpu.get_device_name(0)}
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return {"type": "mps", "count": 1, "name": "mps"}
    return {"type": "cpu", "count": 0, "name": platform.processor() or platform.machine()}


def environment() -> dict[str, Any]:
    dev = device_info()
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "device_type": dev["type"],
        "device_count": dev["count"],
        "accelerator": None if dev["type"] == "cpu" else dev["name"],
        "cpu_only": dev["type"] == "cpu",
    }


def unwrap(model: nn.Module) -> nn.Module:
    """Strip DDP/FSDP1-style `.module` and `OptimizedModule` wrappers."""
    seen = 0
    while seen < 8:
        seen += 1
        if isinstance(model, torch._dynamo.eval_frame.OptimizedModule):
            model = model._orig_mod
        elif isinstance(inner := getattr(model, "module", None), nn.Module) and type(model).__name__ in (
            "DistributedDataParallel",
            "FullyShardedDataParallel",
            "DataParallel",
        ):
            model = inner
        else:
            break
    return model


def compiled_modules(model: nn.Module) -> list[dict[str, str]]:
    """Every compiled module under `model` (names relative to the unwrapped model)."""
    found = []
    root = unwrap(model)
    # the wrapper chain above the model (DDP -> OptimizedModule -> model, or the reverse): a compiled link anywhere
    link = model
    while link is not root:
        if isinstance(link, torch._dynamo.eval_frame.OptimizedModule):
            found.append({"name": "", "class": type(link._orig_mod).__name__, "kind": "wrapper"})
            link = link._orig_mod
        else:
            if getattr(link, "_compiled_call_impl", None) is not None:
                found.append({"name": "", "class": type(link).__name__, "kind": "inplace on the wrapper"})
            link = getattr(link, "module", root)
    for name, module in root.named_modules():
        if isinstance(module, torch._dynamo.eval_frame.OptimizedModule):
            found.append({"name": name, "class": type(module._orig_mod).__name__, "kind": "wrapper"})
        elif getattr(module, "_compiled_call_impl", None) is not None:
            found.append({"name": name, "class": type(module).__name__, "kind": "inplace"})
    return found


def orig_mod_names(model: nn.Module) -> list[str]:
    """`state_dict()` keys and parameter names that carry the `_orig_mod.` prefix."""
    names = [k for k in model.state_dict() if ORIG_MOD in k]
    names += [n for n, _ in model.named_parameters() if ORIG_MOD in n and n not in names]
    return names


def target_facts(
    model: nn.Module, patterns: Iterable[str], compiled: list[dict[str, str]] | None = None
) -> dict[str, Any]:
    """Each target pattern counted against the compiled modules of `model` (see runtime/targets.py)."""
    compiled = compiled_modules(model) if compiled is None else compiled
    names = [name for name, _ in unwrap(model).named_modules()]
    return check_targets(names, [c["name"] for c in compiled], patterns)


def match_targets(model: nn.Module, patterns: Iterable[str]) -> list[str]:
    """Why the compiled modules of `model` fall short of the targets (empty when they do not)."""
    return target_facts(model, patterns)["target_failures"]


class _LimitHandler(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            msg = record.getMessage()
        except Exception:  # noqa: BLE001 - a logging handler must never raise
            return
        if any(m in msg for m in _LIMIT_MARKERS):
            lines = msg.strip().splitlines()
            # the limit, the frame (an absolute path) and its last failed guard: cut only past all three, which the
            # report makes readable (`input_ids dim 1 changed 52 -> 69`); at 300 a long path cut the guard mid-name
            self.messages.append(" ".join(" ".join(lines[:3]).split())[:1000])


def _code_label(code: Any) -> str:
    name = getattr(code, "co_name", str(code))
    file = getattr(code, "co_filename", "")
    line = getattr(code, "co_firstlineno", "")
    return f"{name} ({file}:{line})" if file else name


class RuntimeProbe:
    """Collects the runtime record of one training run in one process."""

    def __init__(self) -> None:
        self.started = False
        self.info: dict[str, Any] = {}
        self.step_times: list[float] = []
        self.profiled_step: int | None = None
        self.region_events: dict[str, int] = {}
        self._step_index = 0
        self._t0: float | None = None
        self._profiler: profile | None = None
        self._handler = _LimitHandler()
        self._base_breaks: dict[str, int] = {}
        self._base_stats: dict[str, int] = {}
        self._base_frames: dict[str, int] = {}
        self._base_guard: dict[Any, int] = {}
        self.model_facts: dict[str, Any] = {}

    # -- lifecycle ---------------------------------------------------------
    def begin(self, **info: Any) -> None:
        """Baseline the counters (call before the first compiled forward)."""
        c = _counters()
        self._base_breaks = dict(c["graph_break"])
        self._base_stats = dict(c["stats"])
        self._base_frames = dict(c["frames"])
        self._base_guard = {k: len(v) for k, v in _guard_failures().items()}
        logging.getLogger("torch._dynamo.convert_frame").addHandler(self._handler)
        self.info = dict(info)
        self.started = True

    def inspect_model(self, model: nn.Module, target_patterns: Iterable[str] = ()) -> dict[str, Any]:
        """Compiled modules, each target counted against them, and `_orig_mod.` keys."""
        compiled = compiled_modules(model)
        bad = orig_mod_names(model)
        self.model_facts = {
            "compiled_modules": compiled[:50],
            "compiled_module_count": len(compiled),
            "expected_targets": list(target_patterns),
            **target_facts(model, target_patterns, compiled),
            "orig_mod_key_count": len(bad),
            "orig_mod_keys": bad[:5],
        }
        return self.model_facts

    def step_start(self, profile_this_step: bool | None = None) -> None:
        if profile_this_step is None:
            profile_this_step = self._step_index == 1 and self.profiled_step is None
        if profile_this_step:
            from torch.profiler import ProfilerActivity, profile

            self._profiler = profile(activities=[ProfilerActivity.CPU])
            self._profiler.__enter__()
            self.profiled_step = self._step_index
        self._t0 = time.perf_counter()

    def step_end(self) -> None:
        if self._t0 is None:
            return
        self.step_times.append(time.perf_counter() - self._t0)
        self._t0 = None
        if self._profiler is not None:
            self._profiler.__exit__(None, None, None)
            for event in self._profiler.events():
                if event.name.startswith(_REGION_EVENT):
                    key = event.name[len(_REGION_EVENT) :].strip(": ")
                    self.region_events[key] = self.region_events.get(key, 0) + 1
            self._profiler = None
        self._step_index += 1

    def close(self) -> None:
        logging.getLogger("torch._dynamo.convert_frame").removeHandler(self._handler)

    # -- the record --------------------------------------------------------
    def record(self) -> dict[str, Any]:
        c = _counters()
        breaks: dict[str, int] = {}
        for k, v in c["graph_break"].items():
            delta = v - self._base_breaks.get(k, 0)
            if delta > 0:
                short = str(k).strip().splitlines()[0][:200]
                breaks[short] = breaks.get(short, 0) + delta
        reasons = []
        for code, items in _guard_failures().items():
            for reason in items[self._base_guard.get(code, 0) :]:
                reasons.append({"function": _code_label(code), "reason": str(reason).strip()[:400]})
        limit_messages = list(self._handler.messages)
        limit_breaks = sum(v for k, v in breaks.items() if "recompile limit" in k.lower() or "cache_size_limit" in k)
        first = self.step_times[0] if self.step_times else None
        steady = [t for i, t in enumerate(self.step_times) if i >= 1 and i != self.profiled_step]
        if not steady:
            steady = [t for i, t in enumerate(self.step_times) if i >= 1]
        steady_s = statistics.median(steady) if steady else None
        return {
            "schema": RUNTIME_SCHEMA,
            "environment": environment(),
            "rank": int(os.environ.get("RANK", "0")),
            "world_size": int(os.environ.get("WORLD_SIZE", "1")),
            "compile": self.info,
            **self.model_facts,
            "graph_breaks": {
                "total": sum(breaks.values()),
                "by_reason": dict(sorted(breaks.items(), key=lambda kv: -kv[1])),
            },
            "unique_graphs": c["stats"].get("unique_graphs", 0) - self._base_stats.get("unique_graphs", 0),
            "frames": {
                "total": c["frames"].get("total", 0) - self._base_frames.get("total", 0),
                "ok": c["frames"].get("ok", 0) - self._base_frames.get("ok", 0),
            },
            "recompiles": {"count": len(reasons), "reasons": reasons[:50]},
            "recompile_limit": {
                "limit": recompile_limit(),
                "hit": bool(limit_messages or limit_breaks),
                "messages": limit_messages[:20],
            },
            "executed": {
                "measured": self.profiled_step is not None,
                "step": self.profiled_step,
                "compiled_region_events": sum(self.region_events.values()),
                "regions": dict(sorted(self.region_events.items())[:50]),
                "method": "torch.profiler 'Torch-Compiled Region' events during one training step",
            },
            "timing": {
                "steps": len(self.step_times),
                "first_step_s": round(first, 4) if first is not None else None,
                "steady_state_s": round(steady_s, 4) if steady_s is not None else None,
                "steady_state_steps": len(steady),
                "first_over_steady": round(first / steady_s, 2) if first and steady_s else None,
                "step_times_s": [round(t, 4) for t in self.step_times],
                "note": "first step includes compilation; steady state excludes the profiled step",
            },
        }

    def write(self, record: dict[str, Any] | None = None, directory: str | os.PathLike | None = None) -> Path | None:
        """Write `runtime-rank<r>.json` into `directory` or $MODEL_COMPILE_RUNTIME_DIR (if set)."""
        directory = directory or os.environ.get(RUNTIME_DIR_ENV)
        if not directory:
            return None
        record = record or self.record()
        path = Path(directory) / f"runtime-rank{record['rank']}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(record, indent=2, default=str))
        tmp.replace(path)
        return path


def violations(record: dict[str, Any], graph_break_budget: int | None, recompile_budget: int | None) -> list[str]:
    """Why a runtime record fails (empty when it passes)."""
    out = []
    if record.get("compiled_module_count", 0) == 0:
        out.append("no compiled module found on the model after setup")
    for text in record.get("target_failures") or []:
        out.append(f"compiled target incomplete: {text}")
    if record.get("missing_targets") and not record.get("target_failures"):
        out.append(f"expected compiled targets not found: {record['missing_targets']}")
    if record.get("orig_mod_key_count"):
        out.append(
            f"{record['orig_mod_key_count']} state_dict keys/parameter names carry '_orig_mod.' (e.g. {record['orig_mod_keys'][:2]})"
        )
    limit = record.get("recompile_limit", {})
    if limit.get("hit"):
        first = (limit.get("messages") or ["(from graph-break counters)"])[0]
        out.append(f"recompile_limit ({limit.get('limit')}) hit: frames fell back to eager: {first}")
    gb = record.get("graph_breaks", {}).get("total", 0)
    if graph_break_budget is not None and gb > graph_break_budget:
        out.append(f"graph breaks {gb} exceed the budget {graph_break_budget}")
    rc = record.get("recompiles", {}).get("count", 0)
    if recompile_budget is not None and rc > recompile_budget:
        out.append(f"recompiles {rc} exceed the budget {recompile_budget}")
    executed = record.get("executed", {})
    if executed.get("measured") and not executed.get("compiled_region_events"):
        out.append(f"no compiled region executed during step {executed.get('step')} (the model ran eager)")
    if record.get("unique_graphs", 0) == 0 and record.get("timing", {}).get("steps"):
        out.append("no graph was compiled during training")
    return out


_PROBE: RuntimeProbe | None = None


def get_probe(reset: bool = False) -> RuntimeProbe:
    """The process-wide probe shared by the assert hooks of one run."""
    global _PROBE
    if _PROBE is None or reset:
        _PROBE = RuntimeProbe()
    return _PROBE


def record_hook(hook: str, engine: Any, on: bool, **info: Any) -> bool:
    """What a generated asserts module's smoke hook `hook` (`before_train_start`, `before_train_end`,
    `train_pre_step_start`, `train_post_step_end`, `after_train_end`) records of the run under
    `model-compile validate --hard`, where this probe is on the path; `on`: the compile switch. The asserts stay
    small: the recording lives here. True: recorded (the probe counts a recompile-limit hit, and the last hook
    fails the run on it)."""
    if not on:
        return True
    patterns = list(info.pop("target_patterns", ()))
    if hook == "before_train_start":
        get_probe(reset=True).begin(**info)
    elif hook == "before_train_end":
        get_probe().inspect_model(engine.model, patterns)
        get_probe().write()
    elif hook == "train_pre_step_start":
        get_probe().step_start()
    elif hook == "train_post_step_end":
        get_probe().step_end()
        get_probe().write()
    elif hook == "after_train_end":
        probe = get_probe()
        record = probe.record()
        record["violations"] = violations(record, None, None)
        probe.write(record)
        probe.close()
        assert not record["violations"], "torch.compile runtime check failed: " + "; ".join(record["violations"])
    return True

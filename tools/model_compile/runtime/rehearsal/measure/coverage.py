"""Which parts of the model ran compiled: the coverage map's measurements, taken in the child.

On the measured micro-steps (those of the last optimizer step, after any recompile-limit hit) a dispatch mode
counts every aten operator the model's forward and backward run, with its FLOPs where torch has a formula
(`torch.utils.flop_counter`: matrix multiplies, convolutions, attention). The mode declares
`ignore_compile_internals`, so dynamo keeps compiling exactly as without it (no frame is skipped for it, no
guard changes); the graphs a backend returns are wrapped to mark the thread while one runs, so an operator
inside a compiled graph (an `aot_eager` graph runs aten operators too) is told apart from one that ran eager.

- The eager twin counts everything: the forward work of each module (by its path in the unwrapped model) and
  the backward work.
- The compiled twin counts what ran outside compiled graphs, grouped by module, the user frame it ran in and
  what that frame was to dynamo (`frames.py`), with the stack's markers (torch.compiler.disable,
  checkpointing); a backward operator is compiled when the autograd node running it is a compiled graph's.

The parent (`hard/rehearsal/coverage.py`) divides one by the other: the compiled share of each module's work.
Operators of the distributed wrap (collectives, FSDP's copies and hooks) and of gradient accumulation are not
the model's work and are left out on both sides.
"""

from __future__ import annotations

import sys
import time
from collections import defaultdict
from contextlib import contextmanager
from typing import Any

from model_compile.runtime.rehearsal.measure.frames import Attribution
from model_compile.runtime.rehearsal.measure.model_facts import class_name

OUTSIDE = "(outside the model)"
_SKIP_NAMESPACES = frozenset({"_c10d_functional", "c10d", "c10d_functional", "profiler", "fsdp", "_dtensor"})
_DEPTH = [0]  # compiled graphs running on this thread
_GRAPHS: list[dict[str, Any]] = []
_INSTALLED: list[bool] = []
_MEASURING = [False]
_WANTED: dict[str, set[int]] = {}  # the change's lines (file -> line numbers), read off each graph's nodes
_FAULTS: dict[str, str] = {}  # the graph hook's own failures (a graph it could not read is run uncounted)
_WRAP_NODES = ("PostBackward", "RegisterPostBackward", "FSDP", "_DDP")


def install_graph_hook(wanted: dict[str, list[int]] | None = None) -> None:
    """Wrap every graph a backend returns from now on (idempotent): its runs mark the thread and are counted
    (while a micro-step is measured, and in all), and the change's lines its operators come from are noted.
    Installed in the compiled twin before the model is built."""
    for path, lines in (wanted or {}).items():
        _WANTED.setdefault(path, set()).update(lines)
    if _INSTALLED:
        return
    from torch._dynamo import output_graph

    original = output_graph.OutputGraph.call_user_compiler

    def call_user_compiler(self: Any, gm: Any, example_inputs: Any) -> Any:
        made = original(self, gm, example_inputs)  # the backend's own result (and its own errors)
        try:
            compiled = _eager_forward(made)
            info = _graph_info(self, gm)
        except Exception as exc:  # noqa: BLE001 - the instrument never changes the run: this graph is not counted
            _FAULTS.setdefault(
                "graph hook", f"{type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}"
            )
            return made
        _GRAPHS.append(info)

        def run(*args: Any, **kwargs: Any) -> Any:
            _DEPTH[0] += 1
            info["calls"] += 1
            if _MEASURING[0]:
                info["runs"] += 1
            try:
                return compiled(*args, **kwargs)
            finally:
                _DEPTH[0] -= 1

        for attr in ("_boxed_call", "zero_grad", "named_parameters", "named_buffers"):
            if hasattr(compiled, attr):
                setattr(run, attr, getattr(compiled, attr))
        return run

    setattr(output_graph.OutputGraph, "call_user_compiler", call_user_compiler)  # noqa: B010 - a method, patched
    _INSTALLED.append(True)


def _eager_forward(compiled: Any) -> Any:
    """A lazily compiled GraphModule (the `eager` backend) made real now, as dynamo does when nothing wraps it."""
    from torch.fx._lazy_graph_module import _LazyGraphModule

    lazy = compiled if isinstance(compiled, _LazyGraphModule) else getattr(compiled, "__self__", None)
    if isinstance(lazy, _LazyGraphModule):
        _LazyGraphModule.force_recompile(lazy)
        return lazy.forward if lazy is not compiled else compiled
    return compiled


def _graph_info(output: Any, gm: Any) -> dict[str, Any]:
    """One compiled graph: its frame, its operator count and the modules (classes) its nodes come from."""
    code = getattr(getattr(output, "root_tx", None), "f_code", None)
    classes: dict[str, int] = defaultdict(int)
    ops = 0
    for node in gm.graph.nodes:
        if node.op not in ("call_function", "call_method", "call_module"):
            continue
        ops += 1
        stack = node.meta.get("nn_module_stack") or {}
        if stack:
            _, cls = list(stack.values())[-1]
            classes[getattr(cls, "__name__", str(cls))] += 1
    from model_compile.runtime.rehearsal.measure.lines import graph_lines

    return {
        "frame": f"{code.co_name} ({code.co_filename}:{code.co_firstlineno})" if code is not None else "?",
        "ops": ops,
        "modules": dict(sorted(classes.items(), key=lambda kv: -kv[1])[:12]),
        "runs": 0,  # while a micro-step was measured
        "calls": 0,  # in all
        "lines": graph_lines(gm, _WANTED) if _WANTED else [],
    }


def graphs_with_lines() -> list[dict[str, Any]]:
    """Each compiled graph that holds a changed line: the lines and how often the graph ran."""
    return [{"lines": g["lines"], "calls": g["calls"]} for g in _GRAPHS if g["lines"]]


def _mode_class() -> type:
    from torch._ops import HigherOrderOperator as hop_class
    from torch.utils._python_dispatch import TorchDispatchMode

    class _Count(TorchDispatchMode):
        """Counts operators for a Meter; transparent to dynamo (`ignore_compile_internals`). Every higher-order
        operator torch defines (`torch._ops.HigherOrderOperator`: checkpointing's, rng state, cond, flex
        attention, invoke_subgraph, auto-functionalized ops, ...) passes through it (`supports_higher_order_
        operators`) and runs as torch runs it, the mode off; what ran inside one outside a compiled graph is
        said not measured. The meter's own bookkeeping never raises into the run."""

        supports_higher_order_operators = True

        def __init__(self, meter: Meter) -> None:
            super().__init__()
            self.meter = meter

        @classmethod
        def ignore_compile_internals(cls) -> bool:
            return True

        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            out = func(*args, **kwargs)  # the run's own result, whatever the meter does with it
            try:
                if isinstance(func, hop_class):
                    self.meter.hop(func, sys._getframe(1))
                else:
                    self.meter.op(func, args, kwargs, out, sys._getframe(1))
            except Exception as exc:  # noqa: BLE001 - an instrument never changes the run: said, not raised
                self.meter.fault(func, exc)
            return out

    return _Count


class Meter:
    """The counts of one twin over its measured micro-steps."""

    def __init__(self, model: Any, compiled: bool) -> None:
        import torch
        from torch.utils.flop_counter import flop_registry

        from model_compile.runtime.dynamo_adapter import unwrap

        root = unwrap(model)
        named = list(root.named_modules())
        self.compiled = compiled
        self.attr = Attribution({id(m): n for n, m in named})
        self.tree = [[n, class_name(m), _is_container(m)] for n, m in named]
        self.flops = flop_registry
        self._node = torch._C._current_autograd_node
        self.forward: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
        self.backward = [0.0, 0]
        self.groups: dict[tuple[str, int, str], dict[str, Any]] = {}
        self._codes: list[Any] = []  # the codes the groups are keyed by (their ids), kept alive
        self.wrap_ops = 0
        self.compiled_ops = [0, 0]  # forward, backward operators inside compiled graphs (aot backends only)
        self.micro: list[int] = []
        self.seconds = 0.0
        self.hops: dict[tuple[str, str], dict[str, Any]] = {}  # (operator, module) -> runs inside and outside graphs
        self.faults: dict[str, str] = {}  # the meter's own failures, by where: said in the record, never raised
        self._mode = _mode_class()(self)

    @contextmanager
    def measure(self, micro: int) -> Any:
        """Count the operators of one micro-step: forward ones (no autograd node runs them) by module, backward
        ones (an autograd node runs them) in one sum."""
        self.micro.append(micro)
        _MEASURING[0] = True
        t0 = time.perf_counter()
        try:
            with self._mode:
                yield
        finally:
            self.seconds += time.perf_counter() - t0
            _MEASURING[0] = False
            self.attr.forget()

    def _work(self, func: Any, args: Any, kwargs: Any, out: Any) -> float:
        formula = self.flops.get(func._overloadpacket)
        if formula is None:
            return 0.0
        try:
            return float(formula(*args, **kwargs, out_val=out))
        except Exception:  # noqa: BLE001 - an operator whose formula does not take these arguments weighs nothing
            return 0.0

    def op(self, func: Any, args: Any, kwargs: Any, out: Any, frame: Any) -> None:
        if func.namespace in _SKIP_NAMESPACES:
            return
        node = self._node()
        if node is not None:
            self._backward(node.name(), func, args, kwargs, out)
            return
        if _DEPTH[0]:
            self.compiled_ops[0] += 1
            return
        path, user, code, wrap = self.attr.owner(frame)
        if wrap and code is None:
            self.wrap_ops += 1
            return
        path = OUTSIDE if path is None else path
        flops = self._work(func, args, kwargs, out)
        cell = self.forward[path]
        cell[0] += flops
        cell[1] += 1
        if self.compiled:
            self._group(path, code, user.f_lineno if user is not None else 0, flops, frame)

    def hop(self, func: Any, frame: Any) -> None:
        """A higher-order operator ran (the mode off inside it): inside a compiled graph its operators are the
        graph's; outside one they were not counted, and the module it ran in is said not measured."""
        name = str(getattr(func, "_name", None) or getattr(func, "__name__", func))
        node = self._node()
        compiled = bool(_DEPTH[0]) or (node is not None and node.name().startswith("CompiledFunction"))
        path = OUTSIDE
        if node is None and not compiled:
            owner = self.attr.owner(frame)[0]
            path = OUTSIDE if owner is None else owner
        elif node is not None:
            path = "(backward)"
        cell = self.hops.setdefault((name, path), {"operator": name, "module": path, "compiled": 0, "eager": 0})
        cell["compiled" if compiled else "eager"] += 1

    def fault(self, func: Any, exc: Exception) -> None:
        where = str(getattr(func, "__name__", func))
        self.faults.setdefault(where, f"{type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}")

    def _backward(self, name: str, func: Any, args: Any, kwargs: Any, out: Any) -> None:
        if "AccumulateGrad" in name or name.startswith(_WRAP_NODES):
            return
        if name.startswith("CompiledFunction") or _DEPTH[0]:
            self.compiled_ops[1] += 1
            return
        self.backward[0] += self._work(func, args, kwargs, out)
        self.backward[1] += 1

    def _group(self, path: str, code: Any, line: int, flops: float, frame: Any) -> None:
        kind = self.attr.kind(code) if code is not None else "untraced"
        key = (path, id(code), kind)  # id: a code object dynamo wrote may not hash (a dict among its constants)
        group = self.groups.get(key)
        if group is None:
            self._codes.append(code)
            group = self.groups[key] = {
                "module": path,
                "code": f"{code.co_name} ({code.co_filename}:{code.co_firstlineno})" if code is not None else None,
                "kind": kind,
                "markers": self.attr.markers(frame),
                "flops": 0.0,
                "ops": 0,
                "lines": defaultdict(float),
            }
        group["flops"] += flops
        group["ops"] += 1
        group["lines"][line] += flops or 1e-9

    def record(self) -> dict[str, Any]:
        """The JSON the parent reads (the `coverage` phase of the twin's record)."""
        groups = []
        for g in self.groups.values():
            lines = sorted(g["lines"].items(), key=lambda kv: -kv[1])
            groups.append({**{k: v for k, v in g.items() if k != "lines"}, "lines": [int(n) for n, _ in lines[:3]]})
        groups.sort(key=lambda g: (-g["flops"], -g["ops"]))
        out: dict[str, Any] = {
            "micro_steps": self.micro,
            "forward": {p: [round(f), n] for p, (f, n) in self.forward.items()},
            "backward": [round(self.backward[0]), self.backward[1]],
            "wrap_ops": self.wrap_ops,
            "compiled_ops": self.compiled_ops,
            "seconds": round(self.seconds, 4),
            "measure": "aten operators outside compiled graphs, FLOPs where torch.utils.flop_counter has a formula",
            "higher_order": sorted(self.hops.values(), key=lambda h: (h["module"], h["operator"]))[:50],
            "meter_faults": [f"{where}: {why}" for where, why in [*self.faults.items(), *_FAULTS.items()][:10]],
        }
        if self.compiled:
            out["groups"] = groups[:200]
            out["tree"] = self.tree
            out["graphs"] = [{k: v for k, v in g.items() if k != "lines"} for g in _GRAPHS if g["runs"]][:200]
            out["graphs_compiled"] = len(_GRAPHS)
        return out


def _is_container(module: Any) -> bool:
    from torch import nn

    return isinstance(module, (nn.ModuleList, nn.Sequential, nn.ModuleDict))

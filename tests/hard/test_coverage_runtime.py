"""The coverage meter on real torch.compile runs (in this process, CPU, aot_eager): what it counts as compiled
and as eager, and what it says about why, checked against what dynamo did."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402

from model_compile.runtime.rehearsal.measure import coverage  # noqa: E402

CALLS: dict[str, int] = {"n": 0}


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = nn.Linear(16, 32)
        self.down = nn.Linear(32, 16)

    def forward(self, x: torch.Tensor, count: bool = False) -> torch.Tensor:
        if count:  # a side effect dynamo cannot replay under a checkpoint (as Hugging Face's layers have)
            CALLS["n"] += 1
        return x + self.down(torch.relu(self.up(x)))


class Tower(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x)


class Net(nn.Module):
    def __init__(self, checkpoint: bool = False, branch: bool = False) -> None:
        super().__init__()
        self.tower = Tower()
        self.layers = nn.ModuleList(Block() for _ in range(3))
        self.head = nn.Linear(16, 8)
        self.checkpoint = checkpoint
        self.branch = branch

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.tower(x)
        for layer in self.layers:
            if self.checkpoint:
                x = torch.utils.checkpoint.checkpoint(layer, x, True, use_reentrant=False)  # CHECKPOINT_LINE
            else:
                x = layer(x)
        out = []
        for start in range(0, x.shape[0], 2):
            chunk = x[start : start + 2]
            if self.branch and bool((chunk.sum() > 1e9).item()):  # a data-dependent branch in a loop
                continue
            out.append(self.head(chunk))
        return torch.cat(out).sum()


CHECKPOINT_LINE = next(
    i for i, line in enumerate(open(__file__).read().splitlines(), 1) if line.endswith("# CHECKPOINT_LINE")
)


def _measure(net: nn.Module, compiled: bool) -> dict:
    torch.manual_seed(0)
    x = torch.randn(6, 16)
    for _ in range(2):  # compile, then steady
        net(x).backward()
    meter = coverage.Meter(net, compiled=compiled)
    graphs = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    with meter.measure(2):
        net(x).backward()
    record = meter.record()
    # measuring changed nothing dynamo does: no new graph on the measured step
    record["new_graphs"] = torch._dynamo.utils.counters["stats"]["unique_graphs"] - graphs
    return record


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    coverage.install_graph_hook()
    yield
    torch._dynamo.reset()


def _eager_paths(record: dict) -> set[str]:
    return {path for path, (flops, ops) in record["forward"].items() if ops}


def test_a_whole_model_compile_without_breaks_leaves_nothing_eager():
    net = Net()
    total = _measure(Net(), compiled=False)
    net.compile(backend="aot_eager")
    rec = _measure(net, compiled=True)
    assert _eager_paths(rec) <= {"(outside the model)"}
    assert rec["compiled_ops"][0] > 0 and rec["compiled_ops"][1] > 0  # forward and backward ran in graphs
    assert rec["backward"][1] == 0
    assert rec["new_graphs"] == 0
    assert any(g["runs"] for g in rec["graphs"])
    assert {"layers.0.up", "layers.2.down", "head", "tower.proj"} <= set(total["forward"])


def test_a_disabled_region_is_eager_with_its_function_named():
    net = Net()
    net.tower.forward = torch.compiler.disable(net.tower.forward)
    net.compile(backend="aot_eager")
    rec = _measure(net, compiled=True)
    assert _eager_paths(rec) - {"(outside the model)"} == {"tower.proj"}
    group = next(g for g in rec["groups"] if g["module"] == "tower.proj")
    assert any(m.startswith("disable:Tower.forward") for m in group["markers"])
    assert "entry" in group["markers"]


def test_checkpointed_blocks_run_eager_under_a_whole_model_compile():
    net = Net(checkpoint=True)
    net.compile(backend="aot_eager")
    rec = _measure(net, compiled=True)
    eager = _eager_paths(rec)
    assert {"layers.0.up", "layers.1.down", "layers.2.up"} <= eager
    group = next(g for g in rec["groups"] if g["module"] == "layers.1.up")
    assert any(m.startswith("checkpoint:") and m.endswith(f"{__file__}:{CHECKPOINT_LINE}") for m in group["markers"])
    assert rec["backward"][1] > 0  # the checkpointed blocks' backward is eager too


def test_a_frame_skipped_for_a_break_in_a_loop_leaves_its_own_work_eager():
    net = Net(branch=True)
    net.compile(backend="aot_eager")
    rec = _measure(net, compiled=True)
    eager = _eager_paths(rec) - {"(outside the model)"}
    assert "head" in eager  # the loss head, called from the skipped frame
    assert not any(p.startswith("layers.") for p in eager)  # the blocks compiled as frames of their own
    head = next(g for g in rec["groups"] if g["module"] == "head")
    assert head["kind"] == "skipped" and head["code"].startswith("forward (")


def test_the_eager_twin_counts_everything_and_flops_weigh_the_linears():
    rec = _measure(Net(), compiled=False)
    flops = {p: f for p, (f, _) in rec["forward"].items()}
    assert flops["layers.0.up"] == 2 * 6 * 16 * 32  # one (6x16) @ (16x32) matmul
    assert rec["backward"][0] > 0 and "groups" not in rec


def test_changed_lines_are_counted_as_python_or_found_in_the_graphs(tmp_path) -> None:
    import importlib.util

    from model_compile.runtime.rehearsal.measure.lines import LineCounter, graph_lines

    path = tmp_path / "changed_mod.py"
    path.write_text("import torch\n\n\ndef f(x):\n    y = x * 2\n    return y + 1\n")
    spec = importlib.util.spec_from_file_location("changed_mod", path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    counter = LineCounter({str(path): [5, 6]})
    counter.start()
    try:
        for _ in range(3):
            mod.f(torch.ones(2))
    finally:
        counter.stop()
    assert counter.record()["counts"][str(path)] == {"5": 3, "6": 3}

    seen: list = []
    from torch._dynamo import output_graph

    original = output_graph.OutputGraph.call_user_compiler

    def spy(self, gm, example_inputs):  # type: ignore[no-untyped-def]
        seen.append(graph_lines(gm, {str(path): {5, 6}}))
        return original(self, gm, example_inputs)

    output_graph.OutputGraph.call_user_compiler = spy  # type: ignore[method-assign]
    compiled = torch.compile(mod.f, backend="aot_eager")
    counter = LineCounter({str(path): [5, 6]})
    counter.start()
    try:
        for _ in range(3):
            compiled(torch.ones(2))
    finally:
        counter.stop()
        output_graph.OutputGraph.call_user_compiler = original  # type: ignore[method-assign]
    assert counter.record()["counts"].get(str(path), {}) == {}  # the compiled frame's lines did not run as Python
    assert [[str(path), 5], [str(path), 6]] in seen


def test_code_that_does_not_hash_is_attributed_all_the_same() -> None:
    """A code object dynamo wrote may hold a dict among its constants, and then it does not hash (the bundled
    example's Qwen2-VL vision attention ran into one): the attribution keys codes by identity."""
    from model_compile.runtime.rehearsal.measure.frames import Attribution

    code = (lambda: 0).__code__.replace(co_consts=({},))
    with pytest.raises(TypeError):
        hash(code)
    attribution = Attribution({})
    assert attribution.user(code) is attribution.user(code)
    assert attribution.kind(code) == "untraced"


class Dropped(nn.Module):
    """Each block's two halves in their own activation checkpoint (checkpoint_wrapper, non-reentrant), dropout
    inside: torch saves and restores the rng state around them, higher-order operators under compile."""

    def __init__(self) -> None:
        super().__init__()
        from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import CheckpointImpl, checkpoint_wrapper

        wrap = {"checkpoint_impl": CheckpointImpl.NO_REENTRANT, "preserve_rng_state": False}
        self.attn = nn.ModuleList(checkpoint_wrapper(nn.Linear(16, 16), **wrap) for _ in range(2))  # type: ignore[arg-type]
        self.mlp = nn.ModuleList(
            checkpoint_wrapper(nn.Sequential(nn.Linear(16, 32), nn.Dropout(0.1), nn.Linear(32, 16)), **wrap)  # type: ignore[arg-type]
            for _ in range(2)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for attn, mlp in zip(self.attn, self.mlp, strict=True):
            x = x + mlp(x + attn(x))
        return x.sum()


def test_higher_order_operators_pass_the_counting_mode_and_what_ran_outside_a_graph_is_said() -> None:
    net = Dropped()
    net.compile(backend="aot_eager")
    meter = coverage.Meter(net, compiled=True)
    for step in range(2):
        with meter.measure(step):
            net(torch.randn(4, 16)).backward()  # torch's rng-state operators: no rule needed, nothing raised
    hops = {h["operator"]: h for h in meter.record()["higher_order"]}
    assert hops["run_and_save_rng_state"]["compiled"] > 0 and not hops["run_and_save_rng_state"]["eager"]
    assert meter.record()["meter_faults"] == []

    lin = nn.Linear(8, 8)
    eager = coverage.Meter(lin, compiled=False)
    with eager.measure(0):  # a higher-order operator run eagerly, as torch runs it (its body below the mode)
        _, out = torch.ops.higher_order.run_and_save_rng_state(lin, torch.randn(2, 8))
    assert out.shape == (2, 8)
    record = eager.record()
    assert record["higher_order"] == [
        {"operator": "run_and_save_rng_state", "module": "(outside the model)", "compiled": 0, "eager": 1}
    ]

    from model_compile.hard.models import RehearsalFacts
    from model_compile.hard.rehearsal.reading.coverage import unmeasured

    facts = RehearsalFacts(label="cpu-only")
    unmeasured(facts, {"eager": record})
    assert facts.coverage_unmeasured == [
        "coverage not measured for code outside the model inside run_and_save_rng_state (1 run(s) outside compiled "
        "graphs in the eager "
        "twin): torch runs a higher-order operator's body below the dispatch mode that counts operators, so its work "
        "is not in the shares"
    ]

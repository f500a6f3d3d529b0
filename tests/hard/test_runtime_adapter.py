"""Unit checks of the runtime adapter (torch, no model)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from model_compile.runtime import dynamo_adapter as rt  # noqa: E402

pytestmark = pytest.mark.hard


def record(**changes):
    base = {
        "compiled_module_count": 1,
        "missing_targets": [],
        "orig_mod_key_count": 0,
        "orig_mod_keys": [],
        "graph_breaks": {"total": 3},
        "recompiles": {"count": 1},
        "recompile_limit": {"limit": 8, "hit": False, "messages": []},
        "executed": {"measured": True, "step": 1, "compiled_region_events": 4},
        "unique_graphs": 2,
        "timing": {"steps": 3},
    }
    base.update(changes)
    return base


def test_budgets():
    assert rt.violations(record(), 3, 1) == []
    out = rt.violations(record(), 2, 0)
    assert "graph breaks 3 exceed the budget 2" in out and "recompiles 1 exceed the budget 0" in out
    assert rt.violations(record(), None, None) == []


def test_other_violations():
    hit = record(
        recompile_limit={"limit": 2, "hit": True, "messages": ["torch._dynamo hit config.recompile_limit (2)"]}
    )
    assert any("recompile_limit (2) hit" in v for v in rt.violations(hit, None, None))
    assert any(
        "ran eager" in v
        for v in rt.violations(record(executed={"measured": True, "step": 1, "compiled_region_events": 0}), None, None)
    )
    assert any(
        "_orig_mod." in v
        for v in rt.violations(record(orig_mod_key_count=2, orig_mod_keys=["_orig_mod.a"]), None, None)
    )
    assert any("no compiled module" in v for v in rt.violations(record(compiled_module_count=0), None, None))


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        return torch.relu(self.lin(x))


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList([Block(), Block()])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x.sum()


def test_probe_on_a_tiny_regional_model(tmp_path):
    torch._dynamo.reset()
    net = Net()
    for layer in net.layers:
        layer.compile(backend="eager")
    probe = rt.RuntimeProbe()
    probe.begin(backend="eager")
    facts = probe.inspect_model(net, ["layers.*"])
    assert facts["compiled_module_count"] == 2 and facts["missing_targets"] == []
    failures = rt.match_targets(net, ["", "layers.*"])
    assert len(failures) == 1 and failures[0].startswith("'': the model itself is not compiled (2 module(s) inside")
    for _ in range(3):
        probe.step_start()
        net(torch.randn(2, 4)).backward()
        probe.step_end()
    rec = probe.record()
    probe.close()
    assert rec["unique_graphs"] >= 1 and rec["graph_breaks"]["total"] == 0
    assert rec["executed"]["step"] == 1 and rec["executed"]["compiled_region_events"] >= 2
    assert rec["timing"]["steps"] == 3 and rec["environment"]["torch"] == torch.__version__
    path = probe.write(rec, tmp_path)
    assert path.name == "runtime-rank0.json"


def test_one_uncompiled_block_fails_the_regional_target():
    """A regional target expects every block: 1 of 2 compiled is a failure, not a pass."""
    torch._dynamo.reset()
    net = Net()
    net.layers[0].compile(backend="eager")
    probe = rt.RuntimeProbe()
    facts = probe.inspect_model(net, ["layers.*"])
    assert facts["missing_targets"] == ["layers.*"]
    assert facts["target_failures"] == ["'layers.*': 1 of 2 blocks compiled (not compiled: layers.1)"]
    problems = rt.violations({**record(), **facts}, None, None)
    assert "compiled target incomplete: 'layers.*': 1 of 2 blocks compiled (not compiled: layers.1)" in problems


def test_wrapper_keys_are_detected():
    wrapped = torch.compile(Net(), backend="eager")
    assert rt.orig_mod_names(wrapped)[0].startswith("_orig_mod.")
    assert rt.compiled_modules(wrapped)[0]["kind"] == "wrapper"


def test_a_recompile_limit_warning_keeps_its_guard_past_a_long_path() -> None:
    import logging

    handler = rt._LimitHandler()
    path = "/home/someone/" + "deep/" * 40 + "mvp_engine/kit/loss/token_loss.py"
    msg = (
        "torch._dynamo hit config.recompile_limit (8)\n"
        f"   function: 'torch_dynamo_resume_in_forward_at_258' ({path}:258)\n"
        "   last reason: 2/7: tensor 'dict.__getitem__(___stack0, list(dict.keys(___stack0))[0])' size mismatch "
        "at index 1. expected 79, actual 9\n"
        'To log all recompilation reasons, use TORCH_LOGS="recompiles".'
    )
    handler.emit(logging.LogRecord("torch._dynamo", logging.WARNING, __file__, 1, msg, None, None))
    (kept,) = handler.messages
    assert kept.endswith("size mismatch at index 1. expected 79, actual 9") and "TORCH_LOGS" not in kept

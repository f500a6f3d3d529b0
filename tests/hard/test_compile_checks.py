"""The rendered compile_checks.py (what generated recipe tests import) agrees with the tool's runtime.

The recipe's tests must run without model-compile installed, so generate renders
its own helper into `tests/skills/model-compile/`; these tests load the rendered
file by path, as the generated asserts do, and compare it with
`model_compile.runtime` on the same models and records.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from model_compile.recipe_tests import default_context, render_recipe_tests  # noqa: E402
from model_compile.runtime import dynamo_adapter as rt  # noqa: E402
from model_compile.runtime.targets import check_targets  # noqa: E402

pytestmark = pytest.mark.hard


@pytest.fixture(scope="module")
def skill_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("recipe") / "recipes" / "toy" / "tests" / "skills" / "model-compile"
    out.mkdir(parents=True)
    for name, text in render_recipe_tests(default_context("toy", "fallback:regional")).items():
        (out / name).write_text(text, encoding="utf-8")
    return out


@pytest.fixture(scope="module")
def checks(skill_dir: Path):
    spec = importlib.util.spec_from_file_location("toy_compile_checks_under_test", skill_dir / "compile_checks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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


def test_the_rendered_helper_imports_no_model_compile(skill_dir: Path):
    for name in ("compile_checks.py", "asserts.py"):
        text = (skill_dir / name).read_text()
        assert "model_compile.runtime" not in text, name
    code = (
        "import sys; sys.modules['model_compile'] = None; import compile_checks; print(compile_checks.RUNTIME_SCHEMA)"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=skill_dir, capture_output=True, text=True)
    assert out.stdout.strip() == rt.RUNTIME_SCHEMA, out.stderr


@pytest.mark.parametrize(
    "patterns",
    [["layers.*"], ["", "layers.*"], ["layers.0"], ["layers.0.lin"], ["missing.*"], ["*"]],
)
@pytest.mark.parametrize("compiled", [[], ["layers.0"], ["layers.0", "layers.1"], [""]])
def test_target_checks_match_the_runtime(checks, patterns, compiled):
    names = ["", "layers", "layers.0", "layers.0.lin", "layers.1", "layers.1.lin"]
    assert checks.check_targets(names, compiled, patterns) == check_targets(names, compiled, patterns)


def test_violations_match_the_runtime(checks):
    base = {
        "compiled_module_count": 1,
        "target_failures": [],
        "orig_mod_key_count": 0,
        "orig_mod_keys": [],
        "graph_breaks": {"total": 3},
        "recompiles": {"count": 1},
        "recompile_limit": {"limit": 8, "hit": False, "messages": []},
        "executed": {"measured": True, "step": 1, "compiled_region_events": 4},
        "unique_graphs": 2,
        "timing": {"steps": 3},
    }
    variants = [
        {},
        {"compiled_module_count": 0},
        {"orig_mod_key_count": 2, "orig_mod_keys": ["_orig_mod.a", "_orig_mod.b"]},
        {"recompile_limit": {"limit": 2, "hit": True, "messages": ["hit config.recompile_limit (2)"]}},
        {"executed": {"measured": True, "step": 1, "compiled_region_events": 0}},
        {"unique_graphs": 0},
        {
            "target_failures": ["'layers.*': 1 of 2 blocks compiled (not compiled: layers.1)"],
            "missing_targets": ["layers.*"],
        },
    ]
    for change in variants:
        record = {**base, **change}
        for budgets in ((3, 1), (2, 0), (None, None)):
            assert checks.violations(record, *budgets) == rt.violations(record, *budgets), (change, budgets)
    assert checks.violations(base, 2, 0) == ["graph breaks 3 exceed the budget 2", "recompiles 1 exceed the budget 0"]


def test_a_regional_run_records_what_the_runtime_records(checks, tmp_path, monkeypatch):
    torch._dynamo.reset()
    net = Net()
    for layer in net.layers:
        layer.compile(backend="eager")
    ours, tool = checks.get_probe(reset=True), rt.RuntimeProbe()
    ours.begin(backend="eager")
    tool.begin(backend="eager")
    assert ours.inspect_model(net, ["layers.*"]) == tool.inspect_model(net, ["layers.*"])
    for _ in range(3):
        ours.step_start()
        tool.step_start(profile_this_step=False)
        net(torch.randn(2, 4)).backward()
        tool.step_end()
        ours.step_end()
    mine, theirs = ours.record(), tool.record()
    ours.close()
    tool.close()
    assert sorted(mine) == sorted(theirs)
    for key in ("graph_breaks", "unique_graphs", "recompiles", "compiled_module_count", "orig_mod_key_count"):
        assert mine[key] == theirs[key], key
    assert mine["unique_graphs"] >= 1 and mine["executed"]["step"] == 1
    assert mine["executed"]["compiled_region_events"] >= 2
    monkeypatch.setenv("MODEL_COMPILE_RUNTIME_DIR", str(tmp_path))
    assert ours.write(mine) == tmp_path / "runtime-rank0.json"


def test_the_generated_asserts_load_the_helper_by_path_under_a_synthetic_name(skill_dir: Path):
    """As the reference repository loads asserts.py: spec_from_file_location under a made-up module name."""
    spec = importlib.util.spec_from_file_location("toy_model_compile_asserts", skill_dir / "asserts.py")
    asserts = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(asserts)
    helper = asserts._runtime()
    assert helper is asserts._runtime()  # loaded once: the hooks of one run share one probe
    assert Path(helper.__file__) == skill_dir / "compile_checks.py"
    assert helper.get_probe() is helper.get_probe()


def test_the_tool_puts_no_probe_on_the_path_for_generated_tests(skill_dir: Path):
    from model_compile.hard.env import probe

    recipe_root = skill_dir.parents[2]
    assert not probe.used_by(recipe_root)  # asserts.py names model_compile.api only inside a skip
    (recipe_root / "tests" / "test_old.py").write_text("from model_compile.runtime import dynamo_adapter\n")
    assert probe.used_by(recipe_root)  # a test written against the tool's runtime still gets it

"""The generated asserts.py runs where the recipe lives: without model-compile it checks the compiled targets,
`_orig_mod.` names and the prepare_model() wiring itself (and makes a recompile-limit hit raise); with the tool's
probe on the path (`validate --hard`) the probe records the run around the same hooks. One file, tens of lines."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from model_compile.recipe_tests import default_context, render_recipe_tests  # noqa: E402

pytestmark = pytest.mark.hard

# A model and an engine of the recipe's kind, written here; the hooks receive the engine as the smoke test does.
HARNESS = textwrap.dedent(
    """
    import importlib.util, sys, types
    if "--no-tool" in sys.argv:
        sys.modules["model_compile"] = None  # as in a repository environment without model-compile
    import torch

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

    def parallelize_model(model):
        return model

    class Engine:
        def __init__(self, compiled):
            section = types.SimpleNamespace(enabled=True, backend="eager", mode="default")
            self.config = types.SimpleNamespace(model=types.SimpleNamespace(compile=section))
            self.compiled = compiled

        def prepare_model(self):
            model = Net()
            if self.config.model.compile.enabled:
                for block in model.layers:
                    block.compile(backend="eager")
            return parallelize_model(model)

    spec = importlib.util.spec_from_file_location("toy_asserts", sys.argv[1])
    asserts = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(asserts)
    engine = Engine(compiled="--eager" not in sys.argv)
    engine.model = engine.prepare_model() if engine.compiled else Net()
    asserts.test_config_structure(engine.config)
    asserts.test_engine_structure(Engine)
    def run(hook):  # as the smoke test does: the hooks the module defines
        if hasattr(asserts, hook):
            getattr(asserts, hook)(engine)

    for hook in ("assert_before_train_start", "assert_before_train_end", "assert_train_pre_step_start"):
        run(hook)
    engine.model(torch.ones(2, 4)).backward()
    run("assert_train_post_step_end")
    run("assert_after_train_end")
    print("done")
    """
)


@pytest.fixture(scope="module")
def skill(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("recipe") / "tests" / "skills" / "model-compile"
    out.mkdir(parents=True)
    context = default_context("toy", "fallback:regional", target_patterns=["layers.*"])
    for name, text in render_recipe_tests(context).items():
        (out / name).write_text(text, encoding="utf-8")
    (out / "harness.py").write_text(HARNESS, encoding="utf-8")
    return out


def _run(skill: Path, *flags: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(skill / "harness.py"), str(skill / "asserts.py"), *flags],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


def test_the_asserts_are_one_small_file_that_needs_no_tool(skill: Path):
    assert sorted(p.name for p in skill.iterdir()) == ["asserts.py", "harness.py", "test_compile_parity.py"]
    text = (skill / "asserts.py").read_text()
    assert len(text.splitlines()) <= 130  # a hundred-odd lines, where two files of 552 were
    top = [line for line in text.splitlines() if line.startswith(("import ", "from "))]
    assert top == ["import ast", "import inspect", "import textwrap"]  # the tool only inside try/except ImportError


def test_without_model_compile_the_checks_run_and_pass(skill: Path, tmp_path):
    import os

    proc = _run(skill, "--no-tool", env={**os.environ, "MODEL_COMPILE_RUNTIME_DIR": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "done" in proc.stdout and not list(tmp_path.iterdir())  # checked, nothing recorded


def test_without_model_compile_an_uncompiled_target_fails(skill: Path):
    proc = _run(skill, "--no-tool", "--eager")
    assert proc.returncode != 0
    assert "not compiled ('layers.*'): ['layers.0', 'layers.1']" in proc.stderr


def test_with_the_probe_the_run_is_recorded_around_the_same_hooks(skill: Path, tmp_path):
    import json
    import os

    proc = _run(skill, env={**os.environ, "MODEL_COMPILE_RUNTIME_DIR": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    record = json.loads((tmp_path / "runtime-rank0.json").read_text())
    assert record["compile"]["path"] == "fallback:regional" and record["violations"] == []
    assert record["timing"]["steps"] == 1 and record["missing_targets"] == []

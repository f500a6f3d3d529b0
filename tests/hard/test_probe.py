"""The probe put on the child's PYTHONPATH: the tool's runtime package, self-contained."""

from __future__ import annotations

import ast
import subprocess
import sys

from model_compile.hard.env import probe


def test_runtime_imports_nothing_else_from_model_compile():
    for path in probe.runtime_dir().glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                assert node.level == 0, f"{path.name}: relative import"
                names = [node.module]
            for name in names:
                if name.startswith("model_compile"):
                    assert name.startswith("model_compile.runtime"), f"{path.name} imports {name}"


def test_build_copies_runtime_and_is_importable_alone(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    root = probe.build(tmp_path / "out")
    assert root.parent == tmp_path / "cache" / "model-compile"  # stable: printed commands stay valid after the run
    assert sorted(p.name for p in (root / "model_compile" / "runtime").glob("*.py")) == sorted(
        p.name for p in probe.runtime_dir().glob("*.py")
    )
    code = (
        "import sys; sys.path[:] = [p for p in sys.path if 'site-packages' not in p and 'tools' not in p]; "
        "import model_compile, model_compile.runtime as r; print(model_compile.PROBE, r.RUNTIME_DIR_ENV)"
    )
    out = subprocess.run(
        [sys.executable, "-S", "-c", code], env={"PYTHONPATH": str(root)}, capture_output=True, text=True
    )
    assert out.stdout.split() == ["True", "MODEL_COMPILE_RUNTIME_DIR"], out.stderr
    assert probe.build(tmp_path / "out") == root  # reused, not rebuilt


def test_build_falls_back_to_the_run_folder_when_the_cache_is_not_writable(tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    root = probe.build(tmp_path / "out")
    assert root == tmp_path / "out" / "probe"
    assert (root / "model_compile" / "runtime" / "dynamo_adapter.py").is_file()


def test_needed_unless_the_child_sees_this_very_runtime():
    assert probe.needed(None)
    assert probe.needed("/elsewhere/site-packages/model_compile/runtime/__init__.py")
    assert not probe.needed(str(probe.runtime_dir() / "__init__.py"))


def test_used_only_when_the_recipe_tests_import_model_compile(tmp_path):
    (tmp_path / "tests" / "skills" / "x").mkdir(parents=True)
    (tmp_path / "tests" / "test_smoke.py").write_text("import torch\n")
    assert not probe.used_by(tmp_path)
    (tmp_path / "tests" / "skills" / "x" / "asserts.py").write_text(
        "def f():\n    from model_compile.runtime import dynamo_adapter\n"
    )
    assert probe.used_by(tmp_path)

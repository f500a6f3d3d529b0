"""Bad input gets one line and exit 2 (or a finding inside a usable repo);
static analysis never executes the target's code and never imports torch."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from model_compile.analyze import analyze_path
from model_compile.rules.base import Example
from model_compile.rules.scaffold import example_files

ROOT = Path(__file__).resolve().parents[1]


def _write(root: Path, files: dict) -> Path:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(text if isinstance(text, bytes) else text.encode())
    return root


def _cli(*args):
    env = {"PYTHONPATH": str(ROOT / "tools"), "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    return subprocess.run(
        [sys.executable, "-m", "model_compile.cli", *args], capture_output=True, text=True, env=env, timeout=60
    )


def _one_line_exit_2(proc, needle):
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().count("\n") == 0
    assert needle in proc.stderr


def test_missing_path(tmp_path):
    _one_line_exit_2(_cli("validate", str(tmp_path / "missing")), "no such file")


def test_path_without_recipes(tmp_path):
    (tmp_path / "README.md").write_text("nothing here")
    _one_line_exit_2(_cli("validate", str(tmp_path)), "no recipes found")


def test_path_is_a_file(tmp_path):
    f = tmp_path / "x.py"
    f.write_text("x = 1")
    _one_line_exit_2(_cli("inspect", str(f)), "not a directory")


def test_unknown_recipe_name(tmp_path):
    _write(tmp_path, example_files(Example()))
    _one_line_exit_2(_cli("validate", str(tmp_path), "--recipe", "nope"), "no recipe named 'nope'")


def test_unknown_option_is_one_line():
    _one_line_exit_2(_cli("validate", "--no-such-flag", "."), "unrecognized arguments")


def test_binary_and_non_utf8_files_are_findings_not_crashes(tmp_path):
    files = example_files(Example())
    files["recipes/example/model/blob.py"] = b"\x00\x01\x02binary"
    files["recipes/example/model/latin.py"] = b"# caf\xe9\n"
    files["recipes/example/assets/logo.png"] = b"\x89PNG\r\n\x1a\n\x00\x00"
    _write(tmp_path, files)
    report = analyze_path(tmp_path)
    msgs = sorted(f.message for f in report.all_findings() if f.rule == "MC000")
    assert len(msgs) == 2 and any("binary" in m for m in msgs) and any("not UTF-8" in m for m in msgs)


def test_schema_without_expected_classes(tmp_path):
    _write(
        tmp_path,
        example_files(Example(schema="from pydantic import BaseModel\n\n\nclass Other(BaseModel):\n    x: int = 1\n")),
    )
    recipe = analyze_path(tmp_path).recipes[0]
    mc201 = [f for f in recipe.findings if f.rule == "MC201"]
    assert mc201 and "no config class with a `model` field" in mc201[0].message


def test_symlink_loop_does_not_hang(tmp_path):
    _write(tmp_path, example_files(Example()))
    (tmp_path / "recipes" / "example" / "model" / "loop").symlink_to(tmp_path / "recipes", target_is_directory=True)
    (tmp_path / "recipes" / "example" / "dangling.py").symlink_to(tmp_path / "nowhere.py")
    proc = _cli("validate", str(tmp_path))
    assert proc.returncode in (0, 1), proc.stderr
    assert "Traceback" not in proc.stderr


def test_static_mode_executes_nothing(tmp_path):
    marker = tmp_path / "executed.txt"
    poison = f"open({str(marker)!r}, 'w').write('ran')\nraise SystemExit('imported!')\n"
    files = example_files(Example())
    for rel in (
        "recipes/example/engine/example_engine.py",
        "recipes/example/configs/schema.py",
        "recipes/example/model/__init__.py",
    ):
        files[rel] = poison + files[rel]
    files["recipes/example/configs/train.yaml"] = "!!python/object/apply:os.system ['touch " + str(marker) + "']\n"
    files["example_engine/kit/mllm/model.py"] = (
        poison
        + "class MLLMModelKit:\n    def apply_model_compile(self, model, backend, mode):\n        model.compile(backend=backend, mode=mode)\n"
    )
    _write(tmp_path, files)
    code = (
        "import sys\nfrom model_compile.cli import main\n"
        f"rc = main(['validate', {str(tmp_path)!r}, '--format', 'json'])\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
        "print('rc', rc)\n"
    )
    env = {"PYTHONPATH": str(ROOT / "tools"), "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert not marker.exists(), "static analysis executed target code"
    assert "rc " in proc.stdout


def test_help_does_not_import_torch_or_jinja():
    code = "import sys\nfrom model_compile.cli import build_parser\nbuild_parser()\nassert 'torch' not in sys.modules\nprint('ok')\n"
    env = {"PYTHONPATH": str(ROOT / "tools"), "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert proc.stdout.strip() == "ok", proc.stderr


def test_internal_error_is_one_line(monkeypatch, capsys):
    from model_compile import analyze, cli

    def boom(*args, **kwargs):
        raise ValueError("synthetic failure")

    monkeypatch.setattr(analyze, "analyze_path", boom)
    monkeypatch.delenv("MODEL_COMPILE_DEBUG", raising=False)
    assert cli.main(["validate", "."]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "internal error: ValueError: synthetic failure" in err


def test_alias_cycles_do_not_recurse_forever(tmp_path):
    body = (
        "model = self.model_kit.build_model(self.config.model.path)\n"
        "x = y\n"
        "y = z\n"
        "z = x\n"
        "y.compile()\n"
        "return parallelize_model(model, parallel_mesh=self.parallel_mesh)\n"
    )
    _write(tmp_path, example_files(Example(body=body)))
    report = analyze_path(tmp_path)
    assert report.recipes[0].ledger[0].events


def test_runtime_options_of_review_need_hard_and_are_checked_before_anything_runs(tmp_path):
    """--config-override and --model-config shape the runtime layers: without --hard, or naming a key the
    stage lacks, a file that is not there, or a negative width, they are one line and exit 2, nothing written."""
    recipe = ROOT / "tests" / "hard" / "fixtures" / "rehearsal_repo" / "recipes" / "lm_own_fields"
    out = tmp_path / "out"
    _one_line_exit_2(_cli("review", str(recipe), "--config-override", "data.batch_size=1"), "need --hard")
    _one_line_exit_2(
        _cli("review", str(recipe), "--hard", "--config-override", "model.hiden_size=64", "--out", str(out)),
        "configs/train.yaml has no key model.hiden_size",
    )
    _one_line_exit_2(
        _cli("review", str(recipe), "--hard", "--model-config", f"/cluster/enc={tmp_path / 'none.json'}"),
        "no such file",
    )
    _one_line_exit_2(
        _cli("rehearse", str(recipe), "--config-override", "model.head.d_model=-64"), "must be a positive integer"
    )
    assert not out.exists()

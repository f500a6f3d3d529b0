"""Which interpreter runs the recipe tests, and why."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from model_compile.errors import InputError
from model_compile.hard.env.interpreter import child_environ, resolve


def fake_env(prefix: Path, conda: bool = False) -> Path:
    python = prefix / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("#!/bin/sh\n")
    python.chmod(0o755)
    if conda:
        (prefix / "conda-meta").mkdir()
    else:
        (prefix / "pyvenv.cfg").write_text("home = /usr/bin\n")
    return python


def test_order_python_flag_then_repo_env_then_active_env_then_tool(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    active = fake_env(tmp_path / "active")
    environ = {"VIRTUAL_ENV": str(tmp_path / "active")}
    tool = resolve(repo, environ={})
    assert tool.source == "tool" and tool.path == sys.executable and "pass --python" in tool.reason
    assert resolve(repo, environ=environ).path == str(active)
    own = fake_env(repo / "venv")
    chosen = resolve(repo, environ=environ)
    assert (chosen.path, chosen.source) == (str(own), "repo") and "(venv/ at" in chosen.reason
    dot = fake_env(repo / ".venv")
    assert resolve(repo, environ=environ).path == str(dot)  # .venv before venv
    flag = resolve(repo, python=str(tmp_path / "active"), environ=environ)  # a folder names its bin/python
    assert (flag.path, flag.reason) == (str(active), "given with --python")
    assert resolve(repo, environ={"MODEL_COMPILE_PYTHON": str(active)}).source == "MODEL_COMPILE_PYTHON"


def test_the_tools_own_active_env_and_conda_prefix(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    assert resolve(repo, environ={"VIRTUAL_ENV": sys.prefix}).source == "tool"
    conda = fake_env(tmp_path / "conda", conda=True)
    chosen = resolve(repo, environ={"CONDA_PREFIX": str(tmp_path / "conda")})
    assert chosen.path == str(conda) and chosen.source == "CONDA_PREFIX"
    env = child_environ(chosen, {"PATH": "/usr/bin", "VIRTUAL_ENV": "/elsewhere"})
    assert env["CONDA_PREFIX"] == str(tmp_path / "conda") and "VIRTUAL_ENV" not in env
    assert env["PATH"].split(os.pathsep)[0] == str(conda.parent)


def test_bad_python_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="not an executable file"):
        resolve(tmp_path, python=str(tmp_path / "nope"))
    with pytest.raises(InputError, match="no bin/python"):
        resolve(tmp_path, python=str(tmp_path))

"""Copies of the bundled example repository for review tests (in tmp_path; git optional)."""

from __future__ import annotations

import shutil
from pathlib import Path

from git_helpers import git

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "demo_repo"
KIT_ENGINE = "recipes/vlm_kit/engine/vlm_kit_engine.py"

COMPILE = """        if self.config.model.compile.enabled:
            model = self.model_kit.apply_model_compile(
                model, backend=self.config.model.compile.backend, mode=self.config.model.compile.mode
            )
"""
WRAP = "        return parallelize_model(model, parallel_mesh=self.parallel_mesh, backend_kwargs=None)\n"
WRAP_FIRST = "        model = parallelize_model(model, parallel_mesh=self.parallel_mesh, backend_kwargs=None)\n"


def demo_copy(dest: Path) -> Path:
    """The example repository copied to dest (no caches)."""
    shutil.copytree(DEMO, dest, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"))
    return dest


def move_compile_after_wrap(repo: Path) -> None:
    """The defect the review must catch: the kit compile moved below the distributed wrap."""
    path = repo / KIT_ENGINE
    text = path.read_text()
    assert COMPILE + WRAP in text
    path.write_text(text.replace(COMPILE + WRAP, WRAP_FIRST + COMPILE + "        return model\n"))


def git_repo(dest: Path) -> Path:
    """The example as a git repository with one commit on main."""
    repo = demo_copy(dest)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "initial")
    return repo

"""A runtime result is about the torch it ran on: the report says when that is not the release the
repository pins (read statically from its pyproject.toml)."""

from __future__ import annotations

from pathlib import Path

import pytest

from model_compile.hard.env.torch_pin import torch_pin, version_note


@pytest.mark.parametrize(
    ("pyproject", "pin"),
    [
        ('[project]\ndependencies = ["torch==2.8.0", "numpy"]\n', ("2.8.0", "pyproject.toml [project].dependencies")),
        (
            "[project]\ndependencies = [\"torch == 2.8.0 ; sys_platform == 'linux'\"]\n",  # spaces and a marker
            ("2.8.0", "pyproject.toml [project].dependencies"),
        ),
        (
            '[project]\ndependencies = []\n[project.optional-dependencies]\ngpu = ["torch==2.7.1"]\n',
            ("2.7.1", "pyproject.toml [project.optional-dependencies].gpu"),
        ),
        ('[dependency-groups]\ntrain = ["torch==2.6.0"]\n', ("2.6.0", "pyproject.toml [dependency-groups].train")),
        ('[project]\ndependencies = ["torch>=2.5"]\n', None),  # near miss: a range, nothing to compare
        ('[project]\ndependencies = ["torchvision==0.23.0"]\n', None),  # near miss: another package
        ("[project\n", None),  # does not parse
    ],
)
def test_the_pin_is_read_from_the_repository(tmp_path: Path, pyproject: str, pin: tuple[str, str] | None) -> None:
    (tmp_path / "pyproject.toml").write_text(pyproject)
    assert torch_pin(tmp_path) == pin


def test_the_note_compares_releases_not_build_labels(tmp_path: Path) -> None:
    assert version_note(tmp_path, "2.13.0") is None  # no pyproject.toml
    (tmp_path / "pyproject.toml").write_text('[project]\ndependencies = ["torch==2.13.0"]\n')
    assert version_note(tmp_path, "2.13.0+cu130") is None
    assert version_note(tmp_path, None) is None
    (tmp_path / "pyproject.toml").write_text('[project]\ndependencies = ["torch==2.8.0"]\n')
    note = version_note(tmp_path, "2.13.0+cpu")
    assert note is not None and note.startswith(
        "torch 2.13.0+cpu ran these checks, but the repository pins torch==2.8.0"
    )

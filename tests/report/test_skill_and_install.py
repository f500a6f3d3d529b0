"""SKILL.md names only commands and flags that exist; install-skill is idempotent and keeps local edits."""

from __future__ import annotations

import argparse
import re
import shlex
from pathlib import Path

import pytest

from model_compile.cli import build_parser, main
from model_compile.skillpack import MANIFEST, default_dest, install

ROOT = Path(__file__).resolve().parents[2]
SKILL = ROOT / "skills" / "model-compile" / "SKILL.md"


def _commands(text: str) -> list[str]:
    """Every `model-compile ...` command: lines of bash blocks and inline code spans."""
    found = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in block.splitlines():
            line = line.split("#", 1)[0].strip()
            if line.startswith("model-compile "):
                found.append(line)
    found += [m for m in re.findall(r"`(model-compile [^`]+)`", text)]
    return found


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_skill_commands_and_flags_exist() -> None:
    commands = _commands(SKILL.read_text())
    assert len(commands) >= 8
    subs = _subparsers(build_parser())
    used = set()
    for command in commands:
        words = shlex.split(command)
        assert words[1] in subs, f"SKILL.md names an unknown subcommand: {command}"
        used.add(words[1])
        flags = {s for a in subs[words[1]]._actions for s in a.option_strings}
        for word in words[2:]:
            if word.startswith("--"):
                assert word.split("=", 1)[0] in flags, f"SKILL.md names an unknown flag {word}: {command}"
    assert {"review", "generate", "rules"} <= used


def test_skill_frontmatter_and_length() -> None:
    text = SKILL.read_text()
    front = text.split("---\n")[1]
    keys = [line.split(":", 1)[0] for line in front.splitlines() if line and not line.startswith(" ")]
    assert set(keys) <= {"name", "description", "license", "compatibility", "metadata", "allowed-tools"}
    assert len(text.splitlines()) < 500
    for ref in re.findall(r"\]\((references/[^)]+)\)", text):
        assert (SKILL.parent / ref).is_file(), ref


def _grouped_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / "skills" / "model" / "liger").mkdir(parents=True)
    (repo / "skills" / "model" / "liger" / "SKILL.md").write_text("---\nname: liger\n---\n")
    (repo / "skills" / "training" / "mfu").mkdir(parents=True)
    (repo / "skills" / "training" / "mfu" / "SKILL.md").write_text("---\nname: mfu\n---\n")
    return repo


def test_install_next_to_grouped_skills_idempotent(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = _grouped_repo(tmp_path)
    assert default_dest(repo) == repo / "skills" / "model" / "model-compile"
    assert main(["install-skill", str(repo)]) == 0
    dest = repo / "skills" / "model" / "model-compile"
    assert (dest / "SKILL.md").read_text() == SKILL.read_text()
    assert (dest / "references" / "patterns.md").is_file() and (dest / "references" / "rules.md").is_file()
    assert (dest / MANIFEST).is_file()
    capsys.readouterr()
    assert main(["install-skill", str(repo)]) == 0
    assert "already current" in capsys.readouterr().out


def test_install_refuses_local_edits_without_force(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = _grouped_repo(tmp_path)
    result = install(repo)
    skill = result.dest / "SKILL.md"
    skill.write_text(skill.read_text() + "\nlocal note\n")
    (result.dest / "references" / "asserts.py").write_text("# the repo's own file\n")
    assert main(["install-skill", str(repo)]) == 2
    assert "SKILL.md" in capsys.readouterr().err and "local note" in skill.read_text()
    result = install(repo, force=True)
    assert result.overwritten == ["SKILL.md"] and result.kept == ["references/asserts.py"]
    assert "local note" not in skill.read_text()
    assert (result.dest / "references" / "asserts.py").read_text() == "# the repo's own file\n"


def test_install_over_a_skill_it_did_not_write_and_dest(tmp_path: Path) -> None:
    repo = _grouped_repo(tmp_path)
    own = repo / "skills" / "model" / "model-compile"
    own.mkdir()
    (own / "SKILL.md").write_text("the repository's own version\n")
    with pytest.raises(Exception, match="not written by install-skill"):
        install(repo)
    assert (own / "SKILL.md").read_text() == "the repository's own version\n"
    result = install(repo, dest=Path("agents/model-compile"))
    assert result.dest == repo / "agents" / "model-compile" and (result.dest / "SKILL.md").is_file()


def test_every_flag_the_skill_mentions_exists_somewhere() -> None:
    subs = _subparsers(build_parser())
    flags = {s for p in subs.values() for a in p._actions for s in a.option_strings}
    mentioned = set(re.findall(r"(?<![\w-])(--[a-z][a-z-]+)", SKILL.read_text()))
    assert mentioned - flags - {"--config-override"} == set()  # a recipe pytest option, not ours

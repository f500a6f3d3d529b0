"""The family of a model whose config.json is not on this machine, from what the recipe itself says of it.

A stage's checkpoint is often a path on the team's cluster (`/cache/save_dir/run7/final`) that names nothing. The
recipe still tells what it trains, in three places read here, strongest first:

1. the same model key in the recipe's other stages (`lab/Qwen3-VL-8B-stage0` in its debug stage);
2. its README, up to its first section (`a Qwen3-VL recipe for ...`);
3. its own code: module file names (`model/qwen3_vl.py`) and the transformers model packages it imports
   (`transformers.models.qwen3_vl`).

The first place that names a family decides: one family there is the answer, with where it was read; several
there is no answer (the message names them). A name of another architecture of a family (mixture of experts,
hybrid, omni) is told apart (`model_plan.name_family`) and is no answer either: its structure is not the preset's.
Pure Python: files read as text, nothing imported.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

TOKEN = re.compile(r"[A-Za-z0-9_./-]+")
TRANSFORMERS_MODEL = re.compile(r"transformers\.models\.([A-Za-z0-9_]+)")
VARIANT = " variant"  # what `of_name` says of another architecture of a family (its structure is not the preset's)
README_LINES = 40  # a README's head: its title and first paragraphs, before a section could compare families


@dataclass
class Evidence:
    families: dict[str, list[str]] = field(default_factory=dict)  # family -> where each mention was read
    place: str = ""  # which of the three places the families come from

    @property
    def family(self) -> str | None:
        """The one family named here, else None (none, several, or another architecture of a family)."""
        if len(self.families) != 1:
            return None
        only = next(iter(self.families))
        return None if only.endswith(VARIANT) else only

    def where(self) -> str:
        fam = self.family
        return "; ".join(self.families[fam][:2]) if fam else ""

    def candidates(self) -> str:
        return ", ".join(f"{fam} ({'; '.join(seen[:1])})" for fam, seen in self.families.items())


def _families(text: str, where: str, of_name: Callable[[str], str | None], out: dict[str, list[str]]) -> None:
    for token in TOKEN.findall(text):
        family = of_name(token)
        if family is not None and where not in out.setdefault(family, []):
            out[family].append(where)


def _value(data: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        if not isinstance(data, dict):
            return None
        data = data.get(part)
    return data


def _stages(key: str, stage_files: dict[str, Path], skip: str | None, of_name: Callable[[str], str | None]) -> dict:
    out: dict[str, list[str]] = {}
    for name, path in stage_files.items():
        if name == skip:
            continue
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError):
            continue
        value = _value(data, key)
        if isinstance(value, str):
            _families(value, f"stage {name} sets {key} = {value!r}", of_name, out)
    return out


def _readme(recipe_root: Path, of_name: Callable[[str], str | None]) -> dict:
    out: dict[str, list[str]] = {}
    path = recipe_root / "README.md"
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()[:README_LINES]
    except OSError:
        return out
    for number, line in enumerate(lines, 1):
        if number > 1 and line.startswith("## "):
            break
        _families(line, f"{path.name}:{number}", of_name, out)
    return out


def _code(recipe_root: Path, of_name: Callable[[str], str | None]) -> dict:
    out: dict[str, list[str]] = {}
    for path in sorted(recipe_root.rglob("*.py")):
        rel = path.relative_to(recipe_root)
        if rel.parts[0] in ("tests", "test") or any(part.startswith(".") for part in rel.parts):
            continue
        _families(path.stem, f"the recipe's module {rel.as_posix()}", of_name, out)
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            for package in TRANSFORMERS_MODEL.findall(line):
                _families(package, f"{rel.as_posix()}:{number} imports transformers.models.{package}", of_name, out)
    return out


def recipe_family(
    recipe_root: Path,
    key: str,
    stage_files: dict[str, Path],
    stage: str | None,
    of_name: Callable[[str], str | None],
) -> Evidence:
    """What the recipe says its model is (`key`: the stage's dotted model key; `stage`: the stage planned)."""
    places = (
        ("the recipe's other stages", lambda: _stages(key, stage_files, stage, of_name)),
        ("the recipe's README", lambda: _readme(recipe_root, of_name)),
        ("the recipe's own code", lambda: _code(recipe_root, of_name)),
    )
    for place, read in places:
        found = read()
        if found:
            return Evidence(families=found, place=place)
    return Evidence()

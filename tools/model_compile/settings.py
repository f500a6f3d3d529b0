"""`[tool.model-compile]` in the target repository's pyproject.toml.

One loader for every stage's knobs, read statically (tomllib; nothing of the
target is imported). Unknown keys or wrong types are an `InputError` naming
the key, so a typo never silently turns a setting off.

    [tool.model-compile]
    templates = "tools/compile-templates"   # team template overrides
    max-file-bytes = 4000000                # larger files are skipped, with a finding
    select = ["MC1", "MC4"]                 # rule ids or prefixes to run (default: all)
    ignore = ["MC205"]                      # rule ids or prefixes to drop
    severity = { MC203 = "info" }           # per-rule severity
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from model_compile.errors import InputError
from model_compile.vocabulary import Severity

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

DEFAULT_MAX_FILE_BYTES = 4_000_000


class Settings(BaseModel):
    """The repository's model-compile settings, defaults filled."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)

    templates: str | None = Field(default=None, description="template override folder, relative to the repo root")
    max_file_bytes: int = Field(default=DEFAULT_MAX_FILE_BYTES, alias="max-file-bytes", gt=0)
    select: list[str] = Field(default_factory=list, description="rule ids or prefixes to run; empty: all")
    ignore: list[str] = Field(default_factory=list, description="rule ids or prefixes never reported")
    severity: dict[str, Severity] = Field(default_factory=dict, description="per-rule severity override")


def _table(repo_root: Path) -> dict[str, Any]:
    pyproject = repo_root / "pyproject.toml"
    try:
        if not pyproject.is_file():
            return {}
        text = pyproject.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{pyproject}: cannot read [tool.model-compile]: {exc}") from None
    return _table_of(text, str(pyproject))


def _table_of(text: str, where: str) -> dict[str, Any]:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{where}: cannot read [tool.model-compile]: {exc}") from None
    table = data.get("tool", {}).get("model-compile", {})
    if not isinstance(table, dict):
        raise InputError(f"{where}: [tool.model-compile] must be a table")
    return table


def load_settings(repo_root: Path | None) -> Settings:
    """Settings of the repository at `repo_root` (defaults when it has none)."""
    if repo_root is None:
        return Settings()
    return _validate(_table(Path(repo_root)), str(Path(repo_root) / "pyproject.toml"))


def parse_settings(pyproject_text: str | None, where: str = "pyproject.toml") -> Settings:
    """Settings from the text of a pyproject.toml (e.g. read from a git revision); defaults when None."""
    if pyproject_text is None:
        return Settings()
    return _validate(_table_of(pyproject_text, where), where)


def _validate(table: dict[str, Any], pyproject: str) -> Settings:
    try:
        return Settings.model_validate(table)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "table"
        raise InputError(f"{pyproject}: [tool.model-compile] {where}: {first['msg']}") from None

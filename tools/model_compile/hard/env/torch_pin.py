"""The repository's torch pin against the torch a runtime check used.

Compile behaviour (graph breaks, recompiles, what inductor generates) changes
between torch releases, so a runtime result is only about the version it ran
on. Read statically from the repository's pyproject.toml: an exact pin
(`torch==2.8.0`) in `[project].dependencies`, its optional dependencies or
`[dependency-groups]`; a range says nothing this note could check.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

_PIN = re.compile(r"^\s*torch\s*==\s*([0-9][0-9A-Za-z.+]*)\s*(?:;|$)")


def torch_pin(repo_root: Path) -> tuple[str, str] | None:
    """(pinned version, where) of the first exact torch pin in the repository's pyproject.toml."""
    try:
        data = tomllib.loads((repo_root / "pyproject.toml").read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    project = data.get("project") if isinstance(data.get("project"), dict) else {}
    lists: list[tuple[str, object]] = [("[project].dependencies", project.get("dependencies"))]
    for group, items in sorted((project.get("optional-dependencies") or {}).items()):
        lists.append((f"[project.optional-dependencies].{group}", items))
    groups = data.get("dependency-groups") if isinstance(data.get("dependency-groups"), dict) else {}
    for group, items in sorted(groups.items()):
        lists.append((f"[dependency-groups].{group}", items))
    for where, items in lists:
        for item in items if isinstance(items, list) else []:
            if isinstance(item, str) and (m := _PIN.match(item)):
                return m.group(1), f"pyproject.toml {where}"
    return None


def _release(version: str) -> str:
    return version.split("+", 1)[0]  # 2.13.0+cu130 -> 2.13.0: the local build label is not the release


def version_note(repo_root: Path, used: str | None) -> str | None:
    """A gap line when the run used another torch release than the repository pins (None when they agree
    or either is unknown)."""
    pin = torch_pin(repo_root)
    if pin is None or not used or _release(used) == _release(pin[0]):
        return None
    return (
        f"torch {used} ran these checks, but the repository pins torch=={pin[0]} ({pin[1]}): graph breaks, "
        "recompiles and generated code differ between releases; rerun them with the pinned torch"
    )

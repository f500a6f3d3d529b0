"""A plain `pip install` (not editable) ships every package, template and skill file.

The package list is explicit in pyproject.toml because the templates and the
skill are mapped into the package from top-level folders; these tests keep the
list and the package-data patterns complete.
"""

from __future__ import annotations

import fnmatch
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
SETUPTOOLS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def test_every_code_package_is_listed():
    found = {
        ".".join(p.parent.relative_to(ROOT / "tools").parts)
        for p in (ROOT / "tools" / "model_compile").rglob("__init__.py")
        if "__pycache__" not in p.parts
    }
    assert found - set(SETUPTOOLS["packages"]) == set(), "add the new package to [tool.setuptools] packages"


def test_every_template_and_skill_file_is_package_data():
    for package, folder in SETUPTOOLS["package-dir"].items():
        if not package:
            continue
        patterns = SETUPTOOLS["package-data"][package]
        for path in (ROOT / folder).rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts:
                rel = path.relative_to(ROOT / folder).as_posix()
                assert any(fnmatch.fnmatch(rel, pat) and rel.count("/") == pat.count("/") for pat in patterns), (
                    f"{folder}/{rel} would not ship: extend package-data for {package}"
                )

"""The repository's pins against what its interpreter has: every package a run imported that the repository pins.

Pins are read statically, first found wins: `uv.lock` (`[[package]]` name and version: the exact resolution),
`requirements*.txt` and `requirements/*.txt` (`name==version`), `pyproject.toml` (`name==version` in
`[project].dependencies`, its optional dependencies, `[dependency-groups]`). A range pins nothing this can
check. Names compare normalised (PEP 503), versions by release (a local build label such as `+cpu` is not the
release). Pure Python: nothing of the repository is imported.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

_REQ = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*==\s*([0-9][0-9A-Za-z.+!-]*)\s*(?:;.*)?$")


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def release(version: str) -> str:
    return version.split("+", 1)[0]


def _uv_lock(path: Path) -> dict[str, str]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return {}
    out: dict[str, str] = {}
    for package in data.get("package") or []:
        if (
            isinstance(package, dict)
            and isinstance(package.get("name"), str)
            and isinstance(package.get("version"), str)
        ):
            source = package.get("source") or {}
            if isinstance(source, dict) and ("editable" in source or "virtual" in source):
                continue  # the repository itself, or a path dependency: no release to compare
            name = normalise(package["name"])
            # a lock may resolve a package twice (per platform or Python): each version is a pin
            out[name] = f"{out[name]} or {package['version']}" if name in out else package["version"]
    return out


def _requirements(path: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return {}
    for line in lines:
        m = _REQ.match(line.split(" #", 1)[0])
        if m:
            out[normalise(m.group(1))] = m.group(2)
    return out


def _pyproject(path: Path) -> dict[str, str]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return {}
    project = data.get("project") if isinstance(data.get("project"), dict) else {}
    lists: list[object] = [project.get("dependencies")]
    lists += list((project.get("optional-dependencies") or {}).values())
    groups = data.get("dependency-groups") if isinstance(data.get("dependency-groups"), dict) else {}
    lists += list(groups.values())
    out: dict[str, str] = {}
    for items in lists:
        for item in items if isinstance(items, list) else []:
            if isinstance(item, str) and (m := _REQ.match(item)):
                out.setdefault(normalise(m.group(1)), m.group(2))
    return out


def pins(repo_root: Path) -> dict[str, tuple[str, str]]:
    """{normalised name: (version, the file that pins it)}; a name's first pin wins (uv.lock, requirements, pyproject)."""
    found: dict[str, tuple[str, str]] = {}
    sources: list[tuple[Path, object]] = [(repo_root / "uv.lock", _uv_lock)]
    reqs = sorted(repo_root.glob("requirements*.txt")) + sorted((repo_root / "requirements").glob("*.txt"))
    sources += [(p, _requirements) for p in reqs]
    sources.append((repo_root / "pyproject.toml", _pyproject))
    for path, reader in sources:
        if not path.is_file():
            continue
        for name, version in reader(path).items():  # type: ignore[operator]
            found.setdefault(
                name, (version, path.name if path.parent == repo_root else str(path.relative_to(repo_root)))
            )
    return found


def drift(repo_root: Path, installed: dict[str, str]) -> list[dict[str, str]]:
    """Each imported distribution whose release differs from the repository's pin: {package, installed, pinned, where}."""
    pinned = pins(repo_root)
    out = []
    for dist, version in sorted(installed.items(), key=lambda kv: normalise(kv[0])):
        pin = pinned.get(normalise(dist))
        if pin and release(version) not in {release(v) for v in pin[0].split(" or ")}:
            out.append({"package": dist, "installed": version, "pinned": pin[0], "where": pin[1]})
    return out


# what a compile rehearsal's figures depend on most, listed first
FIRST = ("torch", "transformers", "tokenizers", "accelerate", "safetensors", "huggingface-hub", "torchvision", "triton")


def ordered(items: list[dict[str, str]]) -> list[dict[str, str]]:
    rank = {name: i for i, name in enumerate(FIRST)}
    return sorted(items, key=lambda it: (rank.get(normalise(it["package"]), len(FIRST)), normalise(it["package"])))


def line(item: dict[str, str]) -> str:
    return f"{item['package']} {item['installed']} here, {item['where']} pins {item['pinned']}"

"""Install the model-compile skill tree (SKILL.md + references/) into a repository.

Idempotent: a manifest (`.model-compile-skill.json`, file -> sha256 of what
was installed) sits next to SKILL.md. A file that differs both from the
new version and from what was installed is a local edit (or a file this tool
never wrote): it is not overwritten without `force`, and then nothing at all
is written. Files in the destination the skill does not ship are left alone.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from model_compile import __version__
from model_compile.errors import InputError

SKILL = "model-compile"
MANIFEST = ".model-compile-skill.json"


def skill_source() -> Path:
    """The skill tree shipped with the package (model_compile._skill), else the checkout's skills/model-compile."""
    try:
        import model_compile._skill as pkg  # type: ignore[import-not-found]

        paths = list(getattr(pkg, "__path__", []))
        if paths and (Path(paths[0]) / "SKILL.md").is_file():
            return Path(paths[0])
    except ImportError:
        pass
    path = Path(__file__).resolve().parents[2] / "skills" / SKILL
    if not (path / "SKILL.md").is_file():
        raise InputError(f"the skill tree is not where it should be ({path})")
    return path


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def source_files(source: Path) -> dict[str, bytes]:
    """rel path -> bytes of every shipped skill file (no caches, no manifest)."""
    out: dict[str, bytes] = {}
    for path in sorted(source.rglob("*")):
        rel = path.relative_to(source).as_posix()
        if path.is_file() and "__pycache__" not in rel and path.name not in (MANIFEST, "__init__.py"):
            out[rel] = path.read_bytes()
    return out


def default_dest(repo: Path) -> Path:
    """Next to the repository's other skills: an existing model-compile skill, else skills/[<group>/]model-compile."""
    skills = repo / "skills"
    if not skills.is_dir():
        return skills / SKILL
    existing = sorted(p.parent for p in skills.rglob("SKILL.md") if p.parent.name == SKILL)
    if existing:
        return existing[0]
    flat = [p for p in skills.glob("*/SKILL.md")]
    grouped = sorted({p.parent.parent for p in skills.glob("*/*/SKILL.md")})
    if flat or not grouped:
        return skills / SKILL
    names = {g.name: g for g in grouped}
    if "model" in names:
        return names["model"] / SKILL
    if len(grouped) == 1:
        return grouped[0] / SKILL
    raise InputError(f"{skills} groups its skills ({', '.join(sorted(names))}): pass --dest skills/<group>/{SKILL}")


@dataclass
class InstallResult:
    dest: Path
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    overwritten: list[str] = field(default_factory=list)  # local edits replaced with --force
    kept: list[str] = field(default_factory=list)  # files in dest the skill does not ship


def _read_manifest(dest: Path) -> dict[str, str]:
    try:
        data = json.loads((dest / MANIFEST).read_text(encoding="utf-8"))
        files = data.get("files", {})
        return {str(k): str(v) for k, v in files.items()} if isinstance(files, dict) else {}
    except (OSError, ValueError, AttributeError):
        return {}


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def install(repo: Path, dest: Path | None = None, force: bool = False, source: Path | None = None) -> InstallResult:
    """Copy the skill tree into `repo` (at `dest`, relative to repo when relative); see the module docstring."""
    repo = Path(repo)
    if not repo.is_dir():
        raise InputError(f"{repo}: not a directory")
    if dest is None:
        target = default_dest(repo)
    else:
        target = dest if dest.is_absolute() else repo / dest
    if target.exists() and not target.is_dir():
        raise InputError(f"{target}: exists and is not a directory")
    files = source_files(source or skill_source())
    installed = _read_manifest(target)
    result = InstallResult(dest=target)
    conflicts: list[str] = []
    writes: dict[str, bytes] = {}
    for rel, data in files.items():
        path = target / rel
        if not path.is_file():
            result.created.append(rel)
            writes[rel] = data
            continue
        current = _sha(path.read_bytes())
        if current == _sha(data):
            result.unchanged.append(rel)
        elif installed.get(rel) == current:
            result.updated.append(rel)
            writes[rel] = data
        else:
            conflicts.append(rel)
    if conflicts and not force:
        many = len(conflicts) > 1
        why = (
            f"differ{'' if many else 's'} from what install-skill wrote"
            if installed
            else f"{'were' if many else 'was'} not written by install-skill"
        )
        raise InputError(
            f"{target}: {', '.join(conflicts)} {why} (local edits?): nothing written; pass --force to overwrite them"
        )
    for rel in conflicts:
        result.overwritten.append(rel)
        writes[rel] = files[rel]
    if target.is_dir():
        result.kept = sorted(
            p.relative_to(target).as_posix()
            for p in target.rglob("*")
            if p.is_file() and p.name != MANIFEST and p.relative_to(target).as_posix() not in files
        )
    for rel, data in writes.items():
        _atomic_write(target / rel, data)
    manifest = {"tool": "model-compile", "version": __version__, "files": {rel: _sha(d) for rel, d in files.items()}}
    text = json.dumps(manifest, indent=2, sort_keys=True) + "\n"
    if not (target / MANIFEST).is_file() or (target / MANIFEST).read_text(encoding="utf-8") != text:
        _atomic_write(target / MANIFEST, text.encode())
    return result

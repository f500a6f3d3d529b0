"""What raised, for the parent to say whose failure it is: the frames of an exception, each told by where its file
lies (model-compile's own code, the repository's, a library, Python's own), and the library the innermost frame
is in (its distribution, version and where it is installed from). Read in the child, where the exception and the
installed distributions are; the parent (`hard/rehearsal/reading/attribution.py`) decides the owner.
"""

from __future__ import annotations

import json
import os
import sys
import sysconfig
import traceback
from pathlib import Path
from typing import Any

TOOL_DIR = str(Path(__file__).resolve().parents[2])  # the model_compile package


def _kind(path: str, repo: str | None) -> str:
    if not path or path.startswith("<"):
        return "python"
    resolved = str(Path(path).resolve())
    if resolved.startswith(TOOL_DIR + os.sep):
        return "tool"
    if "site-packages" in resolved or "dist-packages" in resolved:
        return "library"
    if repo and resolved.startswith(repo + os.sep):
        return "repo"
    stdlib = sysconfig.get_paths().get("stdlib") or ""
    if stdlib and resolved.startswith(str(Path(stdlib).resolve()) + os.sep):
        return "python"
    return "library"  # installed from a folder outside the repository (an editable sibling library)


def _package(path: str) -> str:
    """The top-level package a file belongs to (the outermost folder with an `__init__.py` above it)."""
    folder = Path(path).resolve().parent
    top = Path(path).stem
    while (folder / "__init__.py").is_file():
        top = folder.name
        folder = folder.parent
    return top


def _where(frame: Any, repo: str | None) -> str:
    path = str(frame.filename)
    if repo and path.startswith(repo + os.sep):
        path = path[len(repo) + 1 :]
    elif "site-packages/" in path:
        path = "<site-packages>/" + path.split("site-packages/", 1)[1]
    return f"{path}:{frame.lineno} in {frame.name}"


def distribution(package: str) -> dict[str, Any]:
    """{"name", "version", "source", "editable"} of the installed distribution that provides `package`."""
    from importlib import metadata

    try:
        names = list(metadata.packages_distributions().get(package) or [])
    except Exception:  # noqa: BLE001 - an environment whose metadata cannot be read says nothing here
        names = []
    names += [package, package.replace("_", "-")]  # an editable install lists no packages: its own name
    for name in names:
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        out: dict[str, Any] = {"name": dist.metadata["Name"] or name, "version": dist.version}
        try:
            direct = json.loads(dist.read_text("direct_url.json") or "{}")
        except ValueError:
            direct = {}
        url = str(direct.get("url") or "")
        if url:
            out["source"] = url.removeprefix("file://")
            out["editable"] = bool((direct.get("dir_info") or {}).get("editable"))
            commit = (direct.get("vcs_info") or {}).get("commit_id")
            if commit:
                out["commit"] = commit
        return out
    return {}


def raised_in(exc: BaseException, repo: str | None) -> dict[str, Any]:
    """{"exception", "innermost": {"where", "kind", "package"}, "repo", "tool", "library", "names_tool"}: the
    innermost frame of the exception, the innermost of the repository's and of model-compile's, the library the
    innermost frame is in (with its distribution), and whether the message names model-compile's code."""
    frames = traceback.extract_tb(exc.__traceback__)
    out: dict[str, Any] = {
        "exception": type(exc).__name__,
        "exception_module": type(exc).__module__,
        "names_tool": "model_compile" in str(exc),
    }
    if not frames:
        return out
    last = frames[-1]
    kind = _kind(str(last.filename), repo)
    out["innermost"] = {"where": _where(last, repo), "kind": kind, "package": _package(str(last.filename))}
    for frame in reversed(frames):
        k = _kind(str(frame.filename), repo)
        if k == "repo" and "repo" not in out:
            out["repo"] = _where(frame, repo)
        if k == "tool" and "tool" not in out:
            out["tool"] = _where(frame, repo)
    if kind == "library":
        package = out["innermost"]["package"]
        out["library"] = {"package": package, **distribution(package)}
    obj = getattr(exc, "obj", None) if isinstance(exc, AttributeError) else None
    module = sys.modules.get(type(obj).__module__) if obj is not None else None
    if module is not None and getattr(module, "__file__", None):
        # whose object lacked the attribute: the repository's own (its code and its engine disagree), a library's
        out["attribute_of"] = {"class": type(obj).__name__, "kind": _kind(str(module.__file__), repo)}
    if isinstance(exc, ImportError) and not isinstance(exc, ModuleNotFoundError) and exc.name:
        # `cannot import name X from Y`: the repository asks a library for what its installed revision lacks
        top = exc.name.split(".")[0]
        if repo is None or not (Path(repo) / top).exists():
            out["import_from"] = {"module": exc.name, "package": top, **distribution(top)}
    return out

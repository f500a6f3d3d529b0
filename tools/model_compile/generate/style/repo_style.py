"""The target repository's Python formatting conventions, read statically.

Sources, later ones winning (pre-commit passes its args on the command line,
so they override the config files): `[tool.black]`, `[tool.isort]`,
`[tool.ruff]` / `[tool.ruff.format]` in pyproject.toml (or ruff.toml /
.ruff.toml), then the args of the `ruff-format`, `black` and `isort` hooks in
.pre-commit-config.yaml. Nothing is imported or run here.
"""

from __future__ import annotations

import re
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

DEFAULT_LINE_LENGTH = 88  # black's and ruff's default
FORMATTER_HOOKS = {"ruff-format": "ruff", "ruff_format": "ruff", "black": "black"}


@dataclass
class RepoStyle:
    """How the repository formats Python, and which tools it uses for that."""

    line_length: int = DEFAULT_LINE_LENGTH
    quote: str = "double"  # "double" or "single"
    formatter: str | None = None  # "ruff" or "black": what the repo formats with
    isort: bool = False  # the repo sorts imports with isort
    isort_profile: str | None = None
    sources: list[str] = field(default_factory=list)  # where each setting came from

    @property
    def settings(self) -> str:
        """Line length, quotes and isort profile, in words."""
        profile = f", isort profile {self.isort_profile}" if self.isort_profile else ""
        return f"line length {self.line_length}, {self.quote} quotes{profile}"

    @property
    def described(self) -> str:
        """One line for the output: the settings and where they came from."""
        tools = [t for t in (self.formatter, "isort" if self.isort else None) if t]
        used = f"{' + '.join(tools)}, " if tools else ""
        profile = f", isort profile {self.isort_profile}" if self.isort_profile else ""
        origin = f" (from {', '.join(dict.fromkeys(self.sources))})" if self.sources else " (defaults)"
        return f"{used}line length {self.line_length}, {self.quote} quotes{profile}{origin}"


def _toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return {}


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _from_pyproject(root: Path, style: RepoStyle) -> None:
    tool = _toml(root / "pyproject.toml").get("tool", {})
    if not isinstance(tool, dict):
        return
    black = tool.get("black")
    if isinstance(black, dict):
        style.formatter = "black"
        style.sources.append("[tool.black]")
        style.line_length = _int(black.get("line-length")) or style.line_length
    ruff = tool.get("ruff")
    ruff_file = next((p for p in (root / "ruff.toml", root / ".ruff.toml") if p.is_file()), None)
    if ruff_file is not None:
        ruff, label = _toml(ruff_file), ruff_file.name
    else:
        label = "[tool.ruff]"
    if isinstance(ruff, dict):
        style.formatter = "ruff" if ("format" in ruff or style.formatter is None) else style.formatter
        style.sources.append(label)
        style.line_length = _int(ruff.get("line-length")) or style.line_length
        fmt = ruff.get("format")
        if isinstance(fmt, dict) and fmt.get("quote-style") in ("single", "double"):
            style.quote = fmt["quote-style"]
    isort = tool.get("isort")
    if isinstance(isort, dict):
        style.isort = True
        style.sources.append("[tool.isort]")
        if isinstance(isort.get("profile"), str):
            style.isort_profile = isort["profile"]


def _args(hook: dict[str, Any]) -> list[str]:
    raw = hook.get("args") or []
    if isinstance(raw, str):
        return shlex.split(raw)
    return [str(a) for a in raw] if isinstance(raw, list) else []


def _option(args: list[str], *names: str) -> str | None:
    """The value of `--name=V`, `--name V` or `-l V` in a hook's args."""
    for i, arg in enumerate(args):
        for name in names:
            if arg == name and i + 1 < len(args):
                return args[i + 1]
            if name.startswith("--") and arg.startswith(name + "="):
                return arg.split("=", 1)[1]
    return None


def _from_pre_commit(root: Path, style: RepoStyle) -> None:
    path = root / ".pre-commit-config.yaml"
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) if path.is_file() else None
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return
    repos = data.get("repos") if isinstance(data, dict) else None
    for repo in repos if isinstance(repos, list) else []:
        hooks = repo.get("hooks") if isinstance(repo, dict) else None
        for hook in hooks if isinstance(hooks, list) else []:
            if not isinstance(hook, dict):
                continue
            hook_id, args = str(hook.get("id", "")), _args(hook)
            if hook_id in FORMATTER_HOOKS:
                style.formatter = FORMATTER_HOOKS[hook_id]
                style.sources.append(f".pre-commit-config.yaml {hook_id}")
                length = _option(args, "--line-length", "-l")
                if length and length.isdigit():
                    style.line_length = int(length)
                quote = _option(args, "--config")
                if quote and re.search(r"quote-style\s*=\s*['\"]single", quote):
                    style.quote = "single"
            elif hook_id == "isort":
                style.isort = True
                style.sources.append(".pre-commit-config.yaml isort")
                profile = _option(args, "--profile")
                if profile:
                    style.isort_profile = profile


def read_style(root: Path) -> RepoStyle:
    """The repository's formatting conventions (defaults where it states none)."""
    style = RepoStyle()
    _from_pyproject(root, style)
    _from_pre_commit(root, style)
    return style


def isort_args(style: RepoStyle) -> list[str]:
    """Command-line settings that make isort agree with the repository's hooks."""
    args = []
    if style.isort_profile:
        args += ["--profile", style.isort_profile]
    args += ["--line-length", str(style.line_length)]
    return args

"""Run the repository's own formatter over the Python files a plan touches.

The tools the repository configures (see `repo_style`) are looked up in its
`.venv/bin` (or `venv/bin`), then on PATH, and run as subprocesses on the
in-memory text through stdin: nothing is written, nothing of the target is
imported. A file that was not clean under the formatter before the edit is
left as rendered (reformatting it would touch lines the edit did not), and
when no formatter is installed the templates already render to the repo's
line length and quote style.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from model_compile.generate.style.repo_style import RepoStyle, isort_args

TIMEOUT_S = 30


class FormatError(Exception):
    """The formatter refused the text or could not run."""


def find_tool(name: str, root: Path) -> str | None:
    """The repository's own install of a tool first, then PATH."""
    for env in (".venv", "venv"):
        candidate = root / env / "bin" / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return shutil.which(name)


@dataclass
class Formatter:
    """The commands that format one Python file's text the way the repository does."""

    root: Path
    style: RepoStyle
    commands: list[tuple[str, list[str]]] = field(default_factory=list)  # (tool, argv before the file name)
    missing: list[str] = field(default_factory=list)

    @classmethod
    def for_repo(cls, root: Path, style: RepoStyle) -> Formatter:
        """Find the configured tools; the ones not installed are listed in `missing`."""
        fmt = cls(root, style)
        length = str(style.line_length)
        if style.formatter is not None:
            exe = find_tool(style.formatter, root)
            if exe is None:
                fmt.missing.append(style.formatter)
            elif style.formatter == "ruff":
                fmt.commands.append(("ruff format", [exe, "format", "--line-length", length, "--stdin-filename"]))
            else:
                fmt.commands.append(("black", [exe, "-q", "--line-length", length, "--stdin-filename"]))
        if style.isort:
            exe = find_tool("isort", root)
            if exe is None:
                fmt.missing.append("isort")
            else:
                settings = ["--settings-path", str(root)] if (root / "pyproject.toml").is_file() else []
                fmt.commands.append(("isort", [exe, *settings, *isort_args(style), "--filename"]))
        return fmt

    @property
    def tools(self) -> list[str]:
        return [name for name, _ in self.commands]

    def format(self, text: str, path: Path) -> str:
        """`text` as the repository's tools print it (raises FormatError)."""
        for name, argv in self.commands:
            try:
                done = subprocess.run(
                    [*argv, str(path), "-"],
                    input=text,
                    capture_output=True,
                    text=True,
                    cwd=self.root,
                    timeout=TIMEOUT_S,
                    check=False,
                )
            except (OSError, subprocess.TimeoutExpired) as exc:
                raise FormatError(f"{name}: {exc}") from exc
            if done.returncode != 0:
                first = (done.stderr.strip().splitlines() or ["failed"])[0]
                raise FormatError(f"{name}: {first}")
            text = done.stdout
        return text


def format_changes(
    fmt: Formatter, changes: list[tuple[Path, str, str | None, str]]
) -> tuple[dict[Path, str], list[str]]:
    """Formatted text for each changed Python file, and notes on what was (not) formatted.

    `changes`: (path, shown path, old text or None, new text). A new file is
    formatted whole; an existing one only when its old text was already clean.
    """
    out: dict[Path, str] = {}
    notes: list[str] = []
    if not fmt.commands:
        if fmt.missing:
            notes.append(
                f"{', '.join(fmt.missing)} not installed (repo .venv/bin, PATH): generated code rendered to "
                f"{fmt.style.described} without running it"
            )
        return out, notes
    formatted, unclean = [], []
    for path, rel, old, new in changes:
        try:
            if old is not None and fmt.format(old, path) != old:
                unclean.append(rel)
                continue
            out[path] = fmt.format(new, path)
            formatted.append(rel)
        except FormatError as exc:
            notes.append(f"{rel}: not formatted ({exc}); left as rendered")
    if formatted:
        notes.append(f"formatted with {' + '.join(fmt.tools)} ({fmt.style.settings}): {', '.join(formatted)}")
    if unclean:
        notes.append(
            f"not reformatted (not clean under {' + '.join(fmt.tools)} before this edit; only the rendered "
            f"lines follow the repo's style): {', '.join(unclean)}"
        )
    return out, notes

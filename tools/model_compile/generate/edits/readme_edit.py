"""Create or replace the recipe README's "Compile" section (and nothing else)."""

from __future__ import annotations

import re
from collections.abc import Callable

HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
FENCE = re.compile(r"^\s*(```|~~~)")


def _headings(lines: list[str]) -> list[tuple[int, int, str]]:
    """(index, level, title) of every Markdown heading outside code fences."""
    out, fenced = [], False
    for i, line in enumerate(lines):
        if FENCE.match(line):
            fenced = not fenced
            continue
        m = None if fenced else HEADING.match(line.rstrip("\n"))
        if m:
            out.append((i, len(m.group(1)), m.group(2)))
    return out


def section_level(text: str) -> int:
    """Level for the Compile section: that of the README's second-level sections (## by default)."""
    levels = [lvl for _, lvl, _ in _headings(text.splitlines(keepends=True))]
    return 2 if not levels else max(2, min(levels) + 1) if levels.count(min(levels)) == 1 else min(levels)


def edit_readme(text: str, render_section: Callable[[str], str]) -> tuple[str, str]:
    """render_section(hashes) -> section text ending in newline. Returns (new text, note)."""
    lines = text.splitlines(keepends=True)
    heads = _headings(lines)
    for n, (i, level, title) in enumerate(heads):
        if re.search(r"\bcompile\b", title, re.I):
            end = len(lines)
            for j, lvl, _ in heads[n + 1 :]:
                if lvl <= level:
                    end = j
                    break
            section = render_section("#" * level)
            if end < len(lines) and not section.endswith("\n\n"):
                section += "\n"
            return "".join(lines[:i]) + section + "".join(lines[end:]), "README: replaced the Compile section"
    section = render_section("#" * section_level(text))
    if not text:
        return section, "README: created with a Compile section"
    sep = "" if text.endswith("\n\n") else ("\n" if text.endswith("\n") else "\n\n")
    return text + sep + section, "README: appended a Compile section"

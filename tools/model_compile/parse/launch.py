"""How a repository wants its text written, read from its own files (static).

* the line length its formatters enforce (`[tool.ruff]`, `[tool.black]`,
  `.pre-commit-config.yaml` hook args, `[flake8]`), so a generated comment
  fits it;
* how it launches a run (a command in its READMEs) and how that launcher takes
  config overrides (Hydra/OmegaConf `key=value` arguments, or a flag);
* which options its recipe tests register (`parser.addoption(...)` in a
  `conftest.py`), so a printed pytest command uses only those.

Every function takes text; nothing is imported or run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_FENCE = re.compile(r"^\s*(```|~~~)\s*([\w+-]*)")
# A dotted `key=value` argument (Hydra / OmegaConf dotlist), not a `--flag=value`.
_DOTLIST = re.compile(r"^\+{0,2}[A-Za-z_][\w-]*(?:\.[A-Za-z_][\w-]*)+=\S*$")
_LAUNCH_WORDS = re.compile(r"\b(torchrun|accelerate launch|deepspeed|python3?\s+(-m\s+)?\S*(launch|train)\S*)")


def shell_commands(markdown: str) -> list[str]:
    """Commands in the Markdown's shell code blocks, `\\`-continued lines joined, `$ ` prompts dropped."""
    out: list[str] = []
    fenced, lang, pending = False, "", ""
    for raw in markdown.splitlines():
        m = _FENCE.match(raw)
        if m:
            fenced, lang, pending = (not fenced), m.group(2).lower(), ""
            continue
        if not fenced or lang not in ("", "bash", "sh", "shell", "console", "zsh"):
            continue
        line = raw.strip()
        if line.startswith("$ "):
            line = line[2:]
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1].strip() + " "
            continue
        out.append(" ".join((pending + line).split()))
        pending = ""
    return out


@dataclass(frozen=True)
class Launch:
    """How a run is started, and how its config is overridden."""

    command: str = ""
    style: str = "dotlist"  # "dotlist": `key=value` arguments; "flag": `<flag> key=value`
    flag: str = ""
    source: str = ""

    def with_override(self, override: str) -> str:
        """The launch command with one override appended in the launcher's own syntax."""
        extra = f"{self.flag} {override}" if self.style == "flag" and self.flag else override
        return f"{self.command} {extra}".strip()


def _strip_overrides(command: str) -> tuple[str, str, str]:
    """(command without overrides, style, flag) for one launch command."""
    tokens = command.split()
    kept: list[str] = []
    style, flag = "", ""
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        nxt = tokens[i + 1] if i + 1 < len(tokens) else ""
        is_flag = tok.startswith("-") and "=" not in tok and ("override" in tok or tok in ("--cfg-options", "--set"))
        if is_flag and _DOTLIST.match(nxt):
            style, flag = "flag", tok
            i += 2
            continue
        if _DOTLIST.match(tok):
            style = style or "dotlist"
            i += 1
            continue
        kept.append(tok)
        i += 1
    return " ".join(kept), style, flag


def find_launch(readmes: list[tuple[str, str]], recipe: str, own: str | None = None) -> Launch | None:
    """The launch command for `recipe` in the READMEs ((source, text)).

    A command counts when it starts a run (torchrun, a `launch`/`train` module,
    accelerate, deepspeed) and either names the recipe's folder or sits in the
    recipe's own README (`own`: its source, None when the recipe has none; another
    README's command for another recipe never counts). The override syntax comes
    from the first launch command anywhere that carries an override; `dotlist`
    when none does.
    """
    launches = [
        (source, cmd)
        for source, text in readmes
        for cmd in shell_commands(text)
        if "pytest" not in cmd and _LAUNCH_WORDS.search(cmd)
    ]
    mine = [(s, c) for s, c in launches if f"recipes/{recipe}/" in c] or [
        (s, c) for s, c in launches if own is not None and s == own
    ]
    if not mine:
        return None
    style, flag = "", ""
    for _, cmd in mine + launches:
        _, style, flag = _strip_overrides(cmd)
        if style:
            break
    bare = _strip_overrides(mine[0][1])[0]
    return Launch(command=bare, style=style or "dotlist", flag=flag, source=mine[0][0])


def launcher_takes_dotlist(source: str) -> bool:
    """A launcher script that hands its extra arguments to Hydra or OmegaConf (`key=value`)."""
    return bool(re.search(r"\bhydra\b|OmegaConf\.from_(cli|dotlist)|parse_known_args", source))

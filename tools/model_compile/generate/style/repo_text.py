"""Generated text that fits the target repository.

Reads (statically) the repo's line length (generate/style/repo_style.py), its launch command and its recipe
tests' pytest options (parse/launch.py, parse/recipe_test_options.py), and turns them into what the
templates print: a `--reason` wrapped over comment lines within the line
length, the command that launches a run with compile on in the launcher's own
override syntax, and the recipe-test command with only the options its
`conftest.py` registers.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

from model_compile.generate.planning.locate import RecipeFiles
from model_compile.generate.style.repo_style import read_style
from model_compile.parse import recipe_test_options
from model_compile.parse.launch import Launch, find_launch, launcher_takes_dotlist

COMPILE_ON = "model.compile.enabled=true"


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


@dataclass
class RepoText:
    """What the repository's own files say about how text is written and runs are started."""

    line_length: int
    launch: Launch | None = None
    test_options: recipe_test_options.Conventions = field(default_factory=recipe_test_options.Conventions)
    has_smoke_test: bool = False


def read_repo_text(files: RecipeFiles) -> RepoText:
    """Line length, launch command and test options of the recipe's repository."""
    root = files.root
    length = read_style(root).line_length  # the formatter settings generate renders to
    readmes = [(files.rel(p), t) for p in (files.readme, root / "README.md") if (t := _read(p)) is not None]
    own = files.rel(files.readme) if files.readme.is_file() else None
    launch = find_launch(readmes, files.recipe.name, own)
    if launch is not None and launch.style == "dotlist" and not _launch_shows_overrides(readmes):
        # No README shows an override: trust the launcher itself only if it hands extra args to Hydra/OmegaConf.
        module = re.search(r"-m\s+([\w.]+)", launch.command)
        source = _read(root / (module.group(1).replace(".", "/") + ".py")) if module else None
        if source is not None and not launcher_takes_dotlist(source):
            launch = None
    return RepoText(
        line_length=length,
        launch=launch,
        test_options=recipe_test_options.read(files.recipe, root),
        has_smoke_test=(files.recipe / "tests" / "test_smoke.py").is_file(),
    )


def _launch_shows_overrides(readmes: list[tuple[str, str]]) -> bool:
    return any(re.search(r"\s[A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)+=\S", text) for _, text in readmes)


def body_indent(engine_text: str) -> int:
    """Columns of the statements inside `prepare_model()`: its `def` indent plus four (8 for a method)."""
    m = re.search(r"^([ \t]*)(?:async\s+)?def\s+prepare_model\s*\(", engine_text, re.M)
    return len(m.group(1).expandtabs(4)) + 4 if m else 8


def wrap_reason(reason: str, kind: str, indent: int, width: int) -> list[str]:
    """The reason split so `# model-compile: <kind> - <first>` and `# <rest>` lines fit `width` at `indent`."""
    head = f"# model-compile: {kind} - "
    first_room = max(20, width - indent - len(head))
    rest_room = max(20, width - indent - 2)
    words = reason.split()
    lines: list[str] = []
    current = ""
    for word in words:
        room = first_room if not lines else rest_room
        if current and len(current) + 1 + len(word) > room:
            lines.append(current)
            current = word
        else:
            current = f"{current} {word}".strip()
    if current or not lines:
        lines.append(current)
    return lines


def smoke_command(recipe: str, conv: recipe_test_options.Conventions, options: list[str]) -> str:
    """The recipe's smoke test as pytest runs it: its opt-in switch, then `options`."""
    return " ".join([f"python -m pytest {recipe}/tests/test_smoke.py -q", *conv.opt_in_flags("smoke"), *options])


def run_commands(
    files: RecipeFiles, text: RepoText, stage: str, smoke_options: list[str] | None = None
) -> dict[str, str]:
    """The commands a README or a note prints: `launch`, `tests`, `stage_file`, and what the tests lack.

    `stage`: the stage they run (the launch command's config file of this recipe is pointed at it);
    `smoke_options`: what the smoke test needs for that stage (`--config-name`, `--world-size`)."""
    recipe = files.rel(files.recipe)
    out = {"launch": "", "tests": "", "stage_file": f"{recipe}/configs/{stage}.yaml", "tests_note": ""}
    if text.launch is not None:
        out["launch"] = own_launch(text.launch.with_override(COMPILE_ON), recipe, stage)
    if text.has_smoke_test:
        conv = text.test_options
        cmd = smoke_command(recipe, conv, smoke_options or [])
        if conv.registers(recipe_test_options.CONFIG_OVERRIDE):
            out["tests"] = f"{cmd} --config-override {COMPILE_ON}"
        else:
            out["tests"] = cmd
            out["tests_note"] = (
                f"{recipe}/tests/conftest.py registers no --config-override, so the smoke test cannot switch "
                "compile on from the command line (never by setting `enabled: true` in a stage file to test): add a "
                "repeatable `--config-override` option there and apply its values to the config in "
                f"tests/test_smoke.py, or try compile with `model-compile rehearse {recipe}` (eager vs compiled on a "
                "tiny model of the recipe's architecture)"
            )
    return out


_CONFIG_PATH = re.compile(r"((?:\./)?)((?:[\w.-]+/)*recipes/[\w.-]+)/configs/[\w./-]+?\.ya?ml\b")


def own_launch(command: str, recipe: str, stage: str) -> str:
    """The launch command pointed at this recipe's stage file: the one config path it passes (its own, or another
    recipe's in a README copied from it) becomes `<recipe>/configs/<stage>.yaml`. "" when the command still
    names another recipe, or passes several config files: no command is better than one for another recipe."""
    paths = _CONFIG_PATH.findall(command)
    if len(paths) == 1:
        command = _CONFIG_PATH.sub(lambda m: f"{m.group(1)}{recipe}/configs/{stage}.yaml", command)
    others = {m for m in re.findall(r"recipes/[\w.-]+", command) if not (recipe == m or recipe.endswith("/" + m))}
    return "" if others or len(paths) > 1 else command


def wrap_note(text: str, width: int) -> str:
    """Markdown prose wrapped at `width` (README lines stay within the repo's style)."""
    return "\n".join(textwrap.wrap(text, width=width, break_long_words=False, break_on_hyphens=False))

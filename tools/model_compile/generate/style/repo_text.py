"""Generated text that fits the target repository.

Reads (statically) the repo's line length (generate/style/repo_style.py), its launch command and its recipe
tests' pytest options (parse/launch.py, parse/recipe_test_options.py), and turns them into what the
templates print: a `--reason` wrapped over comment lines within the line
length, the command that launches a run with compile on in the launcher's own
override syntax, and the recipe-test command with only the options its
`conftest.py` registers.
"""

from __future__ import annotations

import ast
import re
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

from model_compile.generate.planning.locate import RecipeFiles
from model_compile.generate.style.repo_style import read_style
from model_compile.parse import recipe_test_options
from model_compile.parse.launch import Launch, find_launch, launcher_takes_dotlist
from model_compile.parse.models import ConfigForm, StageFacts, config_key
from model_compile.rules.recipe_tests import CompileOverride, compile_overrides, rejected

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
    # the compile overrides the recipe's own tests apply (rules/recipe_tests.py), and the schema's form they meet
    test_overrides: list[CompileOverride] = field(default_factory=list)
    schema_form: ConfigForm | None = None
    written: dict[str, str] = field(default_factory=dict)  # the backend and mode generate writes where a stage has none

    @property
    def switch_on(self) -> str:
        """The dotlist that turns compile on in this recipe's form: `model.compile.enabled=true`, or
        `model.compile=true` in the older flat form."""
        return f"{config_key(self.schema_form, 'enabled')}=true"

    @property
    def rejected(self) -> list[CompileOverride]:
        """The tests' compile overrides the schema rejects (MC211): a run needs a command-line override after them."""
        return [o for o in self.test_overrides if rejected(o, self.schema_form)]

    @property
    def forces_off(self) -> bool:
        """The recipe's tests turn compile off (or break its section) whatever the stage YAML says."""
        return bool(self.rejected) or any(o.enables is False for o in self.test_overrides)

    def compile_on(self, facts: StageFacts | None) -> list[str]:
        """The dotlist overrides a smoke run of the stage with compile on needs: the switch, and where the tests
        replace the section wholesale (MC211), the stage's own backend and mode (else the schema's defaults)."""
        out = [self.switch_on]
        if self.rejected and self.schema_form == "section":
            for key in ("backend", "mode"):
                known, value = facts.static_value(key) if facts is not None else (False, None)
                value = value if known and isinstance(value, str) else self.written.get(key)
                if value:
                    out.append(f"model.compile.{key}={value}")
        return out


def _test_overrides(files: RecipeFiles) -> list[CompileOverride]:
    out: list[CompileOverride] = []
    for path in sorted((files.recipe / "tests").rglob("*.py")) if (files.recipe / "tests").is_dir() else []:
        text = _read(path)
        if text and "compile" in text:
            try:
                tree = ast.parse(text)
            except (SyntaxError, ValueError):
                continue
            out += compile_overrides(files.rel(path), tree)
    return out


def read_repo_text(files: RecipeFiles, schema_form: ConfigForm | None = None) -> RepoText:
    """Line length, launch command and test options of the recipe's repository; `schema_form`: the form of the
    recipe schema's compile config (the tests' compile overrides are judged against it)."""
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
        test_overrides=_test_overrides(files),
        schema_form=schema_form,
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
    files: RecipeFiles,
    text: RepoText,
    stage: str,
    smoke_options: list[str] | None = None,
    facts: StageFacts | None = None,
    ranks: tuple[int, int] | None = None,
) -> dict[str, str]:
    """The commands a README or a note prints: `launch`, `tests`, `stage_file`, and what the tests lack.

    `stage`: the stage they run (the launch command's config file of this recipe is pointed at it);
    `smoke_options`: what the smoke test needs for that stage (`--config-name`, `--world-size`); `facts`: the
    stage's compile values (the overrides a smoke run needs); `ranks`: the least world size its mesh runs on and
    the product of its fixed dimensions (`with_ranks`)."""
    recipe = files.rel(files.recipe)
    out = {"launch": "", "tests": "", "stage_file": f"{recipe}/configs/{stage}.yaml", "tests_note": ""}
    if text.launch is not None:
        out["launch"] = with_ranks(own_launch(text.launch.with_override(text.switch_on), recipe, stage), ranks)
    if text.has_smoke_test:
        conv = text.test_options
        cmd = smoke_command(recipe, conv, smoke_options or [])
        if conv.registers(recipe_test_options.CONFIG_OVERRIDE):
            out["tests"] = " ".join([cmd, *overrides(text.compile_on(facts))])
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


def overrides(values: list[str]) -> list[str]:
    """`--config-override K=V` for each value (the recipe tests' option)."""
    return [f"{recipe_test_options.CONFIG_OVERRIDE} {v}" for v in values]


_NPROC = re.compile(r"--nproc[_-]per[_-]node(?:=|\s+)(\S+)")


def with_ranks(command: str, ranks: tuple[int, int] | None) -> str:
    """A torchrun command whose process count fits the stage's mesh: `ranks` is (the least world size it runs on,
    the product its fixed dimensions need); a count the README gives that is at least the one and a multiple of
    the other stays, any other is set to the least (`--nproc_per_node` set, or added after `torchrun`). Another
    launcher, or a stage without a mesh (None), is left as written."""
    if not command or ranks is None or not re.match(r"^\s*torchrun\b", command):
        return command
    least, fixed = ranks
    m = _NPROC.search(command)
    if m is not None:
        given = int(m.group(1)) if m.group(1).isdigit() else None
        if given is not None and given >= least and given % max(fixed, 1) == 0:
            return command
        return command[: m.start(1)] + str(least) + command[m.end(1) :]
    return re.sub(r"^(\s*torchrun)\b", rf"\1 --nproc_per_node={least}", command, count=1)

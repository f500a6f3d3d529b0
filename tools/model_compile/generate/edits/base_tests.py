"""The recipe's own base tests, when it has none: `tests/conftest.py`, `test_structure.py`, `test_smoke.py`.

- `conftest.py` is rendered from templates/recipe_base/conftest.py.j2 with the
  option set its sibling recipes register (read statically, parse/recipe_test_options.py):
  `--world-size` defaulting to what the stage's `parallel.mesh` needs,
  `--config-name`, a repeatable `--config-override`, and the siblings' opt-in
  smoke switch (`--run-smoke`) where they gate a multi-rank smoke with one.
- `test_structure.py` / `test_smoke.py` start from the repository's own
  `tests/templates/<name>.template`, transformed here: the template's
  instructions to whoever copies it ("Copy this file to ... and update the
  constants below") are dropped, its placeholders and constants filled, and
  the smoke test takes the conftest's fixtures instead of its constants.

A file the recipe already has is never replaced.
"""

from __future__ import annotations

import posixpath
import re
import textwrap
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import libcst as cst

from model_compile import templating
from model_compile.generate.edits.cst_util import assigned_name
from model_compile.generate.edits.import_order import insert_import
from model_compile.parse import recipe_test_options
from model_compile.parse.models import StageFacts
from model_compile.parse.stages import stage_facts

MESH_DIMS = ("replicate", "shard", "tensor")
# The constants of the repository's smoke template the conftest options replace, and the fixture each becomes.
SMOKE_CONSTANTS = {"WORLD_SIZE": "world_size", "CONFIG_NAME": "config_name", "CONFIG_OVERRIDES": "config_overrides"}
FIXTURE_TYPES = {"world_size": "int", "config_name": "str", "config_overrides": "tuple[str, ...]"}
_INSTRUCTION = re.compile(r"Copy this file\b.*?\.(?=\s|$)", re.S)


@dataclass
class WorldSize:
    """The ranks a stage's mesh needs, and how that was read."""

    size: int
    why: str
    from_mesh: bool = True  # False: the stage sets no mesh, so any world size runs it (1 is the least)


def mesh_world_size(stage: Path, rel: str) -> WorldSize:
    """`world_size` of a stage YAML on disk."""
    try:
        facts = stage_facts(stage.read_text(encoding="utf-8"), rel, stage.stem)
    except (OSError, UnicodeDecodeError):
        return WorldSize(1, f"{rel} does not read")
    return world_size(facts)


def world_size(facts: StageFacts) -> WorldSize:
    """replicate x shard x tensor of a stage's `parallel.mesh`. A -1 fills the rest; a shard that fills gets
    2 ranks at least, since with one it is data parallel, not the FSDP2 wrap the stage runs."""
    dims = [(d, facts.mesh[d]) for d in MESH_DIMS if d in facts.mesh]
    if not dims:
        return WorldSize(1, f"{facts.file} sets no parallel.mesh", from_mesh=False)
    size = 1
    for d, value in dims:
        size *= value if value > 0 else (2 if d == "shard" else 1)
    shown = " x ".join(f"{d} {v}" for d, v in dims)
    why = f"parallel.mesh of {posixpath.basename(facts.file)}: {shown}"
    if facts.mesh.get("shard", 1) <= 0:
        why += " (shard -1 fills: 2 ranks exercise its FSDP2 wrap)"
    elif any(v <= 0 for _, v in dims):
        why += " (a -1 fills whatever ranks the launch starts: the stage fixes no world size; the least is shown)"
    return WorldSize(size, why)


@dataclass
class SiblingOptions:
    """What the other recipes' conftest.py files register."""

    conftests: int = 0  # siblings with a tests/conftest.py
    smoke_flag: str | None = None  # their opt-in smoke switch (most common name)
    flagged: int = 0  # siblings that register one
    flagged_multi_rank: int = 0  # of those, siblings whose --world-size defaults above 1

    def gate(self, world_size: int) -> str | None:
        """The switch to register: where most siblings gate their smoke, or where the ones that
        need several ranks do and this recipe needs several too."""
        if self.smoke_flag is None:
            return None
        if 2 * self.flagged >= self.conftests or (world_size > 1 and self.flagged_multi_rank):
            return self.smoke_flag
        return None


def sibling_options(recipe: Path, root: Path) -> SiblingOptions:
    """Read every sibling recipe's tests/conftest.py (statically)."""
    out = SiblingOptions()
    names: Counter[str] = Counter()
    for sibling in sorted(p for p in recipe.parent.iterdir() if p.is_dir() and p.resolve() != recipe.resolve()):
        if not (sibling / "tests" / "conftest.py").is_file() or not (sibling / "configs").is_dir():
            continue
        conv = recipe_test_options.read(sibling, root)
        out.conftests += 1
        flags = [f for f in conv.opt_in_flags("smoke") if "smoke" in f or f.startswith("--run")]
        if flags:
            out.flagged += 1
            names[flags[0]] += 1
            default = conv.default_of(recipe_test_options.WORLD_SIZE)
            if isinstance(default, int) and default > 1:
                out.flagged_multi_rank += 1
    if names:
        out.smoke_flag = names.most_common(1)[0][0]
    return out


def render_conftest(
    recipe_name: str, world: WorldSize, config_name: str, smoke_flag: str | None, override: Path | None = None
) -> str:
    """tests/conftest.py for a recipe that has none."""
    context = {
        "recipe_name": recipe_name,
        "world_size": world.size,
        "world_size_why": world.why,
        "config_name": config_name,
        "smoke_flag": smoke_flag,
        "smoke_fixture": smoke_fixture(smoke_flag) if smoke_flag else "",
        "quote": "double",
        "line_length": 120,
    }
    return templating.render("recipe_base/conftest.py.j2", context, override)


def smoke_fixture(flag: str) -> str:
    """`--run-smoke` -> `run_smoke`."""
    return flag.lstrip("-").replace("-", "_")


# -- the repository's templates, transformed ----------------------------------
def drop_instructions(docstring: str, recipe_name: str) -> str:
    """The module docstring without its copy instructions, about `recipe_name` instead of "a recipe"."""
    body = docstring
    body = re.sub(r"\bfor a recipe\b", f"for the {recipe_name} recipe", body, count=1)
    if not _INSTRUCTION.search(body):
        return body
    lines = body.splitlines()
    head, rest = lines[0], "\n".join(lines[1:])
    paragraphs = re.split(r"\n\s*\n", rest.strip("\n"))
    width = max((len(line) for line in lines), default=79)
    kept = []
    for para in paragraphs:
        if _INSTRUCTION.search(para):
            text = " ".join(_INSTRUCTION.sub("", para).split())
            if not text:
                continue
            para = textwrap.fill(text, width=width, break_long_words=False, break_on_hyphens=False)
        kept.append(para)
    return "\n\n".join([head, *kept]) + ("\n" if body.endswith("\n") else "")


# A helper that refuses to run distributed on a CPU device (`if get_device(...).type == "cpu": raise ...`).
_CPU_REFUSAL = re.compile(r"""\.type\s*==\s*["']cpu["'][^\n]*:\s*\n\s*raise\b""")
ACCELERATOR_CHECK = '''

def _has_accelerator() -> bool:
    """A GPU or an NPU here: the smoke helper refuses a CPU-only machine."""
    import importlib.util

    import torch

    return torch.cuda.is_available() or importlib.util.find_spec("torch_npu") is not None
'''


def helper_refuses_cpu(template: str, root: Path) -> str | None:
    """The module a smoke template imports its helpers from, when it refuses a CPU-only machine (read statically:
    a `.type == "cpu"` test followed by a raise), as `pkg/testing/utils.py`; else None."""
    for module in re.findall(r"^from\s+([\w.]+)\s+import", template, re.M):
        path = root / (module.replace(".", "/") + ".py")
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if _CPU_REFUSAL.search(text):
            return path.relative_to(root).as_posix()
    return None


class _Fill(cst.CSTTransformer):
    """Fill placeholders and constants; wire test_smoke to the conftest fixtures when `wire`; gate it by the
    siblings' switch (`smoke_flag`) or, where the helper refuses a CPU-only machine, by an accelerator check."""

    def __init__(
        self, recipe_name: str, values: dict[str, str], wire: bool, smoke_flag: str | None, accelerator: bool = False
    ) -> None:
        self.recipe_name = recipe_name
        self.values = values  # constant name -> Python source of its value
        self.wire = wire
        self.smoke_flag = smoke_flag
        self.accelerator = accelerator and smoke_flag is None
        self.gated = False
        self.in_smoke = False
        self.wired = False

    def leave_Module(self, original: cst.Module, updated: cst.Module) -> cst.Module:
        body = list(updated.body)
        if body and _docstring(body[0]) is not None:
            old = _docstring(body[0]) or ""
            new = drop_instructions(old, self.recipe_name)
            if new != old:
                body[0] = body[0].with_changes(body=[cst.Expr(cst.SimpleString(f'"""{new}"""'))])
        if self.wired:  # the constants the fixtures replace are no longer read; their blank lines stay
            kept: list[cst.SimpleStatementLine | cst.BaseCompoundStatement] = []
            lead: list[cst.EmptyLine] | None = None
            for stmt in body:
                if assigned_name(stmt) in SMOKE_CONSTANTS:
                    lead = list(getattr(stmt, "leading_lines", [])) if lead is None else lead
                    continue
                if lead is not None and isinstance(stmt, cst.SimpleStatementLine):
                    stmt = stmt.with_changes(leading_lines=lead)
                lead = None
                kept.append(stmt)
            body = kept
        return updated.with_changes(body=body)

    def leave_SimpleStatementLine(
        self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine
    ) -> cst.SimpleStatementLine:
        name = assigned_name(updated)
        if name in self.values and not self.in_smoke:
            stmt = updated.body[0]
            value = cst.parse_expression(self.values[name])
            if isinstance(stmt, (cst.Assign, cst.AnnAssign)):
                return updated.with_changes(body=[stmt.with_changes(value=value)])
        return updated

    def leave_SimpleString(self, original: cst.SimpleString, updated: cst.SimpleString) -> cst.SimpleString:
        text = updated.value
        for placeholder in ("<recipe_name>", "<recipe>"):
            text = text.replace(placeholder, self.recipe_name)
        if "<RecipeConfigClass>" in text and "CONFIG_CLASS" in self.values:
            text = text.replace("<RecipeConfigClass>", self.values["CONFIG_CLASS"].strip("\"'"))
        return updated.with_changes(value=text)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        if node.name.value == "test_smoke" and self.wire:
            self.in_smoke = True

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.Name:
        if self.in_smoke and updated.value in SMOKE_CONSTANTS:
            return updated.with_changes(value=SMOKE_CONSTANTS[updated.value])
        return updated

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> cst.FunctionDef:
        if original.name.value == "test_smoke" and not self.wire and self.accelerator:
            return self._gate(updated)
        if original.name.value != "test_smoke" or not self.in_smoke:
            return updated
        self.in_smoke = False
        self.wired = True
        have = {p.name.value for p in updated.params.params}
        wanted = ([smoke_fixture(self.smoke_flag)] if self.smoke_flag else []) + list(FIXTURE_TYPES)
        types = {**FIXTURE_TYPES, **({smoke_fixture(self.smoke_flag): "bool"} if self.smoke_flag else {})}
        names = [n for n in wanted if n not in have]
        listed = [f"{n}: {types[n]}" for n in names] + [
            cst.Module([]).code_for_node(p.with_changes(comma=cst.MaybeSentinel.DEFAULT)) for p in updated.params.params
        ]
        # one parameter a line with a magic trailing comma: the formatters keep it so at any line length
        header = cst.ensure_type(
            cst.parse_statement("def f(\n" + "".join(f"    {p},\n" for p in listed) + "):\n    pass\n"), cst.FunctionDef
        )
        params = header.params
        updated = updated.with_changes(whitespace_before_params=header.whitespace_before_params)
        body = list(updated.body.body)
        doc = 1 if body and _docstring(body[0]) is not None else 0
        if doc:
            text = (_docstring(body[0]) or "").replace("``WORLD_SIZE``", "``world_size``")
            body[0] = body[0].with_changes(body=[cst.Expr(cst.SimpleString(f'"""{text}"""'))])
        if self.smoke_flag:
            fixture = smoke_fixture(self.smoke_flag)
            skip = cst.parse_statement(
                f"if not {fixture}:\n"
                f'    pytest.skip("the {self.recipe_name} smoke test runs only with {self.smoke_flag}")\n'
            )
            body.insert(doc, skip)
            after = doc + 1
            if after < len(body) and isinstance(body[after], cst.SimpleStatementLine):
                body[after] = body[after].with_changes(leading_lines=[cst.EmptyLine(indent=False)])
        updated = updated.with_changes(params=params, body=updated.body.with_changes(body=body))
        return self._gate(updated) if self.accelerator else updated

    def _gate(self, fn: cst.FunctionDef) -> cst.FunctionDef:
        """`pytest.skip` first in test_smoke when this machine has no GPU or NPU (the helper would refuse it)."""
        self.gated = True
        body = list(fn.body.body)
        doc = 1 if body and _docstring(body[0]) is not None else 0
        skip = cst.parse_statement(
            "if not _has_accelerator():\n"
            f'    pytest.skip("the {self.recipe_name} smoke test needs a GPU or an NPU (its helper refuses a CPU-only '
            'machine)")\n'
        )
        body.insert(doc, skip)
        if doc + 1 < len(body) and isinstance(body[doc + 1], cst.SimpleStatementLine):
            body[doc + 1] = body[doc + 1].with_changes(leading_lines=[cst.EmptyLine(indent=False)])
        return fn.with_changes(body=fn.body.with_changes(body=body))


def _docstring(stmt: cst.CSTNode) -> str | None:
    if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Expr):
        value = stmt.body[0].value
        if isinstance(value, cst.SimpleString) and value.value.startswith(('"""', "'''")):
            return value.value[3:-3]
    return None


@dataclass
class Filled:
    """A template filled for the recipe, and what could not be filled."""

    text: str
    wired: bool  # test_smoke takes the conftest fixtures
    left: list[str]  # placeholders still in the text (`<...>`)


def fill_template(
    text: str,
    recipe_name: str,
    *,
    config_class: str | None,
    config_name: str,
    world_size: int,
    wire: bool,
    smoke_flag: str | None,
    root: Path | None = None,
    accelerator: bool = False,
) -> Filled:
    """The repository's test template made the recipe's own file (see the module docstring)."""
    values = {"CONFIG_NAME": f'"{config_name}"', "WORLD_SIZE": str(world_size)}
    if config_class:
        values["CONFIG_CLASS_NAME"] = f'"{config_class}"'
        values["CONFIG_CLASS"] = f'"{config_class}"'
    try:
        module = cst.parse_module(text)
    except cst.ParserSyntaxError:  # not Python we can edit: fill the placeholders only
        out = text.replace("<recipe_name>", recipe_name).replace("<recipe>", recipe_name)
        if config_class:
            out = out.replace("<RecipeConfigClass>", config_class)
        return Filled(out, False, sorted(set(re.findall(r"<[A-Za-z_]+>", out))))
    fill = _Fill(recipe_name, values, wire, smoke_flag, accelerator)
    code = module.visit(fill).code
    if fill.gated:  # the check sits before the first test function
        at = code.index("\ndef test_smoke") if "\ndef test_smoke" in code else len(code)
        code = code[:at].rstrip("\n") + "\n\n\n" + ACCELERATOR_CHECK.strip("\n") + "\n\n" + code[at:]
    if ((fill.wired and smoke_flag) or fill.gated) and not re.search(r"^import pytest$", code, re.M):
        code = insert_import(code, "pytest", None, root=root)
    return Filled(code, fill.wired, sorted(set(re.findall(r"<[A-Za-z_]+>", code))))

"""`generate RECIPE --enable STAGE ... / --disable STAGE ...`: turn compile on or off in stage YAMLs.

The most common update of a recipe that already compiles: set
`model.compile.enabled` (and, when asked, `backend` / `mode`) in some stage
files. Each value is replaced in place - every other byte, comment and key
order stays - and the line of `enabled: true` carries the intent note that
documents it (`# model-compile: enabled - <reason>`, parse/documentation.py;
MC203 asks for it); `--disable` removes that note. A stage without compile keys
gets them first, in the recipe's schema form (the `model.compile` section, or
the older flat `compile` / `compile_backend` / `compile_mode` keys), off and with
the schema's backend and mode; the flat switch is edited in place. The result
is re-parsed to prove only the compile keys changed. A rerun is a no-op.

Refused (InputError, nothing written): a stage without a YAML, a recipe that
does not compile yet, or whose schema and stages declare no compile keys (run
`generate --path ...` first), an enable without a reason.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from model_compile import templating
from model_compile.errors import InputError
from model_compile.generate.edits.snippets import Renderer
from model_compile.generate.edits.yaml_edit import edit_stage, set_flat
from model_compile.generate.planning import guard, locate
from model_compile.generate.planning.inputs import recipe_report
from model_compile.generate.planning.plan import FileChange, Plan
from model_compile.generate.planning.sharding import (
    WHOLE_MODEL_PATHS,
    sharding_notes,
    smoke_commands,
    test_override_note,
)
from model_compile.generate.planning.stage_models import stage_models
from model_compile.generate.planning.structure import kept_eager, suggest_regional
from model_compile.generate.style.repo_text import read_repo_text
from model_compile.parse.documentation import parse_comment
from model_compile.parse.models import ConfigForm, SchemaFacts, StageFacts
from model_compile.parse.stages import mapping_child, stage_facts
from model_compile.vocabulary import BACKENDS, CUDA_GRAPH_MODES, MODES

INTENT = "model-compile: enabled"


@dataclass
class StageOptions:
    """What the user asked for: stages to enable and disable, and the values to set."""

    recipe: Path
    enable: list[str] = field(default_factory=list)
    disable: list[str] = field(default_factory=list)
    backend: str | None = None
    mode: str | None = None
    reason: str | None = None

    def check(self) -> None:
        """Refuse what cannot be done (one line, nothing written)."""
        if not self.recipe.is_dir():
            raise InputError(f"recipe folder not found: {self.recipe}")
        both = sorted(set(self.enable) & set(self.disable))
        if both:
            raise InputError(f"stage {', '.join(both)} is given to both --enable and --disable")
        if self.backend is not None and self.backend not in BACKENDS:
            raise InputError(f"--backend must be one of {', '.join(BACKENDS)}")
        if self.mode is not None and self.mode not in MODES:
            raise InputError(f"--mode must be one of {', '.join(MODES)}")
        reason = " ".join((self.reason or "").split())
        if self.enable and not reason:
            raise InputError(
                "--enable writes the intent note `# model-compile: enabled - <reason>`: pass --reason TEXT "
                '(an honest, unmeasured reason is fine, e.g. "try compile on the long stages")'
            )
        if "\n" in (self.reason or "").strip():
            raise InputError("--reason must be one line")
        self.reason = reason or None


@dataclass
class StagePlan(Plan):
    """A Plan of stage edits, with the smoke commands for exactly those stages."""

    stages: dict[str, str] = field(default_factory=dict)  # stage -> "enabled" / "disabled"
    commands: list[str] = field(default_factory=list)


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _is_intent_line(line: str) -> bool:
    """A comment line that is an intent note (`# model-compile: enabled - ...`), read as the soft review reads it."""
    text = line.strip()
    parsed = parse_comment(text.lstrip("#").strip()) if text.startswith("#") else None
    return parsed is not None and parsed[0] == "enabled"


def _strip_intent(line: str) -> str:
    """The line without our `# model-compile: enabled - ...` comment (other comments stay)."""
    m = re.search(r"\s+#\s*model-compile:\s*enabled\b.*$", line.rstrip("\r\n"), re.IGNORECASE)
    if not m:
        return line
    end = line[len(line.rstrip("\r\n")) :]
    return line[: m.start()] + end


def set_compile(text: str, values: dict[str, Any], reason: str | None, *, filename: str) -> str:
    """`text` with `model.compile.<key>` set to each value; `enabled: true` carries the intent note."""
    try:
        root = yaml.compose(text)
        before = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise InputError(f"{filename}: cannot parse YAML ({str(exc).splitlines()[0]})") from exc
    model = mapping_child(root, "model")
    compile_ = mapping_child(model[1], "compile") if model else None
    if compile_ is None or not isinstance(compile_[1], yaml.MappingNode) or compile_[1].flow_style:
        raise InputError(f"{filename}: no block `model.compile` mapping to edit")
    lines = text.splitlines(keepends=True)
    block = compile_[1]
    indent = " " * block.value[0][0].start_mark.column if block.value else "  "
    for key, value in values.items():
        found = mapping_child(block, key)
        new = _scalar(value)
        if found is None:  # a key the block lacks: a line after the block's last line
            last = max(v.end_mark.line if v.end_mark.column else v.end_mark.line - 1 for _, v in block.value)
            eol = "\r\n" if lines[last].endswith("\r\n") else "\n"
            if not lines[last].endswith(("\n", "\r")):
                lines[last] += eol
            lines.insert(last + 1, f"{indent}{key}: {new}{eol}")
            text = "".join(lines)
            return set_compile(text, values, reason, filename=filename)  # re-read the marks once
        k, v = found
        if not isinstance(v, yaml.ScalarNode) or v.start_mark.line != v.end_mark.line:
            raise InputError(f"{filename}: model.compile.{key} is not a one-line value; edit it by hand")
        row = v.start_mark.line
        line = lines[row]
        old = line[v.start_mark.column : v.end_mark.column]
        quoted = old[:1] in ("'", '"')
        shown = f"{old[0]}{new}{old[0]}" if quoted and not isinstance(value, bool) else new
        lines[row] = line[: v.start_mark.column] + shown + line[v.end_mark.column :]
    enabled = mapping_child(block, "enabled")
    if enabled is not None and "enabled" in values:
        row = enabled[1].start_mark.line
        line = _strip_intent(lines[row])
        body, eol = line.rstrip("\r\n"), line[len(line.rstrip("\r\n")) :]
        if values["enabled"] is True and reason:
            note = f"# {INTENT} - {reason}"
            if "#" in body[enabled[1].end_mark.column :]:  # a comment of its own: the note goes on the line above
                col = enabled[0].start_mark.column
                if row and _is_intent_line(lines[row - 1]):
                    lines[row - 1] = " " * col + note + eol
                else:
                    lines.insert(row, " " * col + note + eol)
                    row += 1
                lines[row] = line
            else:
                lines[row] = f"{body}  {note}{eol or chr(10)}"
        else:
            lines[row] = line
            if row and _is_intent_line(lines[row - 1]):
                del lines[row - 1]
    new_text = "".join(lines)
    _verify(before, new_text, values, filename)
    return new_text


def _verify(before: Any, new_text: str, values: dict[str, Any], filename: str) -> None:
    try:
        after = yaml.safe_load(new_text)
    except yaml.YAMLError as exc:
        raise InputError(f"{filename}: the edit broke the YAML; edit it by hand") from exc
    expected = yaml.safe_load(yaml.safe_dump(before))
    expected["model"]["compile"].update(values)
    if after != expected:
        raise InputError(f"{filename}: the edit changed more than model.compile; edit it by hand")


def _not_compiling(files: locate.RecipeFiles) -> str:
    """Which `generate --path` wires compile first (the kit when the repository has one)."""
    recipe = files.rel(files.recipe)
    if locate.find_kit_import(files.root) is not None:
        return f"model-compile generate {recipe} --path kit --write"
    return f'model-compile generate {recipe} --path regional --reason "..." --write'


def _stage_form(facts: dict[str, StageFacts]) -> ConfigForm | None:
    """The compile form the stages use, when the schema does not say (the first stage that has the block)."""
    return next((f.form for f in facts.values() if f.form), None)


def _add_block(
    text: str, form: str, schema: SchemaFacts | None, opts: StageOptions, rel: str, files: locate.RecipeFiles
) -> tuple[str, str]:
    """A stage YAML with the compile block its recipe's schema form has (off; the schema's backend and mode, or the
    ones given), and the words for the note."""

    def default(name: str, fallback: str) -> str:
        given = {"backend": opts.backend, "mode": opts.mode}[name]
        fact = schema.fields.get(name) if schema is not None else None
        literal = fact.default if fact is not None and fact.present and isinstance(fact.default, str) else None
        return given or literal or fallback

    backend, mode = default("backend", "inductor"), default("mode", "default")
    if form == "flat":
        declared = [
            n for n in ("backend", "mode") if schema is not None and n in schema.fields and schema.fields[n].present
        ]
        values: dict[str, Any] = {"enabled": False}
        values.update({n: backend if n == "backend" else mode for n in declared})
        return set_flat(text, values, None, filename=rel), "added the flat compile keys (the schema's form); "
    renderer = Renderer(templating.override_dir_from_pyproject(files.root))
    edited = edit_stage(text, lambda i, s: renderer.stage_block(i, s, backend, mode), filename=rel)
    return edited.text, "added the model.compile block (the schema's section form); "


def build_stage_plan(opts: StageOptions) -> StagePlan:
    """Every stage edit in memory, the smoke commands for those stages, and what sharding means for them."""
    opts.check()
    guard.check_recipe(opts.recipe)
    files = locate.find_recipe_files(opts.recipe)
    by_name = {p.stem: p for p in files.stages}
    asked = [*opts.enable, *opts.disable]
    unknown = [s for s in asked if s not in by_name]
    if unknown:
        have = ", ".join(sorted(by_name)) or "none"
        raise InputError(f"no stage {', '.join(unknown)} in {files.rel(files.recipe)}/configs (stages: {have})")
    report, kits = recipe_report(files.recipe)
    path = report.compile_path if report is not None else "none"
    texts = {s: guard.read_source(by_name[s], files.rel(by_name[s]), None, None) for s in asked}
    facts = {s: stage_facts(texts[s], files.rel(by_name[s]), s) for s in asked}
    if path == "none":
        raise InputError(f"{files.rel(files.recipe)}: it does not compile yet; run `{_not_compiling(files)}` first")
    schema = report.config.schema_ if report is not None else None
    form = schema.form if schema is not None and schema.form else _stage_form(facts)
    lacking = [s for s in asked if not facts[s].has_compile]
    if lacking and form is None:
        raise InputError(
            f"{files.rel(files.recipe)}: its schema declares no compile section and stage {', '.join(lacking)} has "
            f"no model.compile; run `{_not_compiling(files)}` first"
        )
    plan = StagePlan(
        recipe=files.recipe, root=files.root, path_kind="stages", target="", target_inferred=False, target_why=""
    )
    for stage in asked:
        on = stage in opts.enable
        values: dict[str, Any] = {"enabled": on}
        if on and opts.backend:
            values["backend"] = opts.backend
        if on and opts.mode:
            values["mode"] = opts.mode
        rel = files.rel(by_name[stage])
        text, added = texts[stage], ""
        if stage in lacking:  # the block the recipe's schema form has, with the schema's defaults
            text, added = _add_block(text, form or "section", schema, opts, rel, files)
        if (form if stage in lacking else facts[stage].form) == "flat":
            new = set_flat(text, values, opts.reason if on else None, filename=rel)
        else:
            new = set_compile(text, values, opts.reason if on else None, filename=rel)
        plan.changes.append(FileChange(by_name[stage], rel, texts[stage], new))
        plan.stages[stage] = "enabled" if on else "disabled"
        shown = ", ".join(f"{k}: {_scalar(v)}" for k, v in values.items())
        plan.notes.append(f"{rel}: {added}model.compile {shown}" + ("" if new != texts[stage] else " (already so)"))
        facts[stage] = stage_facts(new, rel, stage)  # as the stage will read: its smoke command, its mode
    graphed = sorted(s for s in opts.enable if (opts.mode or facts[s].static_value("mode")[1]) in CUDA_GRAPH_MODES)
    if graphed:
        mode = opts.mode or facts[graphed[0]].static_value("mode")[1]
        plan.notes.append(
            f"{', '.join(graphed)}: mode {mode} turns on CUDA graphs (triton.cudagraphs, as "
            "torch._inductor.list_mode_options shows): each new input shape records another graph and keeps its "
            "memory; where shapes change per step (packed or variable-length batches), max-autotune-no-cudagraphs "
            "tunes kernels without them"
        )
    repo_text = read_repo_text(files, form)
    plan.commands = smoke_commands(files, opts.enable, facts, repo_text)
    if plan.commands and (said := test_override_note(repo_text)):
        plan.notes.append(said)
    model_var = report.scope.model if report is not None else "model"
    if any(facts[s].wrapping == "fsdp2" for s in opts.enable) and path in WHOLE_MODEL_PATHS:
        ledgers = list(report.ledger) if report is not None else []
        models = stage_models(files, opts.enable, [files.root / k.file for k in kits], ledgers)
        plan.notes.extend(models.notes())
        layout = models.layout
        kept = kept_eager(kits, ledgers, model_var)
        texts = {p.name: guard.read_source(p, files.rel(p), None, None) for p in files.stages}
        defaults = report.config.schema_.defaults if report is not None else None
        suggested = suggest_regional(layout, model_var, kept, ledgers, facts, texts, defaults)
        plan.sharding = sharding_notes(files, opts.enable, facts, path, model_var, suggested)
    return plan

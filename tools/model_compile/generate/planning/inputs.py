"""The static facts a `generate` plan is computed from: the recipe's review and ledgers, the kit class it
calls and what that kit compiles, the stage the commands run, and the recipe tests' template context."""

from __future__ import annotations

from pathlib import Path

import libcst as cst

from model_compile.analyze import analyze_path
from model_compile.errors import InputError
from model_compile.findings.models import RecipeReport
from model_compile.generate.edits import engine_edit
from model_compile.generate.edits.base_tests import world_size
from model_compile.generate.edits.schema_edit import model_classes
from model_compile.generate.edits.snippets import Renderer
from model_compile.generate.planning import locate
from model_compile.generate.planning.options import Options
from model_compile.generate.planning.sharding import stage_options
from model_compile.generate.planning.wired import requested_path
from model_compile.generate.style import conventions
from model_compile.generate.style.repo_style import RepoStyle
from model_compile.generate.style.repo_text import RepoText
from model_compile.ledger.compiled_scope import CompiledScope, ScopePart, eager_regions
from model_compile.ledger.models import Ledger
from model_compile.ledger.repo import KitFacts
from model_compile.parse.models import StageFacts
from model_compile.recipe_tests import default_context


def run_stage(
    files: locate.RecipeFiles, facts: dict[str, StageFacts], text: RepoText, default: str
) -> tuple[str, list[str]]:
    """The stage the README's and the notes' commands run, and the smoke options it needs: the first stage
    that enables compile today (a stage3-only change runs stage3, on its mesh's world size), else `default`."""
    enabled = sorted(name for name, f in facts.items() if f.static_value("enabled")[1] is True)
    if not enabled or default in enabled:
        return default, []
    return enabled[0], stage_options(text.test_options, enabled[0], world_size(facts[enabled[0]]))


def kit_of(kits: list[KitFacts], added: tuple[str, str] | None) -> KitFacts | None:
    """The kit class the engine calls: the one generate adds, else the repository's model kit."""
    name = added[1] if added else locate.KIT_CLASS
    return next((k for k in kits if k.class_name == name), kits[0] if kits else None)


def kit_scope(
    model_var: str, kit: KitFacts | None, layout: locate.ModelLayout | None, patches: list[str]
) -> CompiledScope:
    """What the kit will compile for this model: the whole model minus the regions the kit disables, each
    only when the model has it - dropped where the model's layout shows it has none, hedged where the
    tool cannot tell (the kit tests for it at run time)."""
    minus: list[str] = []
    hedged: list[str] = []
    for region in kit.disables if kit else []:
        path = model_var + region[len(kit.model_param) :] if kit and region.startswith(kit.model_param) else region
        rel = path[len(model_var) + 1 :] if path.startswith(model_var + ".") else path
        present = layout.has(rel) if layout is not None else None
        guarded = kit is not None and region in kit.found_by
        if present is False and guarded:
            continue  # the kit checks for it, and this model has none: nothing is disabled
        minus.append(path)
        if present is None and guarded:
            hedged.append(path)
    part = ScopePart(kind="whole-model", module=model_var, pattern="", minus=minus, when_present=hedged, via="kit")
    return CompiledScope(
        model=model_var, parts=[part], eager=eager_regions([part], model_var, patches), patterns=[""], patches=patches
    )


PARITY_HOOKS = ("get_batch", "compute_loss")  # what templates/recipe_tests/test_compile_parity.py.j2 calls


def missing_parity_hooks(files: locate.RecipeFiles, engine_file: Path, class_name: str) -> list[str]:
    """The parity template's engine hooks the engine class does not define or inherit (statically)."""
    methods = conventions.engine_methods(files.root, engine_file, class_name)
    if methods is None:  # a base we cannot read: assume the hooks may be there
        return []
    return [name for name in PARITY_HOOKS if name not in methods]


def compile_class(
    r: Renderer, files: locate.RecipeFiles, style: RepoStyle, name: str, base: str, cfg: str | None, opts: Options
) -> str:
    """The compile config class, with the docstring sibling recipes give theirs, in the repo's style."""
    return r.compile_class(
        name,
        base,
        cfg,
        opts.backend,
        opts.mode,
        docstring=conventions.compile_class_docstring(files.root, files.recipe, name),
        line_length=style.line_length,
        quote=style.quote,
    )


def root_config_class(schema_text: str, hint: str | None) -> str | None:
    try:
        return model_classes(cst.parse_module(schema_text), hint)[0]
    except (InputError, cst.ParserSyntaxError):
        return hint


def recipe_report(recipe: Path) -> tuple[RecipeReport | None, list[KitFacts]]:
    """The static review of the recipe (its ledgers, compile path, findings) and the repository's kit facts."""
    report = analyze_path(recipe)
    return (report.recipes[0] if report.recipes else None), report.kit


def recipe_ledgers(rec: RecipeReport | None) -> dict[str, dict[str, Ledger]]:
    """The static analysis' ledgers of the recipe: {engine file relative to the recipe: {class: ledger}}.

    The ledger is the one model of prepare_model() (branches, aliases, helpers,
    early returns): the engine edit takes what to remove and where to insert from it.
    """
    out: dict[str, dict[str, Ledger]] = {}
    for ledger in rec.ledger if rec is not None else []:
        out.setdefault(ledger.file, {})[ledger.engine_class] = ledger
    return out


def _dotted(files: locate.RecipeFiles, path: Path) -> str:
    return ".".join(Path(files.rel(path)).with_suffix("").parts)


def recipe_tests_context(
    files: locate.RecipeFiles,
    opts: Options,
    target: str,
    fx: engine_edit.EngineFacts,
    style: RepoStyle,
    root_class: str | None,
) -> dict:
    """Context for templates/recipe_tests/*.j2, filled through the shared default_context()."""
    compile_path = requested_path(opts.path)
    model_var = fx.model_var
    rel = target[len(model_var) + 1 :] if target.startswith(model_var + ".") else ""
    patterns = {
        "kit": [""],
        "graph-break": [""],
        "post-wrap": [""],
        "submodule": [rel],
        "regional": [f"{rel}.*" if rel else "*"],
    }[opts.path]
    overrides = {
        "target": target,
        "target_patterns": patterns,
        "recipe_package": ".".join(Path(files.rel(files.recipe)).parts),
        "engine_module": _dotted(files, files.engines[0]),
        "engine_class": fx.class_name,
        "line_length": style.line_length,
        "quote": style.quote,
    }
    if root_class:
        overrides["config_class"] = root_class
    stems = [p.stem for p in files.stages]
    if stems:
        overrides["config_name"] = "train" if "train" in stems else stems[0]
    return default_context(files.recipe.name, compile_path, **overrides)

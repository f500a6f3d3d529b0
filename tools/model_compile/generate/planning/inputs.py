"""The static facts a `generate` plan is computed from: the recipe's review and ledgers, the kit class it
calls and what that kit compiles, the stage the commands run, and the recipe tests' template context."""

from __future__ import annotations

import re
from dataclasses import dataclass
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
from model_compile.parse.models import StageFacts, config_key
from model_compile.recipe_tests import default_context


def run_stage(
    files: locate.RecipeFiles, facts: dict[str, StageFacts], text: RepoText, default: str
) -> tuple[str, list[str]]:
    """The stage the README's and the notes' commands run, and the smoke options it needs (`--config-name` and
    its mesh's `--world-size`, where the recipe's conftest.py registers them): `default` when it compiles or no
    stage does, else the first stage that enables compile today (a stage3-only change runs stage3)."""
    enabled = sorted(name for name, f in facts.items() if f.static_value("enabled")[1] is True)
    stage = default if not enabled or default in enabled else enabled[0]
    if stage not in facts:
        return stage, []
    return stage, stage_options(text.test_options, stage, world_size(facts[stage]))


def kit_of(kits: list[KitFacts], name: str | None) -> KitFacts | None:
    """The kit class the engine calls (the one generate adds, or the recipe's own); None when unknown."""
    return next((k for k in kits if k.class_name == name), None) if name else None


@dataclass
class KitChoice:
    """The kit class generate wires a recipe through, where it is imported from, and why that one."""

    found: locate.KitImport
    why: str


_KIND_NAMES = {
    "text": re.compile(r"(?<![MV])LLM|Text|Language", re.I),
    "vision-language": re.compile(r"MLLM|VLM|Multi", re.I),
}


def choose_kit(files: locate.RecipeFiles, kits: list[KitFacts]) -> KitChoice | None:
    """The kit class the recipe's model needs, as its sibling recipes choose: the class the siblings with the same
    kind of model (text, vision-language) call, else the class whose name says that kind, else the model kit."""
    kind, why = locate.model_kind(files)
    names = [k.class_name for k in kits]
    siblings: dict[str, list[str]] = {}
    recipes = files.root / "recipes"
    for other in sorted(p for p in recipes.iterdir() if p.is_dir()) if recipes.is_dir() else []:
        if other.resolve() == files.recipe.resolve():
            continue
        try:
            sibling = locate.find_recipe_files(other)
        except InputError:
            continue
        called = set(_KIT_INSTANCE.findall("\n".join(locate.read_text(p) for p in sibling.engines)))
        if locate.model_kind(sibling)[0] == kind:
            for name in sorted(called & set(names)):
                siblings.setdefault(name, []).append(other.name)
    ranked: list[tuple[str, str]] = [
        (
            name,
            f"as {', '.join(used)} ({kind} model{'s' if len(used) > 1 else ''}) call{'s' if len(used) == 1 else ''} it",
        )
        for name, used in sorted(siblings.items(), key=lambda kv: -len(kv[1]))
    ]
    ranked += [
        (n, f"its name fits a {kind} model") for n in names if kind in _KIND_NAMES and _KIND_NAMES[kind].search(n)
    ]
    ranked += [(locate.KIT_CLASS, "the repository's model kit")] if locate.KIT_CLASS in names else []
    ranked += [(n, "the repository's kit") for n in names]
    for name, because in ranked:
        found = locate.find_kit_import(files.root, name)
        if found is not None:
            return KitChoice(found, f"{name}: {because}; the recipe's model: {kind} ({why})")
    return None


_KIT_INSTANCE = re.compile(r"self\.\w+\s*=\s*(\w+)\(")


def present_regions(kits: list[KitFacts], model_var: str, layout: locate.ModelLayout | None) -> list[KitFacts]:
    """The kits with only the regions they disable that this model may have (a text model has no vision tower)."""
    out = []
    for kit in kits:
        keep = []
        for region in kit.disables:
            rel = region[len(kit.model_param) + 1 :] if region.startswith(kit.model_param + ".") else region
            if layout is None or layout.has(rel) is not False or region not in kit.found_by:
                keep.append(region)
        out.append(kit.model_copy(update={"disables": keep}))
    return out


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
    targets: list[str],
    fx: engine_edit.EngineFacts,
    style: RepoStyle,
    root_class: str | None,
    ledgers: list[Ledger] | None = None,
    form: str | None = None,
) -> dict:
    """Context for templates/recipe_tests/*.j2, filled through the shared default_context(); `ledgers`: the
    engine's, for the distributed wrap prepare_model() calls in its own body (the structure assert checks the
    compile's side of it)."""
    compile_path = requested_path(opts.path)
    model_var = fx.model_var
    patterns: list[str] = []
    for target in targets:
        rel = target[len(model_var) + 1 :] if target.startswith(model_var + ".") else ""
        if opts.path in ("kit", "graph-break", "post-wrap"):
            pattern = ""
        elif "*" in rel.split(".") or opts.path == "submodule":
            pattern = rel  # `X.*.self_attn`: that module of each block; a submodule: itself
        else:
            pattern = f"{rel}.*" if rel else "*"
        patterns += [pattern] if pattern not in patterns else []
    overrides = {
        "target": ", ".join(targets),
        "target_patterns": patterns,
        "recipe_package": ".".join(Path(files.rel(files.recipe)).parts),
        "engine_module": _dotted(files, files.engines[0]),
        "engine_class": fx.class_name,
        "line_length": style.line_length,
        "quote": style.quote,
    }
    if root_class:
        overrides["config_class"] = root_class
    if form == "flat":  # the recipe's older flat keys, as its schema declares them
        overrides.update(
            {
                k: config_key("flat", f)
                for k, f in (("switch_key", "enabled"), ("backend_key", "backend"), ("mode_key", "mode"))
            }
        )
    wraps = [e for lg in ledgers or [] for e in lg.of("wrap") if e.reachable and not e.via]
    overrides["wrap_call"] = wraps[0].call.split("(")[0].split("=")[-1].strip().rsplit(".", 1)[-1] if wraps else ""
    stems = [p.stem for p in files.stages]
    if stems:
        overrides["config_name"] = "train" if "train" in stems else stems[0]
    return default_context(files.recipe.name, compile_path, **overrides)

"""What `generate` changes: every edit computed in memory, nothing written."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

import libcst as cst

from model_compile import templating
from model_compile.analyze import analyze_path
from model_compile.errors import InputError
from model_compile.generate import engine_edit, guard, locate
from model_compile.generate.options import Options
from model_compile.generate.readme_edit import edit_readme
from model_compile.generate.schema_edit import edit_schema
from model_compile.generate.snippets import Renderer
from model_compile.generate.yaml_edit import edit_stage
from model_compile.ledger.models import Ledger
from model_compile.recipe_tests import default_context, planned_recipe_tests
from model_compile.vocabulary import FALLBACK_KINDS, fallback_path

PARITY_HELPERS = ("load_config", "resolve_engine_class")


@dataclass
class FileChange:
    path: Path
    rel: str
    old: str | None  # None: the file does not exist yet
    new: str

    @property
    def changed(self) -> bool:
        return self.old != self.new


@dataclass
class Plan:
    recipe: Path
    root: Path
    path_kind: str
    target: str
    target_inferred: bool
    target_why: str
    changes: list[FileChange] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    snippets: dict[str, str] = field(default_factory=dict)

    @property
    def changed(self) -> list[FileChange]:
        return [c for c in self.changes if c.changed]


def _read(path: Path) -> str:
    return guard.read_source(path, str(path), None, None)  # bounds checked by guard.check_recipe


def build_plan(opts: Options) -> Plan:
    opts.check()
    guard.check_recipe(opts.recipe)  # every file the edit depends on reads, parses, and is not too deep
    files = locate.find_recipe_files(opts.recipe)
    override = opts.templates or templating.override_dir_from_pyproject(files.root)
    r = Renderer(override)
    parsed = []
    for path in files.engines:
        text = _read(path)
        try:
            module = cst.parse_module(text)
        except cst.ParserSyntaxError as exc:
            raise InputError(f"{files.rel(path)}: cannot parse ({exc.message} at line {exc.raw_line})") from exc
        if engine_edit.engine_classes(module):
            parsed.append((path, text, module))
    ledgers = recipe_ledgers(files.recipe) if parsed else {}
    engines = []
    for path, text, module in parsed:
        own = ledgers.get(path.resolve().relative_to(files.recipe).as_posix(), {})
        engines.append((path, text, own, engine_edit.facts(module, own, files.rel(path), files.rel(files.recipe))))
    if not engines:
        raise InputError(f"no engine class with prepare_model() in {files.rel(files.recipe)}")
    first = engines[0][3]
    model_var = first["model_var"]

    choice = None
    if opts.target:
        choice = locate.TargetChoice(opts.target, False, "given with --target")
    else:
        choice = locate.infer_target(files, opts.path, model_var, first["wrapped_var"])
    if choice is None:
        raise InputError(f"cannot infer a --target for --path {opts.path} statically; pass --target ATTR")
    if opts.path in ("submodule", "graph-break", "regional") and choice.target.split(".")[0] != model_var:
        raise InputError(
            f"--target {choice.target} must start with the model variable of prepare_model() ({model_var})"
        )

    plan = Plan(
        recipe=files.recipe,
        root=files.root,
        path_kind=opts.path,
        target=choice.target,
        target_inferred=choice.inferred,
        target_why=choice.why,
    )
    if opts.target is None and opts.path != "kit":
        plan.notes.append(f"target: {choice.target} (inferred: {choice.why}; override with --target)")

    # 1. engine(s)
    for path, text, own, fx in engines:
        kit_attr = fx["kit_attr"]
        kit_import = kit_init = kit_attr_stmt = None
        if opts.path == "kit" and kit_attr is None:
            found = locate.find_kit_import(files.root)
            if found is None:
                raise InputError(
                    f"no {locate.KIT_CLASS} class in the repository at {files.root}; "
                    "use a fallback: --path submodule|graph-break|regional|post-wrap --reason TEXT"
                )
            kit_attr = "self.model_kit"
            kit_import = (found.module, found.name)
            kit_init = r.kit_init(kit_attr, found.name, fx["config_class"])
            kit_attr_stmt = r.kit_attr(kit_attr, found.name)
            plan.notes.append(f"{files.rel(path)}: no kit instance; adds `from {found.module} import {found.name}`")
        target = choice.target
        if opts.path == "post-wrap" and not opts.target:
            target = fx["wrapped_var"] or fx["model_var"]
        block = r.block(opts.path, model_var=fx["model_var"], kit_attr=kit_attr, target=target, reason=opts.reason)
        plan.snippets["compile_block"] = block
        result = engine_edit.edit_engine(
            text,
            ledgers=own,
            path_kind=opts.path,
            block=block,
            model_var=fx["model_var"],
            kit_init=kit_init,
            kit_attr_stmt=kit_attr_stmt,
            kit_import=kit_import,
            need_torch=opts.path == "graph-break",
            filename=files.rel(path),
            recipe_rel=files.rel(files.recipe),
        )
        if result.code != text:  # on a no-op rerun the "replaced"/"placed" notes would mislead
            plan.notes.extend(result.notes)
        plan.changes.append(FileChange(path, files.rel(path), text, result.code))

    # 2. schema
    if files.schema is None:
        raise InputError(f"no configs/schema.py in {files.rel(files.recipe)}; cannot add the compile section")
    schema_text = _read(files.schema)
    res = edit_schema(
        schema_text,
        root_hint=first["config_class"],
        render_class=lambda name, base, cfg: r.compile_class(name, base, cfg, opts.backend, opts.mode),
        render_field=r.compile_field,
        filename=files.rel(files.schema),
    )
    plan.notes.extend(res.notes)
    plan.changes.append(FileChange(files.schema, files.rel(files.schema), schema_text, res.code))

    # 3. stage YAMLs
    for stage in files.stages:
        text = _read(stage)
        y = edit_stage(text, lambda i, s: r.stage_block(i, s, opts.backend, opts.mode), filename=files.rel(stage))
        plan.notes.append(y.note)
        plan.changes.append(FileChange(stage, files.rel(stage), text, y.text))

    # 4. README (fallbacks document kind, target and reason there too)
    if opts.path in FALLBACK_KINDS:
        old = _read(files.readme) if files.readme.is_file() else None
        new, note = edit_readme(
            old or "", lambda h: r.readme_section(h, opts.path, choice.target if opts.path != "post-wrap" else target, opts.reason)
        )
        if new != old:
            plan.notes.append(note)
        plan.changes.append(FileChange(files.readme, files.rel(files.readme), old, new))

    # 5. recipe-local skill tests
    context = recipe_tests_context(files, opts, plan, first)
    rendered = planned_recipe_tests(context, override)
    missing = locate.missing_testing_helpers(files.root, context.get("testing_module", ""), PARITY_HELPERS)
    if missing:
        rendered = {k: v for k, v in rendered.items() if not k.endswith("test_compile_parity.py")}
        plan.notes.append(
            f"parity test not generated: {context.get('testing_module')} lacks {', '.join(missing)} "
            "(the template imports them); add them, then rerun"
        )
    for rel, text in rendered.items():
        dest = files.recipe / rel
        old = _read(dest) if dest.is_file() else None
        plan.changes.append(FileChange(dest, files.rel(dest), old, text))

    plan.snippets.update({k.replace("/", ":"): v for k, v in r.rendered.items()})
    _check_python(plan)
    return plan


def recipe_ledgers(recipe: Path) -> dict[str, dict[str, Ledger]]:
    """The static analysis' ledgers of the recipe: {engine file relative to the recipe: {class: ledger}}.

    The ledger is the one model of prepare_model() (branches, aliases, helpers,
    early returns): the engine edit takes what to remove and where to insert from it.
    """
    report = analyze_path(recipe)
    out: dict[str, dict[str, Ledger]] = {}
    for rec in report.recipes[:1]:
        for ledger in rec.ledger:
            out.setdefault(ledger.file, {})[ledger.engine_class] = ledger
    return out


def recipe_tests_context(files: locate.RecipeFiles, opts: Options, plan: Plan, fx: dict) -> dict:
    """Context for templates/recipe_tests/*.j2, filled through the shared default_context()."""
    compile_path = "kit" if opts.path == "kit" else fallback_path(opts.path)
    model_var = fx["model_var"]
    rel = plan.target[len(model_var) + 1 :] if plan.target.startswith(model_var + ".") else ""
    patterns = {
        "kit": [""],
        "graph-break": [""],
        "post-wrap": [""],
        "submodule": [rel],
        "regional": [f"{rel}.*" if rel else "*"],
    }[opts.path]
    overrides = {"target": plan.target, "target_patterns": patterns}
    testing = locate.find_testing_module(files.root)
    if testing:
        overrides["testing_module"] = testing
    stems = [p.stem for p in files.stages]
    if stems:
        overrides["config_name"] = "train" if "train" in stems else stems[0]
    return default_context(files.recipe.name, compile_path, **overrides)


def _check_python(plan: Plan) -> None:
    for c in plan.changed:
        if c.path.suffix == ".py":
            try:
                ast.parse(c.new)
            except SyntaxError as exc:
                raise InputError(f"{c.rel}: the edit would not parse ({exc.msg} at line {exc.lineno})") from exc

"""What `generate` changes: every edit computed in memory, nothing written."""

from __future__ import annotations

import ast
import shlex
from dataclasses import dataclass, field
from pathlib import Path

import libcst as cst

from model_compile import templating
from model_compile.errors import InputError
from model_compile.generate.edits import engine_edit
from model_compile.generate.edits.import_order import insert_import
from model_compile.generate.edits.readme_edit import edit_readme
from model_compile.generate.edits.recipe_test_files import missing_recipe_tests, plan_skill_tests, recipe_test_files
from model_compile.generate.edits.schema_edit import edit_schema
from model_compile.generate.edits.snippets import Renderer
from model_compile.generate.edits.yaml_edit import edit_stage
from model_compile.generate.planning import guard, locate
from model_compile.generate.planning.forwarding import exclude_compile
from model_compile.generate.planning.inputs import (
    choose_kit,
    compile_class,
    kit_of,
    kit_scope,
    missing_parity_hooks,
    present_regions,
    recipe_ledgers,
    recipe_report,
    recipe_tests_context,
    root_config_class,
    run_stage,
)
from model_compile.generate.planning.options import Options
from model_compile.generate.planning.sharding import sharded_smoke_commands, sharding_notes, test_override_note
from model_compile.generate.planning.stage_models import acted_stages, models_of, runs_inside, stage_models, stage_ranks
from model_compile.generate.planning.structure import check_structure, kept_eager, suggest_regional
from model_compile.generate.planning.wired import check_wiring, requested_path
from model_compile.generate.style import conventions
from model_compile.generate.style.formatting import Formatter, format_changes
from model_compile.generate.style.repo_style import read_style
from model_compile.generate.style.repo_text import body_indent, read_repo_text, run_commands, wrap_reason
from model_compile.ledger.compiled_scope import planned_scope
from model_compile.ledger.hazards import describe
from model_compile.parse import recipe_test_options
from model_compile.parse.documentation import kit_avoidance
from model_compile.parse.stages import stage_facts
from model_compile.recipe_tests import planned_recipe_tests


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
    already_wired: bool = False
    # what per-block FSDP2 means for the whole-model compile planned; said when the planned review has MC407
    sharding: list[str] = field(default_factory=list)
    targets: list[str] = field(default_factory=list)  # each target written (the `target` line joins them)
    offered: list[str] = field(default_factory=list)  # the targets that compile, where the given ones do not

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
    report, kits = recipe_report(files.recipe) if parsed else (None, [])
    r.form = report.config.schema_.form if report is not None else None  # the code reads the schema's own form
    ledgers = recipe_ledgers(report)
    engines = []
    for path, text, module in parsed:
        own = ledgers.get(path.resolve().relative_to(files.recipe).as_posix(), {})
        engines.append((path, text, own, engine_edit.facts(module, own, files.rel(path), files.rel(files.recipe))))
    if not engines:
        raise InputError(f"no engine class with prepare_model() in {files.rel(files.recipe)}")
    first_path, first = engines[0][0], engines[0][3]
    model_var = first.model_var

    kit_files = [files.root / k.file for k in kits]
    all_ledgers = [lg for own in ledgers.values() for lg in own.values()]
    acted = acted_stages(files, opts.stages)
    models = stage_models(files, acted, kit_files, all_ledgers) if opts.path != "post-wrap" else None
    layout = models.layout if models is not None else None
    kept = kept_eager(kits, all_ledgers, model_var)
    choice: locate.TargetChoice | None
    if opts.target:
        choice = locate.TargetChoice(",".join(opts.target), False, "given with --target")
    else:
        choice = locate.infer_target(opts.path, model_var, first.wrapped_var, layout, kept)
    if choice is None:
        raise InputError(
            f"cannot infer a --target for --path {opts.path} statically"
            + (" (" + "; ".join(models.notes()) + ")" if models is not None and layout is None else "")
            + "; pass --target ATTR"
        )
    targets = choice.target.split(",")
    for target in targets:
        if opts.path in ("submodule", "graph-break", "regional") and target.split(".")[0] != model_var:
            raise InputError(f"--target {target} must start with the model variable of prepare_model() ({model_var})")
        for known in models.known() if models is not None else []:  # each stage's model must have it
            locate.check_exists(target, model_var, known, opts.path)

    plan = Plan(
        recipe=files.recipe,
        root=files.root,
        path_kind=opts.path,
        target=choice.target.replace(",", ", "),
        target_inferred=choice.inferred,
        target_why=choice.why,
        targets=targets,
    )
    wiring = check_wiring(report, opts.path, opts.target, opts.switch)
    if wiring.note:
        plan.notes.append(wiring.note)
    plan.notes.extend(models.notes() if models is not None else [])
    if wiring.already_wired:  # nothing is rendered, nothing rewritten: the wiring stays as the recipe has it
        plan.already_wired = True
        plan.notes.extend(missing_recipe_tests(files.recipe, files.root, files.rel))
        return plan
    if opts.target is None and opts.path != "kit":
        plan.notes.append(f"target: {plan.target} (inferred: {choice.why}; override with --target)")
    mine = [p for p in files.stages if p.stem in acted]  # the stage files acted on
    facts_now = {p.stem: stage_facts(_read(p), files.rel(p), p.stem) for p in mine}
    structure = check_structure(
        opts.path,
        targets,
        model_var,
        layout,
        explicit=opts.target is not None,
        ledgers=all_ledgers,
        stages=facts_now,
        stage_texts={p.name: _read(p) for p in mine},
        command=_command(files.rel(files.recipe), opts),
        defaults=report.config.schema_.defaults if report is not None else None,
    )
    plan.notes.extend(structure.notes)
    plan.offered = structure.offered
    if structure.targets != targets:
        targets = plan.targets = structure.targets
        plan.target = ", ".join(targets)
    if opts.path == "kit" and files.readme.is_file():
        avoided = kit_avoidance(_read(files.readme))
        if avoided is not None:
            line, sentence = avoided
            plan.notes.append(
                f'{files.rel(files.readme)}:{line} names the kit after a negation: "{sentence}" --path kit makes '
                "this recipe call the kit's apply_model_compile(); if the recipe keeps off the kit on purpose, "
                "use a fallback instead: --path regional|submodule|graph-break|post-wrap --reason TEXT"
            )
    style = read_style(files.root)

    repo_text = read_repo_text(
        files, report.config.schema_.form if report and report.config.schema_.form else "section"
    )
    repo_text.written = {"backend": opts.backend, "mode": opts.mode}
    stage_name = "train" if "train" in acted or not acted else acted[0]

    # 1. engine(s)
    kit_import: tuple[str, str] | None = None
    for path, text, own, fx in engines:
        kit_attr = fx.kit_attr
        kit_init = kit_attr_stmt = None
        kit_import = None
        if opts.path == "kit" and kit_attr is None:
            picked = choose_kit(files, kits)
            if picked is None:
                raise InputError(
                    f"no model kit class (one defining apply_model_compile) in the repository at {files.root}; "
                    "use a fallback: --path submodule|graph-break|regional|post-wrap --reason TEXT"
                )
            found = picked.found
            plan.notes.append(f"kit class: {picked.why}")
            kit_attr = "self.model_kit"
            kit_import = (found.module, found.name)
            base = conventions.base_init(files.root, path, fx.class_name)
            kit_init = r.kit_init(kit_attr, found.name, base.annotation if base else None)
            kit_attr_stmt = r.kit_attr(kit_attr, found.name)
            plan.notes.append(f"{files.rel(path)}: no kit instance; adds `from {found.module} import {found.name}`")
        target = choice.target
        if opts.path == "post-wrap" and not opts.target:
            target = fx.wrapped_var or fx.model_var
        reason_lines = None
        if opts.reason:  # wrapped within the repo's line length, inside `if ...enabled:`
            reason_lines = wrap_reason(opts.reason, opts.path, body_indent(text) + 4, repo_text.line_length)
        block = r.block(
            opts.path,
            model_var=fx.model_var,
            kit_attr=kit_attr,
            target=target,
            targets=targets if opts.path in ("regional", "submodule") else [target],
            reason=opts.reason,
            reason_lines=reason_lines,
            indent=body_indent(text),
            line_length=repo_text.line_length,
        )
        plan.snippets["compile_block"] = block
        result = engine_edit.edit_engine(
            text,
            ledgers=own,
            path_kind=opts.path,
            block=block,
            model_var=fx.model_var,
            kit_init=kit_init,
            kit_attr_stmt=kit_attr_stmt,
            kit_import=kit_import,
            need_torch=opts.path == "graph-break",
            filename=files.rel(path),
            recipe_rel=files.rel(files.recipe),
        )
        code = result.code
        if kit_init is not None and base is not None and "def __init__" not in text:
            plan.notes.append(f"{files.rel(path)}: the new __init__ mirrors {base.described}")
            if base.import_from is not None:
                code = insert_import(code, *base.import_from, root=files.root)
        if code != text:  # on a no-op rerun the "replaced"/"placed" notes would mislead
            plan.notes.extend(result.notes)
        plan.changes.append(FileChange(path, files.rel(path), text, code))

    # 2. schema
    if files.schema is None:
        raise InputError(f"no configs/schema.py in {files.rel(files.recipe)}; cannot add the compile section")
    schema_text = _read(files.schema)
    res = edit_schema(
        schema_text,
        root_hint=first.config_class,
        render_class=lambda name, base, cfg: compile_class(r, files, style, name, base, cfg, opts),
        render_field=r.compile_field,
        filename=files.rel(files.schema),
    )
    plan.notes.extend(res.notes)
    plan.changes.append(FileChange(files.schema, files.rel(files.schema), schema_text, res.code))

    # a builder that spreads the whole model config into the model's own config must not hand it `compile`
    so_far = {c.rel: c for c in plan.changes}
    edits, notes = exclude_compile(
        files.root,
        files.rel(files.recipe),
        lambda rel: so_far[rel].new if rel in so_far else _read(files.root / rel),
    )
    plan.notes.extend(notes)
    for rel, text in edits.items():
        if rel in so_far:
            so_far[rel].new = text
        else:
            plan.changes.append(FileChange(files.root / rel, rel, _read(files.root / rel), text))

    # the recipe's missing base tests (and the conftest.py its new smoke test takes options from)
    root_class = root_config_class(schema_text, first.config_class)
    stage_path = next((p for p in files.stages if p.stem == stage_name), None)
    base_files = recipe_test_files(files.recipe, files.root, root_class, files.rel, stage=stage_path, override=override)
    if base_files.conftest is not None:  # the commands take the options the planned conftest.py registers
        planned = recipe_test_options.read_text(base_files.conftest, files.rel(files.recipe / "tests" / "conftest.py"))
        for name, option in repo_text.test_options.options.items():  # the conftest.py files above it still load
            planned.options.setdefault(name, option)
        planned.dynamic += repo_text.test_options.dynamic
        repo_text.test_options = planned
    if "test_smoke.py" in {p.name for p in base_files.files}:
        repo_text.has_smoke_test = True
    facts = {p.stem: stage_facts(_read(p), files.rel(p), p.stem) for p in files.stages}  # as on disk now
    run_name, run_options = run_stage(files, {s: facts[s] for s in acted}, repo_text, stage_name)
    commands = run_commands(
        files, repo_text, run_name, run_options, facts.get(run_name), stage_ranks(facts.get(run_name))
    )

    # 3. stage YAMLs
    for stage in files.stages:
        text = _read(stage)
        y = edit_stage(text, lambda i, s: r.stage_block(i, s, opts.backend, opts.mode), filename=files.rel(stage))
        plan.notes.append(y.note)
        plan.changes.append(FileChange(stage, files.rel(stage), text, y.text))

    # 4. README: every path gets its Compile section (fallbacks document kind, target and reason there too)
    old = _read(files.readme) if files.readme.is_file() else None
    readme_targets = targets if opts.path != "post-wrap" else [target]
    patches = [
        e.call.split("(")[0].rsplit(".", 1)[-1]
        for lgs in ledgers.values()
        for lg in lgs.values()
        for e in lg.of("patch")
    ]
    inside: list[str] = []  # what of the repository's code runs inside the targets, and its compile hazards
    if layout is not None and opts.path != "post-wrap":
        ran, attn = runs_inside(files, layout, readme_targets, model_var, all_ledgers, acted, kept)
        inside = describe(ran, model_var, attn)
        plan.notes.extend(f"inside the compiled targets: {line}" for line in inside)
        patches = [p for p in patches if p not in {x.patch for x in ran.patched}]  # the rest may stay eager
    # the kit class this recipe calls (the one added, or its own): only its regions are the recipe's
    called = kit_import[1] if kit_import else (report.kits[0] if report is not None and report.kits else None)
    if opts.path == "kit":
        scope = kit_scope(model_var, kit_of(kits, called), layout, list(dict.fromkeys(patches)))
    else:
        recipe_kits = [k for k in kits if k.class_name == called]
        around = None
        if layout is not None and opts.path in ("regional", "submodule"):
            compiled = [t[len(model_var) + 1 :] if t.startswith(model_var + ".") else "" for t in readme_targets]
            around = (layout.tree.eager_around(compiled), f"{layout.name} in {layout.source}, {models_of(models)}")
        scope = planned_scope(
            opts.path,
            readme_targets,
            model_var,
            list(dict.fromkeys(patches)),
            present_regions(recipe_kits, model_var, layout),
            around,
        )
    declared = report.config.schema_.fields.get("enabled") if report is not None else None
    # the schema's own default when it declares `enabled` already; else the one generate writes (false)
    default = declared.default_text if declared is not None and declared.present and declared.default_text else "False"
    new, note = edit_readme(
        old or "",
        lambda h: r.readme_section(
            h,
            opts.path,
            readme_targets[0],
            opts.reason or "",
            scope=scope.summary,
            eager=scope.eager,
            commands=commands,
            enabled_default=default,
            line_length=repo_text.line_length,
            targets=readme_targets,
            inside=inside,
        ),
    )
    if new != old:
        plan.notes.append(note)
    plan.changes.append(FileChange(files.readme, files.rel(files.readme), old, new))

    # 5. recipe-local skill tests (never replacing the recipe's own), and its missing base tests
    context = recipe_tests_context(files, opts, targets, first, style, root_class, all_ledgers, r.form)
    rendered = planned_recipe_tests(context, override)
    missing_hooks = missing_parity_hooks(files, first_path, first.class_name)
    if missing_hooks:  # a parity test that calls what the engine lacks would only fail: say so instead
        rendered = {k: v for k, v in rendered.items() if not k.endswith("test_compile_parity.py")}
        plan.notes.append(
            f"parity test not generated: {first.class_name} has no {', '.join(missing_hooks)} (the template's batch "
            "and loss hooks); the impact layer stays missing until the recipe has them (or a parity test of its own)"
        )
    compile_path = requested_path(opts.path)
    for tests in (
        plan_skill_tests(
            files.recipe, rendered, compile_path=compile_path, force=opts.force, root=files.root, rel_of=files.rel
        ),
        base_files,
    ):
        plan.notes.extend(tests.notes)
        plan.changes.extend(FileChange(dest, files.rel(dest), old, new) for dest, (old, new) in tests.files.items())

    # 6. the repository's formatter over the Python files this plan changes
    fmt = Formatter.for_repo(files.root, style)
    py = [(c.path, c.rel, c.old, c.new) for c in plan.changed if c.path.suffix == ".py"]
    formatted, notes = format_changes(fmt, py)
    plan.notes.extend(notes)
    for c in plan.changes:
        c.new = formatted.get(c.path, c.new)

    facts = {s: facts[s] for s in acted}
    if opts.path == "kit":
        texts = {p.name: _read(p) for p in mine}
        defaults = report.config.schema_.defaults if report is not None else None
        suggested = suggest_regional(layout, model_var, kept, all_ledgers, facts, texts, defaults)
        plan.sharding = sharding_notes(files, list(facts), facts, "kit", model_var, suggested)
    if commands["launch"]:
        plan.notes.append(f"run with compile on: {commands['launch']}")
    if commands["tests"]:
        label = (
            "recipe smoke test with compile on"
            if not commands["tests_note"]
            else "recipe smoke test (no option of its tests turns compile on: it compiles only where its stage file "
            "does)"
        )
        plan.notes.append(f"{label}: {commands['tests']}")
        for command in sharded_smoke_commands(files, facts, repo_text):  # where the placement around sharding matters
            plan.notes.append(f"smoke test with compile on in a stage whose mesh shards the model: {command}")
    if commands["tests_note"]:
        plan.notes.append(commands["tests_note"])
    if commands["tests"] and (said := test_override_note(repo_text)):
        plan.notes.append(said)
    plan.snippets.update({k.replace("/", ":"): v for k, v in r.rendered.items()})
    _check_python(plan)
    return plan


def _command(recipe: str, opts: Options) -> str:
    """The generate command as given, without its --target options."""
    parts = ["model-compile generate", shlex.quote(recipe), "--path", opts.path]
    parts += [f"--config-name {shlex.quote(s)}" for s in opts.stages or []]
    if opts.reason:
        parts += ["--reason", shlex.quote(opts.reason)]
    if opts.switch:
        parts.append("--switch")
    return " ".join(parts)


def _check_python(plan: Plan) -> None:
    for c in plan.changed:
        if c.path.suffix == ".py":
            try:
                ast.parse(c.new)
            except SyntaxError as exc:
                raise InputError(f"{c.rel}: the edit would not parse ({exc.msg} at line {exc.lineno})") from exc

"""`model-compile generate`: render kit or fallback compile wiring and apply it as an edit.

Without --write: a unified diff of every file it would change (dry run).
With --write: all edits computed in memory, refused if any file has
uncommitted changes (unless --force), written atomically, then the recipe
is reviewed (soft validation) and the result reported.
A dry run also reviews the planned files in memory ("after this edit, ...").
On a recipe that already compiles through the requested path (and target)
it is a no-op ("already wired"); another path is refused unless --switch.
The recipe's own test files are never replaced (our hooks are merged into its
asserts.py) unless --force.
--target is repeatable (regional, submodule) and takes `CONTAINER.*.NAME` for
that submodule of each block; before writing, the targets are checked against
the model's module tree (generate/planning/structure.py).
With --enable STAGE ... / --disable STAGE ... it edits only those stage YAMLs
of a recipe that already compiles: `model.compile.enabled` (and --backend /
--mode when given; the compile keys added where a stage has none), with the
intent note `# model-compile: enabled - <reason>` on each enabled line; the
output names the smoke command of each stage.
Exit codes: 0 done / nothing to change / dry run, 1 written but soft
validation has error findings, 2 unusable input (nothing written).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from model_compile.errors import InputError
from model_compile.generate.planning.options import Options
from model_compile.vocabulary import BACKENDS, GENERATE_PATHS, MODES

if TYPE_CHECKING:
    from model_compile.generate.planning.plan import Plan


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str, help_text: str) -> None:
    p = sub.add_parser(
        name,
        help=help_text,
        description=help_text,
        epilog="Exit codes: 0 ok or nothing to change, 1 soft validation errors after writing, 2 input error.",
    )
    p.add_argument("recipe", type=Path, help="recipe folder (recipes/<name>)")
    p.add_argument("--path", choices=GENERATE_PATHS, default="kit", help="kit (default) or a documented fallback")
    p.add_argument(
        "--target",
        action="append",
        metavar="ATTR",
        help="what to compile, from the model variable (default: inferred from the model's code): a submodule, the "
        "disabled region (graph-break), a block container (regional), or `CONTAINER.*.NAME` for that submodule of "
        "each block (regional, submodule); repeat --target for several (regional, submodule); quote a `*`",
    )
    p.add_argument("--reason", help="why the fallback is needed (required for fallbacks)")
    p.add_argument("--backend", choices=BACKENDS, help="config default backend (inductor); with --enable: set it")
    p.add_argument("--mode", choices=MODES, help="config default mode (default); with --enable: set it")
    p.add_argument(
        "--enable",
        nargs="+",
        metavar="STAGE",
        default=[],
        help="turn compile on in these stage YAMLs (configs/<STAGE>.yaml) of a recipe that already compiles "
        "(space- or comma-separated); needs --reason (the intent note MC203 asks for)",
    )
    p.add_argument(
        "--disable", nargs="+", metavar="STAGE", default=[], help="turn compile off in these stage YAMLs (as --enable)"
    )
    p.add_argument(
        "--config-name",
        action="append",
        metavar="STAGE",
        help="the stage(s) a --path generate acts on (configs/<STAGE>.yaml; repeatable or comma-separated): their "
        "model, world size, mesh and commands are read (default: every stage; where their models differ it says so)",
    )
    p.add_argument("--write", action="store_true", help="apply the edit (default: print the diff)")
    p.add_argument(
        "--force",
        action="store_true",
        help="write even over files with uncommitted changes, and replace the recipe's own test files",
    )
    p.add_argument(
        "--switch",
        action="store_true",
        help="replace a recipe's existing kit/fallback compile wiring by the requested --path/--target",
    )
    p.add_argument("--templates", type=Path, help="template override folder (missing ones fall back to built-ins)")
    p.add_argument("--format", choices=("diff", "json"), default="diff")
    p.set_defaults(command=name)


def _stage_names(values: list[str]) -> list[str]:
    """`--enable stage2 stage3` and `--enable stage2,stage3` name the same stages."""
    return [name for value in values for name in value.split(",") if name]


def run(args: argparse.Namespace) -> int:
    from model_compile.generate.planning.plan import build_plan
    from model_compile.generate.planning.stage_switch import StageOptions, StagePlan, build_stage_plan
    from model_compile.generate.planning.validate import soft_validate
    from model_compile.generate.writing import apply

    plan: StagePlan | Plan
    if args.enable or args.disable:
        if args.path != "kit" or args.target or args.switch or args.config_name:
            raise InputError(
                "--enable/--disable edit stage YAMLs only (and act on those stages): drop --path, --target, --switch "
                "and --config-name"
            )
        enable, disable = _stage_names(args.enable), _stage_names(args.disable)
        plan = build_stage_plan(
            StageOptions(args.recipe, enable, disable, backend=args.backend, mode=args.mode, reason=args.reason)
        )
    else:
        opts = Options(
            recipe=args.recipe,
            path=args.path,
            target=args.target,
            reason=args.reason,
            backend=args.backend or "inductor",
            mode=args.mode or "default",
            templates=args.templates,
            switch=args.switch,
            force=args.force,
            stages=_stage_names(args.config_name or []) or None,
        )
        plan = build_plan(opts)
    changed = plan.changed
    diffs = {c.rel: apply.unified(c) for c in changed}
    written: list[str] = []
    validation = None
    if args.write and changed:
        dirty = apply.dirty_files(plan)
        if dirty and not args.force:
            raise InputError(f"uncommitted changes in {', '.join(dirty)}; commit or stash them, or pass --force")
        written = apply.write(plan)
    if plan.already_wired:
        validation = None  # nothing planned: the recipe is as it was reviewed
        code = 0
    elif args.write:
        validation = soft_validate(plan.recipe)
        code = 1 if validation.get("errors") else 0
    else:  # dry run: review the planned files without writing them
        validation = soft_validate(plan.recipe, {c.path: c.new for c in changed}) if changed else None
        code = 0

    # the planned review decides whether the repository's wrapper shards block by block (MC407)
    per_block = validation is not None and any(f["rule"] == "MC407" for f in validation.get("findings", []))
    sharding = plan.sharding if per_block else []
    if args.format == "json":
        out = {
            "recipe": str(plan.recipe),
            "path": plan.path_kind,
            "target": plan.target,
            "target_inferred": plan.target_inferred,
            "target_why": plan.target_why,
            "targets": plan.targets,
            "offered_targets": plan.offered,
            "dry_run": not args.write,
            "changed": bool(changed),
            "already_wired": plan.already_wired,
            "written": written,
            "files": [
                {
                    "path": c.rel,
                    "status": "created" if c.old is None else "modified",
                    "hunks": apply.hunks(diffs[c.rel]),
                }
                for c in changed
            ],
            "snippets": plan.snippets,
            "notes": plan.notes,
            "validation": validation,
        }
        out["sharding"] = sharding
        if isinstance(plan, StagePlan):
            out.update({"stages": plan.stages, "smoke_commands": plan.commands})
        json.dump(out, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return code

    for note in plan.notes:
        sys.stderr.write(f"model-compile: {note}\n")
    if plan.already_wired:
        sys.stderr.write("model-compile: already wired: no changes, nothing written\n")
    elif not changed and isinstance(plan, StagePlan):
        sys.stderr.write("model-compile: no changes: those stages already have these values\n")
    elif not changed:
        sys.stderr.write("model-compile: no changes: the recipe already has this compile wiring\n")
    elif not args.write:
        sys.stdout.write("".join(diffs.values()))
    else:
        sys.stdout.write("".join(diffs.values()))
        sys.stderr.write(f"model-compile: wrote {len(written)} file(s): {', '.join(written)}\n")
    if validation is not None:
        sys.stderr.write(f"model-compile: soft validation: {validation['summary']}\n")
        for f in validation.get("findings", []):
            sys.stderr.write(f"  {f['severity']} {f['rule']} {f['file']}:{f['line']} {f['message']}\n")
    for note in sharding:
        sys.stderr.write(f"model-compile: {note}\n")
    if isinstance(plan, StagePlan):
        if plan.commands:
            when = "after --write, " if not args.write else ""
            sys.stderr.write(f"model-compile: {when}smoke test of each enabled stage:\n")
            for command in plan.commands:
                sys.stderr.write(f"  {command}\n")
        elif plan.stages and any(v == "enabled" for v in plan.stages.values()):
            sys.stderr.write(f"model-compile: {plan.recipe.name} has no tests/test_smoke.py: no smoke command to run\n")
    if changed:
        _rehearsal_hint(str(args.recipe), plan.stages if isinstance(plan, StagePlan) else None, args.write)
    return code


def _rehearsal_hint(recipe: str, stages: dict[str, str] | None, written: bool) -> None:
    """generate reviews statically only: the command that tries compile here, on a tiny model, per enabled stage
    (`stages`: what a stage edit did to each stage; None for a wiring edit)."""
    enabled = [name for name, value in (stages or {}).items() if value == "enabled"]
    if stages and not enabled:
        return  # only --disable: nothing compiles more than before
    base = f"model-compile rehearse {shlex.quote(recipe)}"
    commands = [f"{base} --config-name {shlex.quote(s)}" for s in enabled] if enabled else [base]
    when = "" if written else "after --write (it runs the files on disk), "
    sys.stderr.write(
        f"model-compile: not run by generate: {when}the rehearsal (a tiny model of the recipe's architecture, eager "
        "vs compiled, on this machine, no weights or GPUs): " + " ; ".join(commands) + "\n"
    )

"""`model-compile review [PATH]`: the Output report in one command.

Scope: a git change (working tree vs HEAD, or the branch vs its merge base
with the default branch, or --base/--head) reviews the recipes it touches;
without a change, or outside git, every recipe under PATH. Soft validation
always; hard validation (runtime layers) with --hard. Exit codes: 1 the
change introduces an error finding (tree: any error finding), or with --hard
a runtime layer fails; 0 otherwise; 2 bad input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from model_compile.errors import InputError

FORMATS = ("markdown", "text", "json", "sarif", "github")


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str, help_text: str) -> None:
    """Register `review`."""
    p = sub.add_parser(
        name,
        help=help_text,
        description=help_text,
        epilog="Exit codes: 0 no new error finding (and no failed layer), 1 error findings introduced or a "
        "runtime layer failed, 2 unusable input.",
    )
    p.add_argument(
        "path", metavar="PATH", nargs="?", default=".", help="repository root or one recipe folder (default: .)"
    )
    p.add_argument(
        "--base",
        metavar="REV",
        help="base revision (default: HEAD when the working tree has uncommitted changes, else the merge base of HEAD with the default branch: origin/HEAD, main or master; the report's notes say which)",
    )
    p.add_argument("--head", metavar="REV", help="head revision (default: the working tree)")
    p.add_argument("--hard", action="store_true", help="also run the runtime layers (structure, smoke, impact)")
    p.add_argument(
        "--python", metavar="PATH", help="interpreter of the repository's environment for the runtime layers"
    )
    p.add_argument("--trace", action="store_true", help="with --hard: record TORCH_TRACE in the smoke run")
    p.add_argument(
        "--config-override",
        action="append",
        default=[],
        metavar="K=V",
        help="with --hard: set a key of each rehearsed stage config, as the recipe's launcher does (OmegaConf "
        "dotlist; repeatable; a key the config lacks is refused)",
    )
    p.add_argument(
        "--model-config",
        action="append",
        default=[],
        metavar="[NAME=]PATH",
        help="with --hard: a config.json the rehearsal builds a model from: a bare PATH for the stage's main "
        "model, NAME=PATH for a model a recipe loads by NAME that is not on this machine (repeatable)",
    )
    p.add_argument(
        "--config-name",
        metavar="STAGE",
        help="with --hard: the stage config the runtime layers run, without .yaml (the rehearsal takes it as "
        "`rehearse --config-name` does, the smoke as `validate --hard --config-name`); default: the stage each "
        "recipe's rehearsal chooses (the first that enables compile, else the heaviest wrap and data regime)",
    )
    p.add_argument(
        "--format",
        choices=FORMATS,
        default="markdown",
        help="markdown (default; PR comments, --out), text (compact: terminals and agents), json, sarif, github",
    )
    p.add_argument("--out", metavar="DIR", help="also write every format (and trace summaries) into DIR")
    p.set_defaults(command=name)


def run(args: argparse.Namespace) -> int:
    """Review PATH and print the report."""
    from model_compile.hard.rehearsal.command import Options, check
    from model_compile.hard.rehearsal.planning.overrides import model_config_options
    from model_compile.report.render import emit, write_all
    from model_compile.report.run import review_path

    if args.trace and not args.hard:
        raise InputError("--trace needs --hard")
    if args.config_name is not None and not args.hard:
        raise InputError("--config-name needs --hard (it names the stage the runtime layers run)")
    if args.config_name is not None and (not args.config_name or "/" in args.config_name):
        raise InputError(f"--config-name {args.config_name!r}: give a stage name, e.g. train (configs/train.yaml)")
    if (args.config_override or args.model_config) and not args.hard:
        raise InputError("--config-override and --model-config need --hard (they shape the runtime layers)")
    bare, named = model_config_options(list(args.model_config or []))
    runtime = Options(model_config=bare, model_configs=named, config_overrides=list(args.config_override or []))
    check(runtime)
    out = Path(args.out) if args.out else None
    if out is not None and out.exists() and not out.is_dir():
        raise InputError(f"--out {out}: not a directory")
    report = review_path(
        Path(args.path),
        base=args.base,
        head=args.head,
        hard=args.hard,
        python=args.python,
        trace=args.trace,
        out=out.resolve() if out else None,
        config_name=args.config_name,
        runtime=runtime,
    )
    if out is not None:
        written = write_all(report, out)
        sys.stderr.write(f"model-compile: wrote {', '.join(str(p) for p in written)}\n")
    sys.stdout.write(emit(report, args.format))
    return report.exit_code

"""`model-compile validate [--soft] [--hard] PATH`.

Soft validation is static: nothing from the target repository is imported
or executed, and torch is not imported. Hard validation runs the recipe's
own tests with compile enabled (see `model_compile.hard`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str, help_text: str) -> None:
    p = sub.add_parser(name, help=help_text, description=help_text)
    p.add_argument("path", metavar="PATH", help="repository root (recipes/ inside) or one recipe folder")
    p.add_argument("--soft", action="store_true", help="static review (the default)")
    p.add_argument("--hard", action="store_true", help="runtime layers: structure, smoke with compile on, impact")
    p.add_argument("--recipe", help="only this recipe (folder name under recipes/)")
    p.add_argument("--format", choices=["text", "json", "markdown", "sarif", "github"], default="text")
    hard = p.add_argument_group("hard validation")
    hard.add_argument("--config-name", help="stage config to run, without .yaml")
    hard.add_argument("--world-size", type=int, help="distributed world size for the smoke layer")
    hard.add_argument(
        "--config-override",
        action="append",
        default=[],
        metavar="K=V",
        help="set a key of the stage config for the smoke layer and the rehearsal (repeatable; a key the config "
        "lacks is refused)",
    )
    hard.add_argument(
        "--model-config",
        action="append",
        default=[],
        metavar="[NAME=]PATH",
        help="a config.json the rehearsal builds a model from: a bare PATH for the stage's main model, NAME=PATH "
        "for a model the recipe loads by NAME that is not on this machine (repeatable)",
    )
    hard.add_argument("--timeout", type=float, default=1800.0, help="seconds per layer (default 1800)")
    hard.add_argument(
        "--python",
        metavar="PATH",
        help="interpreter for the recipe's tests (default: the repo's .venv/ or venv/, else an active env, else this one)",
    )
    hard.add_argument(
        "--require-complete", action="store_true", help="exit 1 when the verdict is 'incomplete' (default: 0)"
    )
    hard.add_argument("--trace", action="store_true", help="also render tlparse's HTML report of the TORCH_TRACE")
    hard.add_argument(
        "--no-rehearsal",
        action="store_true",
        help="list the rehearsal layer (tiny model, eager vs compiled) as not run instead of running it",
    )
    hard.add_argument("--backend", help="compile backend of the rehearsal (default: the stage's; aot_eager on CPU)")
    hard.add_argument("--out", metavar="DIR", help="where hard validation keeps logs, JUnit XML and runtime JSON")
    p.set_defaults(command=name)


def run(args: argparse.Namespace) -> int:
    from model_compile.analyze import analyze_path
    from model_compile.render import emit_report

    if args.hard:
        return run_hard(args)
    report = analyze_path(Path(args.path), recipe=args.recipe)
    sys.stdout.write(emit_report(report, args.format, title="model-compile validate --soft"))
    return report.exit_code


def run_hard(args: argparse.Namespace) -> int:
    """`validate --hard`: check the options, run the layers, print the report and keep report.json."""
    from model_compile.errors import InputError
    from model_compile.hard.layers import interrupt, render
    from model_compile.hard.layers.runner import validate_hard
    from model_compile.hard.rehearsal.planning.overrides import model_config_options

    bare, named = model_config_options(list(getattr(args, "model_config", None) or []))
    fmt = getattr(args, "format", "text")
    if fmt not in ("text", "json", "markdown"):
        raise InputError(f"--hard supports --format text, json or markdown (not {fmt})")
    with interrupt.on_signals(fmt) as run:  # SIGINT/SIGTERM/SIGHUP: groups ended, partial report written
        report = validate_hard(
            Path(args.path),
            recipe=getattr(args, "recipe", None),
            config_name=getattr(args, "config_name", None),
            world_size=getattr(args, "world_size", None),
            overrides=list(getattr(args, "config_override", None) or []),
            timeout_s=float(getattr(args, "timeout", 1800.0) or 1800.0),
            trace=bool(getattr(args, "trace", False)),
            out=Path(args.out) if getattr(args, "out", None) else None,
            python=getattr(args, "python", None),
            require_complete=bool(getattr(args, "require_complete", False)),
            rehearsal=not bool(getattr(args, "no_rehearsal", False)),
            backend=getattr(args, "backend", None),
            model_config=bare,
            model_configs=named,
        )
    if run.interrupted:
        return run.exit_code
    text = render.emit(report, fmt)
    sys.stdout.write(text)
    out = Path(report.out_dir)
    (out / "report.json").write_text(report.model_dump_json(indent=2))
    return report.exit_code

"""`model-compile inspect PATH`: the ledger and config facts of each recipe."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str, help_text: str) -> None:
    p = sub.add_parser(name, help=help_text, description=help_text)
    p.add_argument("path", metavar="PATH", help="repository root (recipes/ inside) or one recipe folder")
    p.add_argument("--recipe", help="only this recipe")
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.set_defaults(command=name)


def run(args: argparse.Namespace) -> int:
    from model_compile.analyze import analyze_path
    from model_compile.render import emit_inspect

    report = analyze_path(Path(args.path), recipe=args.recipe)
    sys.stdout.write(emit_inspect(report, args.format))
    return 0

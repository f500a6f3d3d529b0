"""`model-compile install-skill REPO [--dest PATH] [--force]`: copy the skill tree into a repository."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str, help_text: str) -> None:
    """Register `install-skill`."""
    p = sub.add_parser(
        name,
        help=help_text,
        description=help_text + " Idempotent; refuses to overwrite local edits without --force.",
        epilog="Exit codes: 0 installed or already current, 2 unusable input or local edits in the way (nothing written).",
    )
    p.add_argument("repo", metavar="REPO", type=Path, help="the repository to install into")
    p.add_argument(
        "--dest",
        metavar="PATH",
        type=Path,
        help="skill folder, relative to REPO (default: next to REPO's other skills, e.g. skills/<group>/model-compile)",
    )
    p.add_argument("--force", action="store_true", help="overwrite files edited since they were installed")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.set_defaults(command=name)


def run(args: argparse.Namespace) -> int:
    """Install and say what changed."""
    from model_compile.skillpack import install

    result = install(args.repo, args.dest, force=args.force)
    if args.format == "json":
        data = {
            "dest": str(result.dest),
            "created": result.created,
            "updated": result.updated,
            "unchanged": result.unchanged,
            "overwritten": result.overwritten,
            "kept": result.kept,
        }
        sys.stdout.write(json.dumps(data, indent=2) + "\n")
        return 0
    changed = len(result.created) + len(result.updated) + len(result.overwritten)
    head = f"installed the model-compile skill into {result.dest}" if changed else f"{result.dest}: already current"
    sys.stdout.write(head + "\n")
    for title, items in (
        ("created", result.created),
        ("updated", result.updated),
        ("overwritten (--force)", result.overwritten),
        ("kept (not shipped by the skill)", result.kept),
    ):
        for rel in items:
            sys.stdout.write(f"  {title}: {rel}\n")
    if result.unchanged and changed:
        sys.stdout.write(f"  unchanged: {len(result.unchanged)} file(s)\n")
    return 0

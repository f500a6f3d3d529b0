"""`model-compile diff [REPO] [--base REV] [--head REV]`: review what a git change does to compile wiring.

Default head: the working tree (staged, unstaged, untracked). Default base:
HEAD when the tree is dirty, else the merge base of HEAD with the default
branch (pull-request semantics). Only recipes the change touches are
analysed (every kit recipe when the shared kit changes). Exit 1 only when
the change introduces an error finding.
"""

from __future__ import annotations

import argparse
import sys


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str, help_text: str) -> None:
    p = sub.add_parser(
        name,
        help=help_text,
        description=help_text,
        epilog="Exit codes: 0 no new error finding, 1 the change introduces an error finding, 2 unusable input.",
    )
    p.add_argument("repo", metavar="REPO", nargs="?", default=".", help="path inside the git repository (default: .)")
    p.add_argument(
        "--base",
        metavar="REV",
        help="base revision (default: HEAD when the working tree has uncommitted changes, else the merge base of HEAD with the default branch: origin/HEAD, main or master; the report's notes say which)",
    )
    p.add_argument("--head", metavar="REV", help="head revision (default: the working tree)")
    p.add_argument("--format", choices=["text", "json", "markdown"], default="text")
    p.add_argument("--all-findings", action="store_true", help="also list findings the change leaves unchanged")
    p.set_defaults(command=name)


def run(args: argparse.Namespace) -> int:
    from model_compile.review.render import render_markdown, render_text
    from model_compile.review.run import review

    report = review(args.repo, base=args.base, head=args.head)
    if args.format == "json":
        if not args.all_findings:  # the key stays (stable contract); the count is in unchanged_count
            report = report.model_copy(update={"unchanged": []})
        sys.stdout.write(report.model_dump_json(indent=2, by_alias=True) + "\n")
    elif args.format == "markdown":
        sys.stdout.write(render_markdown(report, all_findings=args.all_findings))
    else:
        sys.stdout.write(render_text(report, all_findings=args.all_findings))
    return report.exit_code

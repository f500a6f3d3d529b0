"""`model-compile schema [soft|review]`: the JSON Schema of a report (the stable contract)."""

from __future__ import annotations

import argparse
import json
import sys


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str, help_text: str) -> None:
    """Register `schema`."""
    p = sub.add_parser(name, help=help_text, description=help_text)
    p.add_argument(
        "report",
        nargs="?",
        choices=("soft", "review"),
        default="soft",
        help="soft: inspect / validate --soft (default, references/report.schema.json); "
        "review: the review report (references/review.schema.json)",
    )
    p.set_defaults(command=name)


def run(args: argparse.Namespace) -> int:
    """Print the schema."""
    if getattr(args, "report", "soft") == "review":
        from model_compile.report.models import ReviewReport

        schema = ReviewReport.model_json_schema()
    else:
        from model_compile.findings.models import Report

        schema = Report.model_json_schema(by_alias=True)
    sys.stdout.write(json.dumps(schema, indent=2) + "\n")
    return 0

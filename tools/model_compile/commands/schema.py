"""`model-compile schema`: the JSON Schema of the report (the stable contract)."""

from __future__ import annotations

import json
import sys


def add_parser(sub, name: str, help_text: str) -> None:
    p = sub.add_parser(name, help=help_text, description=help_text)
    p.set_defaults(command=name)


def run(args) -> int:
    from model_compile.findings.models import Report

    sys.stdout.write(json.dumps(Report.model_json_schema(by_alias=True), indent=2) + "\n")
    return 0

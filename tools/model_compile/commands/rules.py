"""`model-compile rules [ID] [--format text|json|markdown]`: the rule catalogue."""

from __future__ import annotations

import argparse
import json
import sys


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str, help_text: str) -> None:
    p = sub.add_parser(name, help=help_text, description=help_text)
    p.add_argument("rule", nargs="?", help="one rule id, e.g. MC404")
    p.add_argument("--format", choices=["text", "json", "markdown"], default="text")
    p.set_defaults(command=name)


def run(args: argparse.Namespace) -> int:
    from model_compile.errors import InputError
    from model_compile.render.rules_doc import rules_markdown
    from model_compile.rules import ALL_RULES, RULES_BY_ID

    rules = ALL_RULES
    if args.rule:
        if args.rule.upper() not in RULES_BY_ID:
            raise InputError(f"unknown rule {args.rule!r} (known: {', '.join(RULES_BY_ID)})")
        rules = [RULES_BY_ID[args.rule.upper()]]
    if args.format == "json":
        data = [
            {
                "id": r.id,
                "severity": r.severity,
                "title": r.title,
                "what": r.what,
                "why": r.why,
                "example": r.example,
                "use_instead": r.use_instead,
                "fix": r.fix,
            }
            for r in rules
        ]
        sys.stdout.write(json.dumps(data, indent=2) + "\n")
    elif args.format == "markdown":
        sys.stdout.write(rules_markdown(rules))
    else:
        for r in rules:
            sys.stdout.write(f"{r.id}  {r.severity:<7}  {r.title}\n")
            if args.rule:
                sys.stdout.write(
                    f"\n{r.what}\n\nWhy: {r.why}\n\nExample:\n{r.example}\n\nUse instead:\n{r.use_instead}\n"
                )
    return 0

"""`model-compile rehearse RECIPE`: the recipe's own prepare_model() on a tiny model, eager twin vs compiled.

Runs in the repository's own interpreter (like `validate --hard`); prints the
rehearsal table (text) or its JSON. Exit codes: 0 passed, 1 failed or timed
out, 0 not-run (the reason says why; 1 with --require-complete), 2 bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str, help_text: str) -> None:
    p = sub.add_parser(name, help=help_text, description=help_text)
    p.add_argument("path", metavar="RECIPE", help="one recipe folder")
    p.add_argument(
        "--config-name", help="stage config to rehearse, without .yaml (default: the first that enables compile)"
    )
    p.add_argument(
        "--python",
        metavar="PATH",
        help="the repository's interpreter (default: its .venv/ or venv/, else an active env)",
    )
    p.add_argument(
        "--backend", help="compile backend (default: the stage's; aot_eager on CPU when the stage says inductor)"
    )
    p.add_argument("--steps", type=int, default=10, help="steps, each with another shape (default 10)")
    p.add_argument(
        "--model-config", metavar="PATH", help="a config.json of the architecture, when its name is not recognised"
    )
    p.add_argument("--timeout", type=float, default=900.0, help="seconds for the whole rehearsal (default 900)")
    p.add_argument("--out", metavar="DIR", help="where the spec, the record, the log and the trace go")
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.add_argument("--require-complete", action="store_true", help="exit 1 when the rehearsal could not run")
    p.set_defaults(command=name)


def run(args: argparse.Namespace) -> int:
    from model_compile.hard.rehearsal.command import Options, standalone
    from model_compile.hard.rehearsal.render import text

    options = Options(
        config_name=args.config_name,
        backend=args.backend,
        steps=int(args.steps),
        model_config=Path(args.model_config) if args.model_config else None,
        timeout_s=float(args.timeout),
    )
    facts, environment, command = standalone(
        Path(args.path), args.python, options, Path(args.out) if args.out else None
    )
    if args.format == "json":
        data = {
            "tool": "model-compile",
            "command": "rehearse",
            "rerun": command,
            "environment": environment.model_dump(),
            **facts.model_dump(),
        }
        sys.stdout.write(json.dumps(data, indent=2) + "\n")
    code = 1 if facts.status in ("failed", "timeout") or (facts.status != "passed" and args.require_complete) else 0
    if args.format != "json":
        # The verdict again as the last line: an agent reading the tail of a long run sees it too.
        sys.stdout.write(text(facts, command) + f"rehearsal {facts.status} [{facts.label}]; exit {code}\n")
    return code

"""`model-compile` command line.

Exit codes (stable): 0 no error finding / success; 1 error findings (or a
failed hard-validation layer, or a diff that introduces an error); 2 usage or
input error, reported as one line on stderr.

Each subcommand lives in `model_compile.commands.<name>` with
`add_parser(subparsers)` and `run(args) -> int`, imported only when chosen so
`--help` and the static commands stay fast (torch is never imported here).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import NoReturn

from model_compile import __version__

COMMANDS = {
    "inspect": "Show the compile ledger and config facts of each recipe.",
    "validate": "Soft (static) and/or hard (runtime) validation of compile wiring.",
    "generate": "Generate kit or fallback compile wiring from templates and apply it as an edit.",
    "diff": "Review what a git change does to compile wiring.",
    "rehearse": "Run the recipe's own prepare_model() on a tiny model of its architecture: eager twin vs compiled.",
    "review": "The Output report: scope, verdict, compile path, placement, validation, performance, findings.",
    "rules": "List the rules, or print their documentation.",
    "schema": "Print the JSON Schema of the report.",
    "install-skill": "Copy the model-compile skill (SKILL.md, references/) into a repository.",
}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2
        sys.stderr.write(f"model-compile: error: {message}\n")
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="model-compile",
        description="Add, review, update and validate torch.compile wiring in recipe-based training repos.",
        epilog="Exit codes: 0 ok, 1 error findings or failed validation, 2 usage or input error.",
    )
    parser.add_argument("--version", action="version", version=f"model-compile {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, help_text in COMMANDS.items():
        module = importlib.import_module(f"model_compile.commands.{name.replace('-', '_')}")
        module.add_parser(sub, name, help_text)
    return parser


def main(argv: list[str] | None = None) -> int:
    from model_compile.errors import InputError

    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help()
        return 2
    module = importlib.import_module(f"model_compile.commands.{args.command.replace('-', '_')}")
    try:
        return module.run(args)
    except InputError as exc:
        sys.stderr.write(f"model-compile: error: {exc}\n")
        return 2
    except KeyboardInterrupt:
        sys.stderr.write("model-compile: interrupted\n")
        return 130
    except BrokenPipeError:
        return 0
    except RecursionError:  # input nested beyond what a parser or visitor handles
        if os.environ.get("MODEL_COMPILE_DEBUG"):
            raise
        _say("model-compile: error: input nested too deeply to analyse (RecursionError); nothing was written")
        return 2
    except MemoryError:
        _say("model-compile: error: out of memory (MemoryError); nothing was written")
        return 2
    except OSError as exc:  # a path the user gave that cannot be reached (permissions, a vanished folder)
        if os.environ.get("MODEL_COMPILE_DEBUG"):
            raise
        where = f"{exc.filename}: " if exc.filename else ""
        _say(f"model-compile: error: {where}{exc.strerror or _describe(exc)}")
        return 2
    except Exception as exc:  # a bug: still one line, never a traceback (MODEL_COMPILE_DEBUG=1 shows it)
        if os.environ.get("MODEL_COMPILE_DEBUG"):
            raise
        _say(
            f"model-compile: internal error: {_describe(exc)} "
            "(rerun with MODEL_COMPILE_DEBUG=1 for the traceback, and please report it)"
        )
        return 2


def _describe(exc: BaseException) -> str:
    """`Type: message`, one line and short; never raises (a broken __str__ is reported as such)."""
    name = type(exc).__name__
    try:
        text = " ".join(str(exc).split())
    except BaseException:  # noqa: BLE001 - the handler itself must not fail
        return f"{name} (its message could not be formatted)"
    return f"{name}: {text[:300]}" + ("..." if len(text) > 300 else "")


def _say(line: str) -> None:
    """Write one line to stderr, ignoring a closed stream."""
    try:
        sys.stderr.write(line + "\n")
    except (OSError, ValueError):
        pass


if __name__ == "__main__":
    raise SystemExit(main())

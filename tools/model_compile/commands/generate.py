"""`model-compile generate` (not implemented yet)."""

from __future__ import annotations

from model_compile.discover.tree import InputError


def add_parser(sub, name: str, help_text: str) -> None:
    p = sub.add_parser(name, help=help_text, description=help_text)
    p.set_defaults(command=name)


def run(args) -> int:
    raise InputError("'generate' is not implemented yet")

"""`model-compile rehearse RECIPE`: the recipe's own prepare_model() on a tiny model, eager twin vs compiled.

Runs in the repository's own interpreter (like `validate --hard`); prints the
rehearsal table (text) or its JSON. Exit codes: 0 passed, 1 failed or timed
out (or anything but passed with --require-complete), 2 bad input, 3 not run
(the reason says why) or a fault of model-compile itself (status tool-error).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
from collections.abc import Iterator
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
    p.add_argument("--steps", type=int, default=8, help="optimizer steps of the recipe's own training loop (default 8)")
    p.add_argument(
        "--world-size",
        type=int,
        help="CPU ranks (gloo); default 2 when the stage's mesh shards or replicates over more than one rank, else 1",
    )
    p.add_argument(
        "--model-config",
        metavar="[NAME=]PATH",
        action="append",
        default=[],
        help="a config.json the rehearsal builds a model from (shrunk, never the real weights): a bare PATH for the "
        "stage's main model, NAME=PATH for any model the recipe loads by NAME (a hub id, a cluster path, a local "
        "folder) that is not on this machine; repeatable",
    )
    p.add_argument(
        "--config-override",
        metavar="K=V",
        action="append",
        default=[],
        help="set a key of the stage config, as the recipe's launcher does (OmegaConf dotlist); repeatable; a key "
        "the config lacks is refused",
    )
    p.add_argument(
        "--base",
        metavar="REV",
        help="rehearse REV too (a temporary git worktree, the same interpreter; cached by its tree) and mark "
        "each measure new with the change or already there",
    )
    p.add_argument("--timeout", type=float, default=900.0, help="seconds for the whole rehearsal (default 900)")
    p.add_argument("--out", metavar="DIR", help="where the spec, the record, the log and the trace go")
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.add_argument("--require-complete", action="store_true", help="exit 1 when the rehearsal could not run")
    p.set_defaults(command=name)


@contextlib.contextmanager
def _signals_interrupt() -> Iterator[None]:
    """SIGTERM and SIGHUP end a rehearsal the way Ctrl-C does: its ranks' process groups are ended, none outlives it."""

    def interrupt(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt(signal.Signals(signum).name)

    names = [n for n in ("SIGTERM", "SIGHUP") if hasattr(signal, n)]
    previous = {n: signal.getsignal(getattr(signal, n)) for n in names}
    for n in names:
        if previous[n] is not signal.SIG_IGN:
            signal.signal(getattr(signal, n), interrupt)
    try:
        yield
    finally:
        for n in names:
            signal.signal(getattr(signal, n), previous[n])


def exit_code(status: str, require_complete: bool) -> int:
    """0 passed; 1 failed or timed out; 3 not run (the reason says why) or a tool error: an agent cannot take a
    rehearsal that did not run for one that passed. With --require-complete a run that did not pass exits 1."""
    if status == "passed":
        return 0
    if status in ("failed", "timeout") or require_complete:
        return 1
    return 3


def run(args: argparse.Namespace) -> int:
    from model_compile.hard.rehearsal.command import Options, standalone
    from model_compile.hard.rehearsal.planning.overrides import model_config_options
    from model_compile.hard.rehearsal.render import text

    bare, named = model_config_options(list(args.model_config or []))
    options = Options(
        config_name=args.config_name,
        backend=args.backend,
        steps=int(args.steps),
        model_config=bare,
        model_configs=named,
        config_overrides=list(args.config_override or []),
        timeout_s=float(args.timeout),
        world_size=args.world_size,
        base=args.base,
    )
    with _signals_interrupt():
        try:
            facts, environment, command = standalone(
                Path(args.path), args.python, options, Path(args.out) if args.out else None
            )
        except KeyboardInterrupt as exc:
            sys.stderr.write(
                f"model-compile rehearse: interrupted ({str(exc) or 'SIGINT'}); every process group it started was ended\n"
            )
            return 130
    if args.format == "json":
        data = {
            "tool": "model-compile",
            "command": "rehearse",
            "rerun": command,
            "environment": environment.model_dump(),
            **facts.model_dump(),
        }
        sys.stdout.write(json.dumps(data, indent=2) + "\n")
    code = exit_code(facts.status, args.require_complete)
    if args.format != "json":
        # The verdict again as the last line: an agent reading the tail of a long run sees it too.
        sys.stdout.write(text(facts, command) + f"rehearsal {facts.status} [{facts.label}]; exit {code}\n")
    return code

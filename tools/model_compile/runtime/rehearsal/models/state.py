"""The child's model hooks' shared state: what was loaded, built and shrunk, and the errors that say a model
cannot be had here. `intercept.py` (the hooks) and `stand_in.py` (the checkpoints they answer with) both read it;
neither imports the other's module for it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from model_compile.runtime.rehearsal.record import NotHere


class ModelConfigMissing(NotHere):
    """A model the recipe loads by a name whose config is not on this machine, and that the rehearsal cannot
    stand in for: the stand-in's config is missing (supplied with --model-config)."""

    fault = "stand-in"
    part = "config"


class StandInRefused(NotHere):
    """The recipe's own call could not load the stand-in the rehearsal made for it (its class, config or files do
    not fit what the call accepts): the stand-in's failure, never the recipe's."""

    fault = "stand-in"
    part = "model"


STATE: dict[str, Any] = {
    "spec": {},
    "loads": [],  # {"class", "kind", "name", "to", "source"}
    "built": [],  # {"ref": weakref, "class", "config", "shrunk", "source"}
    "objects": [],  # {"object", "shrunk"}: recipe config objects shrunk for a repository module
    "suspended": 0,  # > 0 while the rehearsal builds a stand-in itself (nothing recorded, nothing shrunk)
    "depth": 0,  # repository module constructions in progress
    "depth_load": 0,  # from_pretrained calls in progress (the loads inside one are not listed again)
    "stand_ins": {},  # name -> {"dir", "source"}
    "installed": False,
    "wide": None,  # the reference twin: the dtype its stand-ins' weights are read in
}


def out_dir() -> str:
    return str(Path(STATE["spec"].get("out_dir", "/nonexistent")).resolve())


class TinyModelRefused(NotHere):
    """A model whose own code refuses every tiny width the rehearsal tries: not run, the stand-in's limit."""

    fault = "stand-in"
    part = "model"


class suspended:  # noqa: N801 - a context manager used like a function
    """The rehearsal builds something itself: nothing is shrunk or recorded meanwhile."""

    def __enter__(self) -> None:
        STATE["suspended"] += 1

    def __exit__(self, *_: Any) -> None:
        STATE["suspended"] -= 1


def unfit_checkpoint(exc: Exception, repo: str | None) -> Exception:
    """A tiny checkpoint that its model's own code (or transformers) refused to build from the config read: the
    stand-in's config, not model-compile's code (which only called it); `exc` itself where model-compile's frame
    raised."""
    from model_compile.runtime.rehearsal.blame import raised_in
    from model_compile.runtime.rehearsal.record import short_error

    if (raised_in(exc, repo).get("innermost") or {}).get("kind") == "tool":
        return exc
    return StandInRefused(
        f"the tiny checkpoint's model could not be built from the config the rehearsal read ({short_error(exc)}): "
        "that config does not fit its model's code; supply the model's real config.json (and code) with "
        "--model-config NAME=PATH"
    )

"""What the user asked `generate` for, validated once."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from model_compile.compile_config import BACKENDS, MODES
from model_compile.discover.tree import InputError

PATHS = ("kit", "submodule", "graph-break", "post-wrap", "regional")
FALLBACKS = PATHS[1:]
# Where prepare_model() reads the compile section (the repo convention).
CONFIG_EXPR = "self.config.model.compile"


@dataclass
class Options:
    recipe: Path
    path: str = "kit"
    target: str | None = None
    reason: str | None = None
    backend: str = "inductor"
    mode: str = "default"
    templates: Path | None = None

    def check(self) -> None:
        if not self.recipe.is_dir():
            raise InputError(f"recipe folder not found: {self.recipe}")
        if self.path not in PATHS:
            raise InputError(f"--path must be one of {', '.join(PATHS)}")
        if self.backend not in BACKENDS:
            raise InputError(f"--backend must be one of {', '.join(BACKENDS)}")
        if self.mode not in MODES:
            raise InputError(f"--mode must be one of {', '.join(MODES)}")
        if self.path in FALLBACKS:
            reason = (self.reason or "").strip()
            if len(reason.split()) < 3:
                raise InputError(
                    f"--path {self.path} is a fallback: pass --reason with why the kit does not fit (3+ words)"
                )
            if "\n" in reason:
                raise InputError("--reason must be one line")
            self.reason = reason
        if self.target is not None and not _dotted(self.target):
            raise InputError(f"--target must be a dotted attribute path, got {self.target!r}")
        if self.templates is not None and not self.templates.is_dir():
            raise InputError(f"--templates folder not found: {self.templates}")

    @property
    def fallback(self) -> bool:
        return self.path in FALLBACKS


def _dotted(text: str) -> bool:
    parts = text.split(".")
    return all(p.isidentifier() for p in parts)

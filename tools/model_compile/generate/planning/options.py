"""What the user asked `generate` for, validated once."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from model_compile.errors import InputError
from model_compile.vocabulary import BACKENDS, FALLBACK_KINDS, GENERATE_PATHS, MODES

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
    switch: bool = False  # replace an existing kit/fallback wiring by another one
    force: bool = False  # overwrite the recipe's own test files too

    def check(self) -> None:
        if not self.recipe.is_dir():
            raise InputError(f"recipe folder not found: {self.recipe}")
        if self.path not in GENERATE_PATHS:
            raise InputError(f"--path must be one of {', '.join(GENERATE_PATHS)}")
        if self.backend not in BACKENDS:
            raise InputError(f"--backend must be one of {', '.join(BACKENDS)}")
        if self.mode not in MODES:
            raise InputError(f"--mode must be one of {', '.join(MODES)}")
        if self.path in FALLBACK_KINDS:
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
        return self.path in FALLBACK_KINDS


def _dotted(text: str) -> bool:
    parts = text.split(".")
    return all(p.isidentifier() for p in parts)

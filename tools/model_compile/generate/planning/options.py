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
    target: list[str] | None = None  # one or more (repeated --target)
    reason: str | None = None
    backend: str = "inductor"
    mode: str = "default"
    templates: Path | None = None
    switch: bool = False  # replace an existing kit/fallback wiring by another one
    force: bool = False  # overwrite the recipe's own test files too
    stages: list[str] | None = None  # --config-name: the stages acted on (default: every stage of the recipe)

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
        for target in self.target or []:
            if not _dotted(target):
                raise InputError(
                    f"--target must be a dotted attribute path (`*` for each block of a container, as in "
                    f"model.layers.*.self_attn), got {target!r}"
                )
            if "*" in target.split(".") and self.path not in ("regional", "submodule"):
                raise InputError(f"--path {self.path} takes one module, not `*` (each block): got {target!r}")
        if self.target and len(self.target) > 1 and self.path not in ("regional", "submodule"):
            raise InputError(f"--path {self.path} takes one --target; several are for --path regional or submodule")
        if self.target and len(set(self.target)) != len(self.target):
            raise InputError("--target: the same target is given twice")
        if self.templates is not None and not self.templates.is_dir():
            raise InputError(f"--templates folder not found: {self.templates}")

    @property
    def fallback(self) -> bool:
        return self.path in FALLBACK_KINDS


def _dotted(text: str) -> bool:
    """`model.visual`, or with one `*` segment after the first: `model.layers.*` or `model.layers.*.self_attn`."""
    parts = text.split(".")
    stars = [i for i, p in enumerate(parts) if p == "*"]
    return len(stars) <= 1 and all(i > 0 for i in stars) and all(p.isidentifier() or p == "*" for p in parts)

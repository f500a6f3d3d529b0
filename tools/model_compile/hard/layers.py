"""The layers of hard validation: which file each runs and with which options."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

# Output of a smoke helper that refuses to run without an accelerator.
ACCELERATOR_REFUSAL = re.compile(
    r"require[sd]? (?:a )?(?:GPUs?|NPUs?|GPUs/NPUs|accelerators?)|CUDA is not available|no (?:GPU|CUDA|accelerator)[^\n]*(?:found|available)",
    re.IGNORECASE,
)

COMPILE_ON = "model.compile.enabled=true"
SKILL_DIR = Path("tests") / "skills" / "model-compile"


@dataclass
class LayerSpec:
    name: str
    test_file: Path  # relative to the recipe root
    options: list[str] = field(default_factory=list)
    required: bool = True
    generate_hint: str = ""


def generate_command(recipe_root: Path, compile_path: str | None) -> str:
    """The `generate` call that writes the recipe's model-compile tests for its compile path."""
    kind = (compile_path or "kit").removeprefix("fallback:")
    if kind in ("kit", "direct", "none"):
        return f"model-compile generate {recipe_root} --path kit --write"
    return f'model-compile generate {recipe_root} --path {kind} --reason "<why>" --write'


def plan(
    recipe_root: Path,
    config_name: str | None,
    world_size: int | None,
    overrides: list[str],
    compile_path: str | None = None,
) -> list[LayerSpec]:
    """structure, smoke, then one impact layer per tests/skills/model-compile/test_*.py."""
    common = ["--config-name", config_name] if config_name else []
    smoke = list(common)
    if world_size:
        smoke += ["--world-size", str(world_size)]
    for item in [COMPILE_ON, *overrides]:
        smoke += ["--config-override", item]
    recipe = recipe_root.name
    repo = recipe_root.parents[1]
    specs = [
        LayerSpec(
            "structure",
            Path("tests/test_structure.py"),
            common,
            generate_hint="the recipe's own structure test is missing: add tests/test_structure.py as the other recipes have it",
        ),
        LayerSpec(
            "smoke",
            Path("tests/test_smoke.py"),
            smoke,
            generate_hint="the recipe's own smoke test is missing: add tests/test_smoke.py as the other recipes have it",
        ),
    ]
    impact = sorted((recipe_root / SKILL_DIR).glob("test_*.py"))
    for path in impact:
        specs.append(LayerSpec(f"impact:{path.name}", path.relative_to(recipe_root), common, required=False))
    if not impact:
        specs.append(
            LayerSpec(
                "impact",
                SKILL_DIR / "test_compile_parity.py",
                required=False,
                generate_hint=generate_command(recipe_root, compile_path),
            )
        )
    return specs


def refused_for_accelerator(output: str, skip_reasons: list[str], messages: list[str]) -> str | None:
    """The refusal line when a smoke run would not run on this machine, else None."""
    for text in [*messages, *skip_reasons, output]:
        match = ACCELERATOR_REFUSAL.search(text or "")
        if match:
            line = next((ln for ln in (text or "").splitlines() if match.group(0) in ln), match.group(0))
            return line.strip()[:300]
    return None

"""Render the recipe-local skill tests (skill asserts + parity test) for one recipe.

Shared by `generate` (which plans them as files of an edit) and hard
validation (which writes them for the bundled example): neither stage owns
the other. The context keys are documented in templates/README.md;
`default_context()` fills every key that has a sensible default so callers
only pass what they know.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from model_compile.templating import render
from model_compile.vocabulary import BACKENDS, MODES

# Where the skill tests live inside a recipe (the repo's skill-asserts convention).
DEST = "tests/skills/model-compile"

TEMPLATES = {
    "asserts.py": "recipe_tests/asserts.py.j2",
    "test_compile_parity.py": "recipe_tests/test_compile_parity.py.j2",
}

ALLOWED_BACKENDS = list(BACKENDS)
ALLOWED_MODES = list(MODES)

# Graph-break budgets by compile path, from the tiny Qwen2-VL measurements
# (kit: ~19 breaks, regional: ~3, whole model: ~28) with headroom. Recompile
# budget: a few per new input signature are normal; the limit hit is always fatal.
GRAPH_BREAK_BUDGETS = {"kit": 40, "fallback:regional": 10, "fallback:submodule": 20, "direct": 60}
DEFAULT_RECOMPILE_BUDGET = 16

# Where the compiled modules sit, as names of named_modules() matched per dotted
# segment (runtime/targets.py): "<container>.*" = every block of the container.
TARGET_PATTERNS = {
    "kit": [""],
    "direct": [""],
    "fallback:regional": ["model.language_model.layers.*", "model.visual.blocks.*"],
}


def default_context(recipe_name: str, compile_path: str = "kit", **overrides: Any) -> dict[str, Any]:
    """The template context with every default filled; `overrides` win."""
    ctx: dict[str, Any] = {
        "recipe_name": recipe_name,
        "compile_path": compile_path,
        "target": "model" if compile_path in ("kit", "direct") else "per-block submodules",
        "target_patterns": TARGET_PATTERNS.get(compile_path, [""]),
        "backend": "aot_eager",
        "graph_break_budget": GRAPH_BREAK_BUDGETS.get(compile_path, 40),
        "recompile_budget": DEFAULT_RECOMPILE_BUDGET,
        "allowed_backends": list(ALLOWED_BACKENDS),
        "allowed_modes": list(ALLOWED_MODES),
        "compile_section": "model.compile",
        "testing_module": "demo_engine.testing.utils",
        "config_name": "train",
        "parity_steps": 2,
        "seed": 0,
        "batch_expr": "engine.get_batch(index)",
        "loss_expr": "engine.compute_loss(model, batch)",
    }
    ctx.update(overrides)
    return ctx


def render_recipe_tests(context: dict[str, Any], override: Path | None = None) -> dict[str, str]:
    """{file name: source} for tests/skills/model-compile/."""
    return {name: render(template, context, override) for name, template in TEMPLATES.items()}


def planned_recipe_tests(context: dict[str, Any], override: Path | None = None) -> dict[str, str]:
    """{recipe-relative path: source}: the recipe tests as files of a planned edit."""
    return {f"{DEST}/{name}": text for name, text in render_recipe_tests(context, override).items()}


def write_recipe_tests(recipe_root: Path, context: dict[str, Any]) -> list[Path]:
    out_dir = Path(recipe_root) / DEST
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in render_recipe_tests(context).items():
        path = out_dir / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written

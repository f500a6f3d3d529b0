"""How the rehearsal's reference twin computes, from the precision the recipe's config holds. Pure Python."""

from __future__ import annotations

from typing import Any

LOW = ("bf16", "fp16", "bfloat16", "float16", "half")
WIDER = {"bf16": "fp32", "fp16": "fp32", "bfloat16": "float32", "float16": "float32", "half": "float"}


def precision_plan(precision: dict[str, Any]) -> dict[str, Any]:
    """How the reference twin runs, from the precision the recipe's config holds: a recipe that trains in
    bf16/fp16 gets an fp32 reference (its precision setting widened), an fp32 one a float64 reference."""
    value = str(precision.get("value") or "").lower()
    if precision.get("path") and value in WIDER:
        return {
            "value": value,
            "path": precision["path"],
            "reference_overrides": [f"{precision['path']}={WIDER[value]}"],
        }
    return {
        "value": value or None,
        "path": precision.get("path"),
        "reference_overrides": [],
        "reference_dtype": "float64",
    }

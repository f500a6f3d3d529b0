"""The packages the run imported against the repository's pins (`hard/env/lock.py`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from model_compile.hard.env import lock
from model_compile.hard.models import RehearsalFacts


def _imported(recs: dict[str, list[dict[str, Any]]]) -> dict[str, str]:
    for twin in ("compiled", "eager", "reference"):
        rows = recs.get(twin) or []
        packages = (rows[0] if rows else {}).get("packages")
        if packages:
            return dict(packages)
    return {}


def read(facts: RehearsalFacts, recs: dict[str, list[dict[str, Any]]], repo: Path) -> None:
    """Each imported package whose release differs from the repository's pin; a failure whose frame is in one says
    so in its attribution (`reading/attribution.py`), not as the recipe's."""
    found = lock.ordered(lock.drift(repo, _imported(recs)))
    facts.environment_drift = [lock.line(item) for item in found]

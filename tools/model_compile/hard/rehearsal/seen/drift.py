"""The packages the run imported against the repository's pins (`hard/env/lock.py`), and the one beside a
failure it can explain: a failure whose traceback runs through a package that differs from the lock."""

from __future__ import annotations

import re
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
    found = lock.ordered(lock.drift(repo, _imported(recs)))
    facts.environment_drift = [lock.line(item) for item in found]
    if not found or facts.status == "passed" or not (facts.detail or facts.reason):
        return
    frames = re.findall(r"(?:site|dist)-packages/([A-Za-z0-9_]+)[/.]", f"{facts.detail}")
    innermost = frames[-1].lower() if frames else None
    for item in found:
        module = item["package"].lower().replace("-", "_")
        if module == innermost:
            facts.reason = f"{facts.reason} [environment: {lock.line(item)}; the failing frame is in {module}]"
            return

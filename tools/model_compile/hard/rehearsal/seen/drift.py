"""The packages the run imported against the repository's pins (`hard/env/lock.py`), and the one beside a
failure it can explain: a failure raised inside a package (the traceback's innermost frame) that differs from
the lock."""

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
    files = re.findall(r'File "([^"]+)"', facts.detail or "")  # the traceback's frames, innermost last
    inner = re.search(r"(?:site|dist)-packages/([A-Za-z0-9_]+)[/.]", files[-1]) if files else None
    innermost = inner.group(1).lower() if inner else None
    for item in found:
        module = item["package"].lower().replace("-", "_")
        if module == innermost:
            facts.reason = f"{facts.reason} [environment: {lock.line(item)}; the failing frame is in {module}]"
            return

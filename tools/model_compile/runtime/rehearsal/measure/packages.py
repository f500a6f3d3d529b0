"""The installed distributions a run imported, with their versions: `{distribution: version}` for every top-level
module in `sys.modules` that an installed distribution provides (the parent compares them with the repository's
pins: `hard/env/lock.py`). Pure Python (importlib.metadata)."""

from __future__ import annotations

import sys
from typing import Any


def imported() -> dict[str, str]:
    from importlib import metadata

    try:
        providers = metadata.packages_distributions()
    except Exception:  # noqa: BLE001 - an odd environment: nothing to compare
        return {}
    tops = {name.split(".", 1)[0] for name in list(sys.modules)}
    out: dict[str, str] = {}
    for top in sorted(tops):
        for dist in providers.get(top, []):
            if dist in out:
                continue
            try:
                out[dist] = metadata.version(dist)
            except metadata.PackageNotFoundError:
                continue
    return out


def record_imported(record: Any, rank: int) -> None:
    """Rank 0 records the distributions the run imported (the parent compares them with the repository's pins)."""
    if rank == 0 and record.twin != "prepare":
        record.data["packages"] = imported()

"""What the rehearsal's run saw, read from the children's records into its facts: the models the recipe built
(`models.py`), the batches the model was handed (`batches.py`), the packages it imported against the
repository's pins (`drift.py`), and a rank the machine ended (`faults.py`: a signal, the memory watch)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from model_compile.hard.models import RehearsalFacts
    from model_compile.hard.rehearsal.planning.plan import Plan


def read_all(facts: RehearsalFacts, plan: Plan, recs: dict[str, list[dict[str, Any]]], out: Path, repo: Path) -> None:
    """Everything above, after the judge's verdict (a drift is put beside the failure it can explain)."""
    from model_compile.hard.rehearsal.seen import batches, drift, models

    facts.user_overrides = list(plan.user_overrides)
    models.read(facts, plan, recs)
    batches.read(facts, recs, out / "logs")
    drift.read(facts, recs, repo)

"""The batches the model was handed, read from the children's records: their keys, dtypes and shapes, how many
came from the recipe's data path and how many from the tool (every twin and rank counted: a substitution is
never silent), the packing they showed (measured from the batches, whether configured or hard-coded), and the
rows the recipe's data path read and did not hand over, with the reasons its log gives.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

from model_compile.hard.models import RehearsalFacts

# a row dropped or skipped as it happens (`dropping sample ...`, `Data guard skip: reason=...`), not a setting
# that merely names dropping (`packing_tail_policy: drop`)
_DROP = re.compile(r"\b(dropp(ed|ing)|skipp(ed|ing)|filtered out)\b|\bskip:", re.I)
_NUMBER = re.compile(r"\d+(\.\d+)?")
_NOISE = re.compile(r"^(\[[^\]]*\]\s*|\d[\d:.,T-]*\s+)*")  # timestamp and bracketed prefixes


def _seen(recs: dict[str, list[dict[str, Any]]]) -> tuple[dict[str, Any], Counter[str]]:
    """Rank 0's view (compiled, else eager, else reference), and the batches by source over every twin and rank."""
    first: dict[str, Any] = {}
    sources: Counter[str] = Counter()
    for twin in ("compiled", "eager", "reference"):
        for rec in recs.get(twin) or []:
            seen = (rec.get("feed") or {}).get("seen") or {}
            sources.update({k: int(v) for k, v in (seen.get("batches") or {}).items()})
            if not first and seen.get("keys"):
                first = dict(seen)
    return first, sources


def reasons(log: Path, limit: int = 3) -> list[str]:
    """The commonest lines of a rank's log that say a row was dropped or skipped (numbers folded), with counts."""
    try:
        lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []
    found: Counter[str] = Counter()
    for line in lines:
        if _DROP.search(line) and "model-compile" not in line and "Traceback" not in line:
            text = _NUMBER.sub("N", _NOISE.sub("", line.strip()))[:160]
            found[text] += 1
    return [f"{text} ({n}x)" for text, n in found.most_common(limit)]


def read(facts: RehearsalFacts, recs: dict[str, list[dict[str, Any]]], logs: Path) -> None:
    feed = ((recs.get("compiled") or recs.get("eager") or [{}])[0] or {}).get("feed") or {}
    if facts.batches_mode == "batches" and feed.get("mode") == "own":
        facts.batches_mode = "own"
        _, sep, tail = str(facts.batches or "").partition("; seen: ")
        facts.batches = f"the recipe's data path, as it is ({feed.get('reason')})" + (sep + tail if sep else "")
    seen, sources = _seen(recs)
    if not seen and not sources:
        return
    facts.batches_seen = {**seen, "batches": dict(sources)}
    most = int(seen.get("most_in_a_row") or 0)
    how = seen.get("counted_by") or ""
    if most > 1:
        facts.packing = (
            f"packed: up to {most} samples in a row, {seen.get('samples')} in {seen.get('rows')} rows ({how})"
        )
    elif most == 1:
        facts.packing = f"one sample a row in every batch seen ({how})"
    if sources.get("tool") and facts.batches_mode != "batches":
        facts.notes.append(
            f"{sources['tool']} of the {sum(sources.values())} batches the twins trained on came from the tool "
            "(synthetic), not the recipe's data path"
        )
    rows = ((recs.get("compiled") or recs.get("eager") or [{}])[0] or {}).get("rows") or {}
    read_n, used = rows.get("read"), seen.get("samples")
    why = reasons(logs / "compiled-rank0.log") or reasons(logs / "eager-rank0.log")
    if isinstance(read_n, int) and isinstance(used, int) and read_n > used:
        facts.rows_dropped = (
            f"{read_n} synthetic rows read on rank 0, {used} samples reached the model: {read_n - used} dropped by "
            "the recipe's data path or still in its buffers when the run stopped"
            + (f"; its log says: {'; '.join(why)}" if why else "")
            + shortened(facts)
        )
    elif why:
        facts.rows_dropped = f"the recipe's log on rank 0 says: {'; '.join(why)}"


def keys_line(facts: RehearsalFacts) -> str | None:
    """The keys the model was handed, with dtype and shape (the first batch), and where the batches came from."""
    seen = facts.batches_seen
    if not seen:
        return None
    first = (seen.get("described") or [{}])[0].get("keys") or {}
    keys = ", ".join(f"{k} {v}" for k, v in first.items()) or ", ".join(seen.get("keys") or {})
    by = seen.get("batches") or {}
    source = " and ".join(
        f"{n} from {'the recipe' if s == 'recipe' else 'the tool (synthetic)'}" for s, n in sorted(by.items())
    )
    return f"handed to the model (rank 0, first batch): {keys}; batches: {source or '-'}"


def shortened(facts: RehearsalFacts) -> str:
    """Where the rehearsal shortened a row length itself: rows longer than that (an image's tokens count) may be
    what its data path dropped, and the override that keeps them."""
    from model_compile.hard.rehearsal.planning.data_plan import SEQ_LEAVES

    cut = [o for o in facts.overrides if o.split("=", 1)[0].rsplit(".", 1)[-1] in SEQ_LEAVES]
    if not cut:
        return ""
    key, value = cut[0].split("=", 1)
    return (
        f"; the rehearsal shortened {key} to {value} itself, and a data path drops rows longer than that (images "
        f"count their tokens): --config-override {key}=N with a larger N keeps them"
    )

"""What the run saw, in the rehearsal's words: the lines `rehearse` prints and the report's gaps section shows."""

from __future__ import annotations

from model_compile.hard.models import RehearsalFacts
from model_compile.hard.rehearsal.seen.batches import keys_line
from model_compile.hard.rehearsal.seen.models import line as model_line


def _memory(facts: RehearsalFacts) -> str | None:
    mem = facts.memory
    if not mem and not facts.rank_rss:
        return None
    parts = []
    if mem:
        parts.append(
            f"before stepping rank 0 held {mem.get('rss_mb')} MB; expected {mem.get('more_mb')} MB more over "
            f"{mem.get('ranks')} rank(s) (gradients, optimizer state, activations); {mem.get('available_mb')} MB "
            f"free ({mem.get('source') or 'unknown'})"
        )
    if facts.rank_rss:
        parts.append("peak resident per rank: " + "; ".join(facts.rank_rss))
    return "memory: " + "; ".join(parts)


def text_lines(facts: RehearsalFacts) -> list[str]:
    """The `rehearse` text's lines for the models built, the batches seen, memory, overrides and drift."""
    out = [f"built: {model_line(m)}" for m in facts.models[:6]]
    if len(facts.models) > 6:
        out.append(f"built: {len(facts.models) - 6} more model(s) (--format json)")
    keys = keys_line(facts)
    if keys:
        out.append(keys)
    if facts.packing:
        out.append(f"packing seen: {facts.packing}")
    if facts.rows_dropped:
        out.append(f"rows dropped: {facts.rows_dropped}")
    memory = _memory(facts)
    if memory:
        out.append(memory)
    if facts.user_overrides:
        out.append("your overrides (applied first, as the recipe's launcher would): " + " ".join(facts.user_overrides))
    if facts.environment_drift:
        out.append(_drift(facts))
    return out


def _drift(facts: RehearsalFacts, shown: int = 6) -> str:
    more = len(facts.environment_drift) - shown
    return (
        f"environment against the repository's pins ({len(facts.environment_drift)} differ): "
        + "; ".join(facts.environment_drift[:shown])
        + (f"; {more} more (--format json)" if more > 0 else "")
    )


def summary_lines(facts: RehearsalFacts) -> list[str]:
    """The few of them a review report's gaps section carries."""
    out = []
    if len(facts.models) > 1:
        out.append("models built: " + "; ".join(model_line(m) for m in facts.models[:3]))
    if facts.packing:
        out.append(f"packing seen: {facts.packing}")
    if facts.user_overrides:
        out.append("config overrides: " + " ".join(facts.user_overrides))
    if facts.environment_drift:
        out.append(_drift(facts, 3))
    return out

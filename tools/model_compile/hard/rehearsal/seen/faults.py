"""A rank the machine ended, told as what it is: an environment fault, never the recipe's failure.

A rank killed by a signal the rehearsal did not send (the kernel's OOM killer sends SIGKILL) or ended by the
parent's memory watch leaves its peers failing in a collective ("Connection closed by peer"): those records are
consequences, and the one line says the cause: the rank, the signal, its last resident memory. A child that
stopped on something this machine lacks (a model's config, the memory its model needs) says so itself
(`fault` environment or input): its reason is the line, without "the eager twin failed".
"""

from __future__ import annotations

import signal
from typing import Any

from model_compile.hard.models import RehearsalFacts


def _signal(code: int) -> str:
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


def _rss(rank: Any) -> str:
    last, peak = getattr(rank, "last_rss_mb", None), getattr(rank, "peak_rss_mb", None)
    kernel = getattr(rank, "exit_peak_rss_mb", None)  # its own process, as the kernel counted when it was reaped
    if last is None and kernel is None:
        return "its resident memory was not sampled"
    if last is None:
        return (
            f"its peak resident memory was {kernel:.0f} MB (the kernel's count for its own process; it ended "
            "before the memory watch's first sample)"
        )
    more = f", {kernel:.0f} MB by the kernel's count for its own process" if kernel and kernel > (peak or 0) else ""
    return f"its last resident memory was {last:.0f} MB (peak {peak:.0f} MB{more})"


def machine_fault(
    facts: RehearsalFacts, twin: str, recs: list[dict[str, Any]], ranks: list[Any] | None, timed_out: bool
) -> bool:
    """Set the facts for a twin the machine stopped; False when it is not that (the judge goes on)."""
    if timed_out:
        return False
    ranks = ranks or []
    watched = next((r for r in ranks if str(r.killed).startswith("memory:")), None)
    if watched is not None:
        facts.status, facts.fault = "not-run", "environment"
        facts.reason = (
            f"the {twin} run was ended for lack of memory, {str(watched.killed).removeprefix('memory: ')}; "
            "an environment fault, not the recipe's: shrink what it runs (--config-override, e.g. a smaller "
            "batch) or rehearse on a machine with more memory"
        )
        return True
    # SIGKILL from outside (the OOM killer's signal): the machine's doing; another signal (a segfault in
    # compiled code, an abort) is the process's own and is judged as the twin's failure, its signal named
    killed = [r for r in ranks if not r.killed and r.exit_status == -signal.SIGKILL]
    if killed:
        first = killed[0]
        name = _signal(first.exit_status)
        oom = " (the kernel's OOM killer sends it when memory runs out)" if name == "SIGKILL" else ""
        facts.status, facts.fault = "not-run", "environment"
        facts.reason = (
            f"rank {first.rank} of the {twin} run was killed by {name}{oom}, not by the rehearsal; {_rss(first)}: "
            "an environment fault, not the recipe's"
            + (" (the other ranks' errors follow from it)" if len(ranks) > 1 else "")
        )
        facts.notes.append(f"rank {first.rank}'s log: {first.log}")
        return True
    own = next(
        (
            r
            for r in recs
            if r.get("status") not in ("done", None) and r.get("fault") in ("environment", "input", "stand-in")
        ),
        None,
    )
    if own is not None:
        facts.status, facts.fault = "not-run", str(own.get("fault"))
        phase = own.get("stopped_at") or ""
        facts.detail = str(((own.get("phases") or {}).get(phase) or {}).get("detail") or "")[-2000:]
        facts.reason = str(own.get("reason"))
        return True
    return False


def note(rank: Any) -> str:
    """` (SIGSEGV; its last resident memory ...)` for a rank a signal ended, else nothing."""
    code = getattr(rank, "exit_status", None)
    if code is None or code >= 0:
        return ""
    return f" ({_signal(code)}; {_rss(rank)})"


def rank_memory(facts: RehearsalFacts, twin: str, ranks: list[Any]) -> None:
    """Each rank's sampled peak resident memory, for the record."""
    peaks = [f"rank {r.rank} {r.peak_rss_mb:.0f} MB" for r in ranks if getattr(r, "peak_rss_mb", None) is not None]
    if peaks:
        facts.rank_rss.append(f"{twin}: " + ", ".join(peaks))

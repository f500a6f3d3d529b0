"""The parent's memory watch over a twin's ranks: each rank's resident memory (its process tree: compile workers
included) sampled while it runs, and the machine's free memory; when free memory falls below a floor the ranks
are ended by the rehearsal itself, before the kernel's OOM killer picks a process (which would leave a peer rank
failing in a collective and read as the recipe's fault).

The floor is `FLOOR_SHARE` of what was free when the twin started, at least `FLOOR_MB` and at most `RESERVE_MB`
(what the child's check before stepping keeps free too). Pure Python (/proc, the cgroup).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from model_compile.runtime.rehearsal.measure import memory

FLOOR_MB = 256
FLOOR_SHARE = 0.05
INTERVAL_S = 0.5


@dataclass
class MemoryWatch:
    started_free_mb: float | None = None
    floor_mb: float = FLOOR_MB
    last: dict[int, float] = field(default_factory=dict)  # rank -> MB at the last sample
    peak: dict[int, float] = field(default_factory=dict)  # rank -> the largest sample
    low_free_mb: float | None = None
    reason: str = ""
    _next: float = 0.0

    def __post_init__(self) -> None:
        free = memory.machine()["available_mb"]
        self.started_free_mb = free
        if free is not None:
            self.floor_mb = min(float(memory.RESERVE_MB), max(FLOOR_MB, free * FLOOR_SHARE))

    def __call__(self, pids: dict[int, int]) -> str | None:
        """Sample (at most every INTERVAL_S, and at once for a rank not sampled yet); the reason to end every
        rank, or None."""
        now = time.monotonic()
        if self.reason or (now < self._next and all(rank in self.last for rank in pids)):
            return None
        self._next = now + INTERVAL_S
        for rank, pid in pids.items():
            rss = memory.rss_mb(pid)
            if rss is not None:
                self.last[rank] = rss
                self.peak[rank] = max(rss, self.peak.get(rank, 0.0))
        free = memory.machine()["available_mb"]
        if free is None:
            return None
        self.low_free_mb = free if self.low_free_mb is None else min(self.low_free_mb, free)
        if free >= self.floor_mb or not self.last:
            return None
        rank = max(self.last, key=lambda r: self.last[r])
        ranks = ", ".join(f"rank {r} {mb:.0f} MB" for r, mb in sorted(self.last.items()))
        self.reason = (
            f"memory: this machine's free memory fell to {free:.0f} MB (below {self.floor_mb:.0f} MB; "
            f"{self.started_free_mb} MB was free when the run started) while rank {rank} held the most "
            f"({ranks}, resident): the rehearsal ended its ranks before the kernel's OOM killer would"
        )
        return self.reason

    def rss(self, rank: int) -> tuple[float | None, float | None]:
        """(last, peak) resident MB of a rank, as sampled."""
        return self.last.get(rank), self.peak.get(rank)

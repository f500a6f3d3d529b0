"""The machine's free memory and a process tree's resident memory, read from /proc and the cgroup (Linux; None
elsewhere), and what a rehearsal's ranks are expected to need. Pure Python: the parent's watchdog and the child's
check before stepping both use it.

Free memory is the smaller of `MemAvailable` (/proc/meminfo) and what the process's cgroup still allows
(cgroup v2 `memory.max - memory.current`, v1 `memory.limit_in_bytes - memory.usage_in_bytes`).

The expectation of one rank before it steps: what it holds now (its resident memory, the model built) plus,
for each trainable parameter, its gradient and AdamW's two moments (12 bytes in fp32), plus the activations
of a step, which the model's size does not say (batch and sequence decide it): `ACTIVATION_SHARE` times the parameters' bytes, at least
`ACTIVATION_FLOOR_MB`. The ranks of a twin run at the same time: the expectation is per rank times the ranks.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

MB = 1024 * 1024
RESERVE_MB = 1024  # kept free for everything else on the machine
ACTIVATION_FLOOR_MB = 512
ACTIVATION_SHARE = 4.0
STATE_BYTES = 12  # gradient + AdamW exp_avg + exp_avg_sq, fp32, per trainable parameter


def _meminfo() -> dict[str, int]:
    out = {}
    try:
        for line in Path("/proc/meminfo").read_text(encoding="ascii").splitlines():
            key, _, rest = line.partition(":")
            parts = rest.split()
            if parts and parts[0].isdigit():
                out[key] = int(parts[0]) * 1024
    except OSError:
        pass
    return out


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text(encoding="ascii").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _cgroup_headroom() -> tuple[int | None, str]:
    """(bytes the cgroup still allows, which file said so), or (None, '') when unlimited or unknown."""
    try:
        lines = Path("/proc/self/cgroup").read_text(encoding="ascii").splitlines()
    except OSError:
        return None, ""
    root = Path("/sys/fs/cgroup")
    for line in lines:
        _, controllers, path = line.split(":", 2)
        rel = path.lstrip("/")
        if controllers == "":  # v2
            for folder in (root / rel, root):
                limit_text = (folder / "memory.max").read_text().strip() if (folder / "memory.max").is_file() else ""
                current = _read_int(folder / "memory.current")
                if limit_text.isdigit() and current is not None:
                    return int(limit_text) - current, str(folder / "memory.max")
        elif "memory" in controllers.split(","):  # v1
            for folder in (root / "memory" / rel, root / "memory"):
                limit = _read_int(folder / "memory.limit_in_bytes")
                usage = _read_int(folder / "memory.usage_in_bytes")
                if limit is not None and usage is not None and limit < (1 << 60):
                    return limit - usage, str(folder / "memory.limit_in_bytes")
    return None, ""


def machine() -> dict[str, Any]:
    """{"available_mb", "machine_mb", "source"}: free memory now, and the machine's (None where not read)."""
    info = _meminfo()
    available = info.get("MemAvailable")
    source = "/proc/meminfo MemAvailable" if available is not None else ""
    headroom, where = _cgroup_headroom()
    if headroom is not None and (available is None or headroom < available):
        available, source = max(headroom, 0), f"the cgroup limit ({where})"
    return {
        "available_mb": round(available / MB) if available is not None else None,
        "machine_mb": round(info["MemTotal"] / MB) if "MemTotal" in info else None,
        "source": source,
    }


def _children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            text = (task / "children").read_text(encoding="ascii")
            out += [int(c) for c in text.split()]
    except (OSError, ValueError):
        pass
    return out


def rss_mb(pid: int) -> float | None:
    """Resident memory of `pid` and its descendants (compile workers included), in MB; None when it is gone."""
    total, todo, seen = 0, [pid], set()
    found = False
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        try:
            for line in Path(f"/proc/{current}/status").read_text(encoding="ascii").splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
                    found = True
                    break
        except (OSError, ValueError):
            continue
        todo += _children(current)
    return round(total / MB, 1) if found else None


def expected_mb(rss_now_mb: float, parameters: int, trainable: int, world: int) -> dict[str, float]:
    """What the ranks of a twin are expected to hold at their peak, and how much more than now (see above)."""
    weights_mb = parameters * 4 / MB
    state_mb = trainable * STATE_BYTES / MB
    activations_mb = max(ACTIVATION_FLOOR_MB, weights_mb * ACTIVATION_SHARE)
    return {
        "rank_mb": round(rss_now_mb + state_mb + activations_mb, 1),
        "ranks": world,
        "total_mb": round((rss_now_mb + state_mb + activations_mb) * world, 1),
        "more_mb": round((state_mb + activations_mb) * world, 1),
        "state_mb": round(state_mb, 1),
        "activations_mb": round(activations_mb, 1),
    }


def fits(more_mb: float, available_mb: float | None) -> bool:
    """Whether `more_mb` on top of what is held now leaves the reserve free (unknown free memory: it fits)."""
    return available_mb is None or more_mb + RESERVE_MB <= available_mb

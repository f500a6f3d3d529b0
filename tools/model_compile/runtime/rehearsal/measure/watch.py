"""What dynamo did during one micro-step: new compiled variants (recompiles), graph breaks, graphs, limit hits.

A recompile is one new compiled variant of a frame: the growth of the frame's cache entries
(`_debug_get_cache_entry_list`), counted once each, never the failed guards dynamo checks on the way (at the
k-th recompile it checks k entries and `guard_failures` grows by k). The failed guard shown is the last one
recorded for the frame. Everything private to torch is reached here and in `runtime/dynamo_adapter.py` only.
"""

from __future__ import annotations

import logging
from typing import Any

from model_compile.runtime.dynamo_adapter import _code_label, _LimitHandler

_LIMIT_WORDS = ("recompile_limit", "cache_size_limit", "recompile limit", "cache size limit")


def _entries(code: Any) -> int:
    from torch._dynamo.eval_frame import _debug_get_cache_entry_list

    try:
        return len(_debug_get_cache_entry_list(code))
    except Exception:  # noqa: BLE001 - a code object dynamo no longer knows has no entries
        return 0


class Watch:
    def __init__(self) -> None:
        self.handler = _LimitHandler()
        logging.getLogger("torch._dynamo.convert_frame").addHandler(self.handler)
        self._entries: dict[Any, int] = {}
        self._breaks: dict[str, int] = {}
        self._graphs = 0
        self.snapshot()

    def _codes(self) -> list[Any]:
        from torch._dynamo.utils import guard_failures

        return list(guard_failures)

    def snapshot(self) -> None:
        from torch._dynamo.utils import counters

        self._entries = {code: _entries(code) for code in self._codes()}
        self._breaks = dict(counters["graph_break"])
        self._graphs = int(counters["stats"].get("unique_graphs", 0))
        self.handler.messages.clear()

    def delta(self) -> dict[str, Any]:
        from torch._dynamo.utils import counters, guard_failures

        recompiles = []
        for code in self._codes():
            now = _entries(code)
            # a frame first seen in guard_failures had its first entry before (the first compile is no recompile)
            before = self._entries.get(code, 1)
            if now > before:
                # the guard, its source line and where it is; dynamo's user stack after it is dropped
                last = str(guard_failures[code][-1]).split("User stack trace:", 1)[0] if guard_failures[code] else ""
                guard = " ".join(last.split())[:300]
                recompiles.append({"frame": _code_label(code), "count": now - before, "variants": now, "guard": guard})
        breaks = {}
        for reason, n in counters["graph_break"].items():
            d = n - self._breaks.get(reason, 0)
            if d > 0:
                breaks[" ".join(str(reason).split())[:200]] = d
        graphs = int(counters["stats"].get("unique_graphs", 0)) - self._graphs
        limit = list(self.handler.messages)
        limit += [r for r in breaks if any(m in r.lower() for m in _LIMIT_WORDS)]
        self.snapshot()
        return {"recompiles": recompiles, "graph_breaks": breaks, "new_graphs": graphs, "limit_hits": limit}

    def close(self) -> None:
        logging.getLogger("torch._dynamo.convert_frame").removeHandler(self.handler)

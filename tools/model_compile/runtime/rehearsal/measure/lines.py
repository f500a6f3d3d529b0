"""Did the change's own lines run, and how: as Python (eager) or inside a compiled graph.

The parent hands the child the lines a change touched (`spec["changed_lines"]`: file -> head-side line
numbers). Each twin counts how often Python executed each of them: `sys.monitoring` LINE events on Python 3.12
and later (a location that is not a changed line is disabled after its first event, so the cost is one call per
changed line executed), `sys.settrace` before (a call per Python call: it is slower, and said so). Code that
dynamo wrote (a compiled frame's transformed code) is not counted: its lines did not run as Python. The
compiled twin also reads, for each graph a backend compiles, the changed lines its operators come from (the
nodes' stack traces), and counts the graph's runs (`coverage.py`): those lines ran compiled.
"""

from __future__ import annotations

import re
import sys
from collections import defaultdict
from typing import Any

_TOOL_NAME = "model-compile lines"
_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+)')


class LineCounter:
    """Counts executions of the wanted lines in this process."""

    def __init__(self, wanted: dict[str, list[int]]) -> None:
        self.wanted = {path: set(lines) for path, lines in wanted.items()}
        self.counts: dict[str, dict[int, int]] = defaultdict(lambda: defaultdict(int))
        self.how = ""
        self._tool: int | None = None

    def start(self) -> None:
        if not self.wanted:
            return
        from torch._dynamo.convert_frame import output_codes

        self._output = output_codes
        monitoring: Any = getattr(sys, "monitoring", None)
        if monitoring is not None:
            for tool in (monitoring.COVERAGE_ID, 3, 4):
                if monitoring.get_tool(tool) is None:
                    monitoring.use_tool_id(tool, _TOOL_NAME)
                    self._tool = tool
                    break
        if monitoring is not None and self._tool is not None:
            monitoring.register_callback(self._tool, monitoring.events.LINE, self._on_line)
            monitoring.set_events(self._tool, monitoring.events.LINE)
            self.how = "sys.monitoring line events"
            return
        sys.settrace(self._on_call)
        self.how = "sys.settrace (no sys.monitoring in this Python: slower)"

    def stop(self) -> None:
        if self._tool is not None:
            monitoring: Any = getattr(sys, "monitoring")  # noqa: B009 - not in every Python's stubs
            monitoring.set_events(self._tool, 0)
            monitoring.register_callback(self._tool, monitoring.events.LINE, None)
            monitoring.free_tool_id(self._tool)
            self._tool = None
        elif self.how.startswith("sys.settrace"):
            sys.settrace(None)

    def _on_line(self, code: Any, line: int) -> Any:
        try:
            wanted = self.wanted.get(code.co_filename)
            if wanted is None or line not in wanted or code in self._output:
                return getattr(sys, "monitoring").DISABLE  # noqa: B009
            self.counts[code.co_filename][line] += 1
        except Exception:  # noqa: BLE001 - the counter never raises into the run (a line it missed is not counted)
            return getattr(sys, "monitoring").DISABLE  # noqa: B009
        return None

    def _on_call(self, frame: Any, event: str, arg: Any) -> Any:
        wanted = self.wanted.get(frame.f_code.co_filename)
        if wanted is None or frame.f_code in self._output:
            return None
        counts = self.counts[frame.f_code.co_filename]

        def local(frame: Any, event: str, arg: Any) -> Any:
            if event == "line" and frame.f_lineno in wanted:
                counts[frame.f_lineno] += 1
            return local

        return local

    def record(self) -> dict[str, Any]:
        loaded = {getattr(m, "__file__", None) for m in list(sys.modules.values())}
        return {
            "how": self.how,
            "counts": {path: {str(n): c for n, c in sorted(lines.items())} for path, lines in self.counts.items()},
            "imported": sorted(p for p in self.wanted if p in loaded),
        }


def graph_lines(gm: Any, wanted: dict[str, set[int]]) -> list[list[Any]]:
    """The wanted `[file, line]`s a compiled graph's operators come from (any frame of a node's stack trace)."""
    found: set[tuple[str, int]] = set()
    for node in gm.graph.nodes:
        trace = node.meta.get("stack_trace") if hasattr(node, "meta") else None
        if not trace:
            continue
        for m in _FRAME.finditer(str(trace)):
            lines = wanted.get(m["file"])
            if lines is not None and int(m["line"]) in lines:
                found.add((m["file"], int(m["line"])))
    return [[f, n] for f, n in sorted(found)]

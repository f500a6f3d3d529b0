"""Read pytest's --junitxml output into test counts and failure messages."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

from model_compile.hard.models import TestCounts


def _last_lines(text: str | None, n: int = 30) -> str:
    """The end of a traceback: where the assertion message is."""
    lines = [ln for ln in (text or "").strip().splitlines() if ln.strip()]
    return "\n".join(lines[-n:])


_RAISED = re.compile(r"^(\S+\.py):(\d+): [A-Za-z_.]*(?:Error|Exception|Exit|Failed)\b")


def origin(text: str | None) -> str | None:
    """`file:line` where the failure was first raised, when the traceback goes on from there (a helper that
    catches an assertion and raises its own, possibly empty, message): pytest prints one `path:line: Error`
    line per chained exception, the first raised first."""
    places = [f"{m.group(1)}:{m.group(2)}" for ln in (text or "").splitlines() if (m := _RAISED.match(ln.strip()))]
    return places[0] if len(places) > 1 else None


def parse_junit(path: Path) -> TestCounts | None:
    """Counts from a JUnit XML file (one <testsuite> or a <testsuites> of them); None if absent/unreadable."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return None
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    counts = TestCounts()
    for suite in suites:
        for case in suite.iter("testcase"):
            counts.tests += 1
            name = ".".join(x for x in (case.get("classname"), case.get("name")) if x)
            failure = case.find("failure")
            error = case.find("error")
            skipped = case.find("skipped")
            node = failure if failure is not None else error
            if node is not None:
                if failure is not None:
                    counts.failures += 1
                else:
                    counts.errors += 1
                counts.failed_tests.append(name)
                message = node.get("message") or ""
                first = origin(node.text)
                raised = f" (first raised at {first})" if first else ""
                detail = _last_lines(node.text)
                counts.messages.append(f"{name}: {message}{raised}\n{detail}".strip())
            elif skipped is not None:
                counts.skipped += 1
                counts.skip_reasons.append(f"{name}: {skipped.get('message') or ''}".strip())
            else:
                counts.passed += 1
    if counts.tests == 0:
        # collection errors are reported on the suite, not on a testcase
        for suite in suites:
            counts.errors += int(suite.get("errors", 0) or 0)
            counts.failures += int(suite.get("failures", 0) or 0)
    return counts

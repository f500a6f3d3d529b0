"""One line on stderr for the person or agent waiting (stdout stays the report)."""

from __future__ import annotations

import sys


def say(line: str) -> None:
    """Write LINE to stderr now; a closed or broken stderr is not the run's failure."""
    try:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass

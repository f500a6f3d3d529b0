"""Error types every stage may raise.

`InputError` is unusable input (a missing path, a file that cannot be edited
cleanly, a bad option): the command line reports it as one line on stderr
with exit code 2, never a traceback.
"""

from __future__ import annotations


class InputError(Exception):
    """Unusable input: reported as one line on stderr with exit code 2."""

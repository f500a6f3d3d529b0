"""`python -m model_compile.runtime.rehearsal SPEC.json TWIN`: one rehearsal process (see child.py)."""

import sys

from model_compile.runtime.rehearsal.child import main

raise SystemExit(main(sys.argv[1:]))

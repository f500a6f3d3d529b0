"""The models a rehearsal's recipe builds: every construction intercepted in the child (`intercept.py`), widths
shrunk and depth kept (`shrink.py`, pure Python, shared with the static plan), stand-in checkpoints for the
paths a recipe names that are not on this machine (`stand_in.py`), and what was built, measured on the module
tree (`built.py`)."""

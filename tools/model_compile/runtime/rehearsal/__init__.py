"""The rehearsal's child processes (torch side): the recipe's own training run on a tiny model, twice or three
times (full-precision reference, eager, compiled), and what it measured. See `child.py`."""

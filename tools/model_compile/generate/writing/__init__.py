"""Writing the transaction: diffs, the dirty check, and the all-or-nothing write."""

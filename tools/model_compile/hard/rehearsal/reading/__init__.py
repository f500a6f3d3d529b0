"""Read a rehearsal's records and trace into its facts, and judge them: parity, recompiles, graph breaks, what ran
compiled, the fixes it recognises."""

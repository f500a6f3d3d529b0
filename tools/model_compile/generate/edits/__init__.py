"""The edits of each file kind: engine (LibCST), schema, stage YAML, README, the recipe's tests, and the rendered snippets."""

"""The `model.compile` contract every stage shares: the allowed values of
`backend` and `mode` (rules check them, generate types the schema with them,
the recipe tests assert them)."""

BACKENDS = ("inductor", "aot_eager", "eager")
MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")

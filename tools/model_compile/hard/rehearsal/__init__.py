"""The rehearsal: the recipe's own training run on a tiny model, planned statically, run in the repository's
interpreter (`model_compile.runtime.rehearsal`), judged and rendered."""

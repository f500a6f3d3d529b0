"""report stage: the review report (models, assembly, Markdown/JSON/SARIF/GitHub views)."""

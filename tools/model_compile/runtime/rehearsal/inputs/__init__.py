"""What the rehearsal feeds and builds the model from: the tiny checkpoint and tokenizer, the synthetic rows and
the recipe's row source replaced, the feed that stands in for a data path that cannot run here."""

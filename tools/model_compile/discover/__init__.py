"""discover stage."""

"""hard stage."""

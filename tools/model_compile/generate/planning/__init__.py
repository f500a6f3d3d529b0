"""Planning the edit: read the recipe and the user's options, decide what changes, review the result."""

"""Plan a rehearsal statically: the stage, the world and its wrap, the model at its real depth, the data."""

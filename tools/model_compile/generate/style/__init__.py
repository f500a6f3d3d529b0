"""Fitting the repository's style: its formatter and line length, its launch and test commands, its conventions."""

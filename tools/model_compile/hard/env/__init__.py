"""The repository's environment: which interpreter runs its code, what it can import (preflight, the torch pin), the
probe put on its path, and the processes the hard layers start (process groups, timeouts, interrupts)."""

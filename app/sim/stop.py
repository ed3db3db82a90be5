"""Stopping a replay under way from another thread: POST /simulate's client has left, the service is
shutting down, or the replay ran past its time cap.

The flag is an int64 cell that the compiled replay reads before each decision and each job of a
pass (no call back into Python, so it costs nothing and needs no GIL), and a second cell where it
says it obeyed; the Python replay reads it before each decision. A replay that finds it set stops
and raises `ReplayStopped`: nothing of it is returned. A replay whose last decision was made before
the flag was set is whole, and is returned as such.
"""

from __future__ import annotations

import numpy as np


class ReplayStopped(Exception):
    """The replay was stopped by its flag before its end."""

    def __init__(self, reason: str, started: int, jobs: int) -> None:
        self.reason, self.started, self.jobs = reason, started, jobs
        super().__init__(f"replay stopped ({reason}) after {started} of {jobs} jobs started")


class StopFlag:
    """Set once, by any thread, with a reason; `cell` is what the compiled loop reads."""

    def __init__(self) -> None:
        self.cell = np.zeros(2, dtype=np.int64)  # [set, obeyed by the compiled loop]
        self.reason = ""

    def set(self, reason: str) -> None:
        if not self.reason:
            self.reason = reason
            self.cell[0] = 1

    def is_set(self) -> bool:
        return bool(self.cell[0])

    def obeyed(self) -> bool:
        """Whether the compiled loop stopped for it (rather than finishing first)."""
        return bool(self.cell[1])

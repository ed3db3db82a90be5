"""EASY backfilling: the first blocked job of each queue is reserved, the rest backfill around it."""

from __future__ import annotations

from app.sched.order import fcfs_scores
from app.sched.params import EasyParams
from app.sched.policies.base import BasePolicy, StandingKey, standing

NAME = "easy"


class EasyPolicy(BasePolicy):
    NAME = NAME
    Params = EasyParams

    def standing_key(self) -> StandingKey | None:
        """A job's priority is its wait, so its rank is by submit time, then id, at every decision;
        a short job past the reserved ones only waits."""
        return standing(fcfs_scores)

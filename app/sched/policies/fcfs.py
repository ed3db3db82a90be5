"""Strict first come, first served: a queue stops at its first job that cannot start.

That job is reserved (so its estimated start is known); nothing behind it starts (no backfill).
"""

from __future__ import annotations

from collections.abc import Sequence

from app.sched.core import PassRules
from app.sched.order import Scored, fcfs_scores
from app.sched.params import FcfsParams
from app.sched.policies.base import BasePolicy, StandingKey, standing

NAME = "fcfs"


class FcfsPolicy(BasePolicy):
    NAME = NAME
    Params = FcfsParams

    def rules(self, now: float, ranked: Sequence[Scored]) -> PassRules:
        return PassRules(reservation_depth=self.params.reservation_depth, stop_at_block=True)

    def standing_key(self) -> StandingKey | None:
        """As easy's: the rank is by submit time; the queue stops at its first blocked job, which is
        short or not, and in the list either way."""
        return standing(fcfs_scores)

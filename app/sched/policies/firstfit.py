"""Torque's default `pbs_sched` (really FirstFit, docs/methods.md §3): start every job that fits.

A job that has waited longer than `starvation_s` (24 h) gets its resources reserved, and those are
withheld from every other job from now on (no backfill into them), as Torque does.
"""

from __future__ import annotations

from collections.abc import Sequence

from app.sched.core import PassRules
from app.sched.model import Job
from app.sched.order import Scored
from app.sched.params import FirstfitParams
from app.sched.policies.base import BasePolicy

NAME = "firstfit"


class FirstfitPolicy(BasePolicy):
    NAME = NAME
    Params = FirstfitParams

    def rules(self, now: float, ranked: Sequence[Scored]) -> PassRules:
        limit = self.params.starvation_s  # type: ignore[attr-defined]

        def starving(job: Job) -> bool:
            return now - job.submit_time > limit

        return PassRules(
            reservation_depth=self.params.reservation_depth,
            reserve_from_now=True,
            may_reserve=starving,
        )

"""Conservative backfilling: every blocked job is reserved (up to `reservation_depth` per queue);
a job starts early only if it delays none of them. Reservations stack in time on a node.

A pending job may carry the reservation an earlier pass gave it (`promise_start`, `promise_nodes`):
that slot is held for it, so re-planning never starts it later than promised (the guarantee of
conservative backfilling, which a stateless pass would otherwise lose when jobs end early)."""

from __future__ import annotations

from collections.abc import Sequence

from app.sched.core import PassRules
from app.sched.order import Scored
from app.sched.params import ConservativeParams
from app.sched.policies.base import BasePolicy

NAME = "conservative"


class ConservativePolicy(BasePolicy):
    NAME = NAME
    Params = ConservativeParams

    def rules(self, now: float, ranked: Sequence[Scored]) -> PassRules:
        return PassRules(reservation_depth=self.params.reservation_depth, keep_promises=True)

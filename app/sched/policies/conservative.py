"""Conservative backfilling: every blocked job is reserved (up to `reservation_depth` per queue);
a job starts early only if it delays none of them. Reservations stack in time on a node."""

from __future__ import annotations

from app.sched.params import ConservativeParams
from app.sched.policies.base import BasePolicy

NAME = "conservative"


class ConservativePolicy(BasePolicy):
    NAME = NAME
    Params = ConservativeParams

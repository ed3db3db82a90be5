"""Memory-aware backfill with per-node reservations (docs/methods.md §1, seed 000 step S1).

cpu, memory and gpu are all checked; a node holds at most one reservation; a blocked job reserves
the unreserved nodes that can hold it earliest; backfills go to the least loaded node.
"""

from __future__ import annotations

from collections.abc import Sequence

from app.sched.core import PassRules
from app.sched.order import Scored
from app.sched.params import MemoryBackfillParams
from app.sched.policies.base import BasePolicy

NAME = "memory_backfill"


class MemoryBackfillPolicy(BasePolicy):
    NAME = NAME
    Params = MemoryBackfillParams

    def rules(self, now: float, ranked: Sequence[Scored]) -> PassRules:
        return PassRules(
            reservation_depth=self.params.reservation_depth, one_reservation_per_node=True
        )

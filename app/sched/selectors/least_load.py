"""The least loaded nodes first, by current cpu load (seed 000, backfill node choice)."""

from __future__ import annotations

import numpy as np

from app.sched.selectors.base import NodeView, smallest_k
from app.sched.timeline import Triple

NAME = "least_load"


class LeastLoadSelector:
    NAME = NAME
    IN_ORDER = False

    def order(self, view: NodeView, cand: np.ndarray, d: Triple, k: int) -> np.ndarray:
        return cand[smallest_k(view.cluster.cpu_load[cand], k)]

"""The first nodes that fit, in node-id order (Torque's and Slurm's default)."""

from __future__ import annotations

import numpy as np

from app.sched.selectors.base import NodeView
from app.sched.timeline import Triple

NAME = "first_fit"


class FirstFitSelector:
    NAME = NAME
    IN_ORDER = True

    def order(self, view: NodeView, cand: np.ndarray, d: Triple, k: int) -> np.ndarray:
        return cand[:k]

"""The node with the highest evaluation E first (docs/methods.md §4, seed 001 §3.1)."""

from __future__ import annotations

import numpy as np

from app.sched.selectors.base import NodeView, smallest_k
from app.sched.timeline import Triple

NAME = "evaluation"


def evaluation(view: NodeView, nodes: np.ndarray) -> np.ndarray:
    """E = W_cpu·(1−load)·ghz/ghz_min + W_ram·(1−ram_usage)·ram/ram_min, for each node.

    (1 − ram_usage)·ram is the node's free memory, which is how it is computed here.
    """
    p = view.evaluation
    cpu_part = (1.0 - view.cluster.cpu_load[nodes]) * view.cluster.cpu_ghz[nodes]
    free_mem = np.maximum(view.profile.free[1][nodes], 0)
    return (p.cpu_weight / p.cpu_ghz_min) * cpu_part + (p.ram_weight / p.ram_min_mib) * free_mem


class EvaluationSelector:
    NAME = NAME
    IN_ORDER = False

    def order(self, view: NodeView, cand: np.ndarray, d: Triple, k: int) -> np.ndarray:
        return cand[smallest_k(-evaluation(view, cand), k)]

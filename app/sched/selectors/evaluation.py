"""The node with the highest evaluation E first (algorithms.md §4, seed 001 §3.1)."""

from __future__ import annotations

import numpy as np

from app.sched.selectors.base import NodeView, smallest_k
from app.sched.timeline import Triple

NAME = "evaluation"


def evaluation(view: NodeView, nodes: np.ndarray) -> np.ndarray:
    """E = W_cpu·(1−load)·ghz/ghz_min + W_ram·(1−ram_usage)·ram/ram_min, for each node."""
    p = view.evaluation
    cap_mem = view.cluster.cap[1][nodes].astype(np.float64)
    free_mem = np.maximum(view.profile.free[1][nodes], 0).astype(np.float64)
    ram_usage = np.divide(cap_mem - free_mem, cap_mem, out=np.ones_like(cap_mem), where=cap_mem > 0)
    cpu_part = (1.0 - view.cluster.cpu_load[nodes]) * view.cluster.cpu_ghz[nodes] / p.cpu_ghz_min
    ram_part = (1.0 - ram_usage) * cap_mem / p.ram_min_mib
    return p.cpu_weight * cpu_part + p.ram_weight * ram_part


class EvaluationSelector:
    NAME = NAME

    def order(self, view: NodeView, cand: np.ndarray, d: Triple, k: int) -> np.ndarray:
        return cand[smallest_k(-evaluation(view, cand), k)]

"""The node with the lowest fragment score after placement first (docs/methods.md §5, seed 003).

score = standard deviation, over the resource kinds a node has, of the used share u = r / (r + a);
ties go to the smallest normalised leftover (best fit), then to the node id.
"""

from __future__ import annotations

import numpy as np

from app.sched.selectors.base import NodeView, smallest_k
from app.sched.timeline import Triple

NAME = "fragment"


def fragment_scores(cap: np.ndarray, free: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(score, leftover) for nodes given (3, n) capacity and free arrays."""
    has = cap > 0
    share = np.divide(cap - free, cap, out=np.zeros(cap.shape), where=has)
    count = has.sum(axis=0)
    mean = share.sum(axis=0) / count
    var = (np.where(has, share - mean, 0.0) ** 2).sum(axis=0) / count
    leftover = np.divide(free, cap, out=np.zeros(cap.shape), where=has).sum(axis=0)
    return np.sqrt(var), leftover


class FragmentSelector:
    NAME = NAME
    IN_ORDER = False

    def order(self, view: NodeView, cand: np.ndarray, d: Triple, k: int) -> np.ndarray:
        cap = view.cluster.cap[:, cand]
        after = np.stack([view.profile.free[r][cand] - d[r] for r in range(3)])
        score, leftover = fragment_scores(cap, after)
        return cand[smallest_k(np.round(score, 9), k, tiebreak=leftover)]

"""What a node selector is, and the deterministic top-k helper they share.

A selector ranks the candidate nodes for one job: `order(view, cand, demand, k)` returns the best
`k` of `cand` (absolute node indices, ascending), best first. Ties always go to the lower index,
which is the lower node id within a queue. The best k are the first k of one ranking of `cand`, so
for n <= k the best n are the first n of the best k (a pass ranks once, deep enough for both:
tests/sched/test_fast_paths.py holds every selector to it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from app.sched.cluster import ClusterIndex
from app.sched.params import EvaluationParams
from app.sched.timeline import Profile, Triple


@dataclass(frozen=True, slots=True)
class NodeView:
    """What a selector may read: static node facts and the pass's current free resources."""

    cluster: ClusterIndex
    profile: Profile
    evaluation: EvaluationParams


class Selector(Protocol):
    NAME: str
    # whether order(view, cand, d, k) is cand[:k]: then a pass may find only the first candidates
    IN_ORDER: bool

    def order(self, view: NodeView, cand: np.ndarray, d: Triple, k: int) -> np.ndarray: ...


def smallest_k(keys: np.ndarray, k: int, tiebreak: np.ndarray | None = None) -> np.ndarray:
    """Positions of the k smallest keys, ordered by (key, tiebreak, position)."""
    n = len(keys)
    if k < n:
        kth = np.partition(keys, k - 1)[k - 1]
        sel = np.flatnonzero(keys <= kth)
    else:
        sel = np.arange(n)
    if tiebreak is None:
        order = np.argsort(keys[sel], kind="stable")
    else:
        order = np.lexsort((sel, tiebreak[sel], keys[sel]))
    return sel[order][:k]

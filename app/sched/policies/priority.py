"""Weighted priority with a starvation threshold and reservation (docs/methods.md §3, seeds 001/002).

P = min(w·Y + k1·p_user + k2·p_queue + k3·t_wait(min)·E, P_max), VIP first. A blocked job is
reserved only once P reaches P_max or it has waited `reserve_after_wait_s`; until then lower
jobs that fit may start, and while reservations exist they backfill into the gaps.
`order` may replace the weighted order by fcfs, sjf, f1 (Carastan-Neto et al. 2017) or fitted (a
score of the request, size and submit time whose weights `hpcsched tune` fits on the site's trace);
`backfill_order=sjf` tries the jobs left once the reservations are made shortest first (EASY-SJBF).
`wait_cap_s` adds the aging term to any order: a job that has waited that long ranks ahead of every
job that has not, first come, first served among them (`order.aged`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from app.sched.cluster import ClusterIndex
from app.sched.core import PassRules
from app.sched.model import Job
from app.sched.order import (
    ScoreAll,
    Scored,
    aged,
    each,
    expansion_factor,
    f1_score,
    fcfs_scores,
    fitted_score,
    sjf_score,
    weighted_score,
)
from app.sched.params import PriorityParams
from app.sched.policies.base import BasePolicy, StandingKey, standing
from app.sched.selectors import NodeView
from app.sched.selectors.evaluation import evaluation

NAME = "priority"

_PLAIN_ORDERS = {"fcfs": fcfs_scores, "sjf": each(sjf_score), "f1": each(f1_score)}


class PriorityPolicy(BasePolicy):
    NAME = NAME
    Params = PriorityParams
    params: PriorityParams

    def scorer(self, cluster: ClusterIndex, view: NodeView) -> ScoreAll:
        order = self._order(cluster, view)
        cap = self.params.wait_cap_s
        return order if cap is None else aged(order, cap)

    def _order(self, cluster: ClusterIndex, view: NodeView) -> ScoreAll:
        p = self.params
        standing_order = self._standing_order()
        if standing_order is not None:
            return standing_order

        def weighted(job: Job, now: float) -> Scored:
            e = p.resource_evaluation
            if e is None:
                e = _best_evaluation(job, cluster, view)
            return weighted_score(job, now, p, e)

        return each(weighted)

    def _standing_order(self) -> ScoreAll | None:
        """The order when it is fcfs, sjf, f1 or fitted (whose ranks never move with time)."""
        p = self.params
        if p.order == "fitted":
            return each(lambda job, now: fitted_score(job, p))
        return _PLAIN_ORDERS.get(p.order)

    def standing_key(self) -> StandingKey | None:
        """fcfs, sjf, f1 and fitted keep a job's rank with time; the weighted order does not (the age
        term, and the reservation threshold), nor any order with a wait cap (a job jumps ahead once
        it has waited the cap), nor a selective reservation (who may reserve moves with time)."""
        plain = self._standing_order()
        moving = self.params.wait_cap_s is not None or self.params.reserve_xfactor is not None
        return None if plain is None or moving else standing(plain)

    def rules(self, now: float, ranked: Sequence[Scored]) -> PassRules:
        p = self.params
        scores = {s.job.id: s for s in ranked} if p.order == "weighted" else {}

        def starving(job: Job) -> bool:
            if p.reserve_xfactor is not None and expansion_factor(job, now) < p.reserve_xfactor:
                return False  # selective reservation: not yet expanded enough
            if p.order != "weighted":
                return True
            capped = scores[job.id].factors["capped"] > 0
            return capped or now - job.submit_time >= p.reserve_after_wait_s

        key = _shortest_first if p.backfill_order == "sjf" else None
        return PassRules(reservation_depth=p.reservation_depth, may_reserve=starving, backfill_key=key)


def _shortest_first(job: Job) -> tuple[bool, float]:
    """Natives before migrated jobs, then the shortest estimate."""
    return job.migrated, job.walltime_s


def _best_evaluation(job: Job, cluster: ClusterIndex, view: NodeView) -> float:
    """E of the strongest usable node the job may run on (1.0 when it has none)."""
    elig = cluster.eligible_for(job)
    nodes = elig.take(np.arange(len(cluster)))
    nodes = nodes[cluster.usable[nodes]]
    return float(evaluation(view, nodes).max()) if len(nodes) else 1.0

"""HEFT (Topcuoglu, Hariri and Wu, 2002), the field's standard list scheduler, for comparison.

Tasks are taken by decreasing upward rank, rank(v) = C̄(v) + max over successors s of
(c̄(v, s) + rank(s)), where c̄ is the mean transfer time of the edge over distinct pairs of groups
(mean latency + bytes × mean seconds-per-byte). Each task goes to the group and slot giving its
earliest finish time, inserted into an idle gap when one is long enough. Ties: the earlier task in
topological order, then the lower group, then the lower slot.
"""

from __future__ import annotations

import numpy as np

from app.sched.dag.graph import Compiled
from app.sched.dag.model import Plan, Step, TaskStatus
from app.sched.dag.state import PlanState

NAME = "heft"
Option = tuple[float, int, int, float]  # (finish, group, slot, start)


def mean_transfer(c: Compiled) -> tuple[float, float]:
    """(mean latency, mean seconds per byte) over ordered pairs of distinct groups; zeros for one group."""
    g = c.n_groups
    if g < 2:
        return 0.0, 0.0
    off = ~np.eye(g, dtype=bool)
    return float(c.lat[off].mean()), float(c.inv_bw[off].mean())


def upward_rank(c: Compiled) -> np.ndarray:
    lat, per_byte = mean_transfer(c)
    rank = c.mean_cost.astype(float)
    for u in reversed(c.topo):
        if c.succs[u]:
            rank[u] = c.mean_cost[u] + max(lat + data * per_byte + rank[v] for v, data in c.succs[u])
    return rank


class HeftPlanner:
    NAME = NAME

    def plan(self, c: Compiled, explain: bool = False) -> Plan:
        state = PlanState(c)
        rank = upward_rank(c)
        position = {v: i for i, v in enumerate(c.topo)}
        pending = [v for v, t in enumerate(c.problem.tasks) if t.status == TaskStatus.PENDING]
        pending.sort(key=lambda v: (-rank[v], position[v]))
        steps: list[Step] = []
        for v in pending:
            ready = state.arrival(v)
            options = self._options(state, v, ready, prune=not explain)
            _, r, k, start = options[0]
            state.place(v, r, k, start)
            if explain:
                steps.append(_step(v, options))
        return Plan(NAME, state.result(), steps)

    @staticmethod
    def _options(state: PlanState, v: int, ready: np.ndarray, prune: bool) -> list[Option]:
        """(finish, group, slot, start), best first: the best slot of each group tried; with `prune`, groups
        whose earliest possible finish (data arrival + cost) cannot beat the best found are skipped."""
        cost = state.c.cost[v]
        bound = ready + cost
        found: list[Option] = []
        for r in np.argsort(bound, kind="stable"):
            r = int(r)
            if not np.isfinite(bound[r]) or (prune and found and bound[r] > found[0][0]):
                break
            d = float(cost[r])
            starts = [lane.earliest(float(ready[r]), d) for lane in state.lanes[r]]
            best = min((t + d, r, k, t) for k, t in enumerate(starts))
            found.append(best)
            found.sort()
        return found


def _step(v: int, options: list[Option]) -> Step:
    """The chosen group and the best other group, scored by finish time."""
    eft, r, _, start = options[0]
    if len(options) < 2:
        return Step(v, r, eft, start)
    alt_eft, alt_r, _, _ = options[1]
    return Step(v, r, eft, start, v, alt_r, alt_eft)

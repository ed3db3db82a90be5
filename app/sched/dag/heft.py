"""HEFT (Topcuoglu, Hariri and Wu, 2002), the field's standard list scheduler, for comparison.

Tasks are taken by decreasing upward rank, rank(v) = C̄(v) + max over successors s of
(c̄(v, s) + rank(s)), where c̄ is the mean transfer time of the edge over distinct pairs of groups
(mean latency + bytes × mean seconds-per-byte). Each task goes to the group and slot giving its
earliest finish time, inserted into an idle gap when one is long enough. Ties: the earlier task in
topological order, then the lower group, then the lower slot.
"""

from __future__ import annotations

import heapq

import numpy as np

from app.sched.dag import list_kernel
from app.sched.dag.graph import Compiled
from app.sched.dag.model import Late, Plan, Step, TaskStatus, check
from app.sched.dag.state import PlanState

NAME = "heft"


def mean_transfer(c: Compiled) -> tuple[float, float]:
    """(mean latency, mean seconds per byte) over ordered pairs of distinct groups; zeros for one group."""
    g = c.n_groups
    if g < 2:
        return 0.0, 0.0
    off = ~np.eye(g, dtype=bool)
    return float(c.lat[off].mean()), float(c.inv_bw[off].mean())


def upward_rank(c: Compiled) -> np.ndarray:
    lat, per_byte = mean_transfer(c)
    if list_kernel.COMPILED:
        return list_kernel.upward(c.mean_cost.astype(float), lat, per_byte, *list_kernel.topo_succs(c))
    rank = c.mean_cost.astype(float)
    for u in reversed(c.topo):
        if c.succs[u]:
            rank[u] = c.mean_cost[u] + max(lat + data * per_byte + rank[v] for v, data in c.succs[u])
    return rank


class HeftPlanner:
    NAME = NAME

    def plan(self, c: Compiled, explain: bool = False, late: Late | None = None) -> Plan:
        """HEFT's plan; `late` (`model.check`) is asked only by the Python loop (`explain`): the
        compiled one is not interrupted (`best` runs it only when it is expected to fit)."""
        rank = upward_rank(c)
        if list_kernel.COMPILED and not explain:  # the same plan: tasks in rank order are always ready
            return Plan(NAME, list_kernel.place_all(c, rank))
        state = PlanState(c)
        position = {v: i for i, v in enumerate(c.topo)}
        pending = [v for v, t in enumerate(c.problem.tasks) if t.status == TaskStatus.PENDING]
        pending.sort(key=lambda v: (-rank[v], position[v]))
        lanes = Lanes(state)
        steps: list[Step] = []
        for k, v in enumerate(pending):
            check(late, k, len(pending))
            start, finish = lanes.earliest_finish(state.arrival(v), c.cost[v], exact=explain)
            i = int(np.argmin(finish))  # lanes run group by group, slot by slot: ties go to the lower
            r = int(lanes.group[i])
            state.place(v, r, int(lanes.slot[i]), float(start[i]))
            lanes.refresh(i)
            if explain:
                steps.append(_step(v, r, float(start[i]), finish, lanes.group))
        return Plan(NAME, state.result(), steps)


class Lanes:
    """Every slot of every group side by side, so the plain append case is one vector operation and
    only the slots with a long enough idle gap before their tail are searched one by one."""

    def __init__(self, state: PlanState) -> None:
        self.flat = [lane for lanes in state.lanes for lane in lanes]
        self.group = np.array([r for r, lanes in enumerate(state.lanes) for _ in lanes], dtype=np.int64)
        self.slot = np.array([k for lanes in state.lanes for k in range(len(lanes))], dtype=np.int64)
        self.tail = np.array([lane.tail for lane in self.flat])
        self.max_gap = np.array([lane.max_gap for lane in self.flat])
        self.gap_end = np.array([lane.last_gap_end for lane in self.flat])

    def refresh(self, i: int) -> None:
        lane = self.flat[i]
        self.tail[i], self.max_gap[i], self.gap_end[i] = lane.tail, lane.max_gap, lane.last_gap_end

    def earliest_finish(
        self, arrival: np.ndarray, cost: np.ndarray, exact: bool, bias: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """(start, finish) per lane. Without `exact`, a lane whose earliest possible finish (data
        arrival + cost) cannot beat the best found keeps its append-at-the-tail time (an upper bound).
        `bias` (per group) is added to the finish when comparing lanes (PEFT's optimistic cost)."""
        ready, d = arrival[self.group], cost[self.group]
        extra = bias[self.group] if bias is not None else np.zeros(ready.size)
        start = np.maximum(ready, self.tail)
        finish = start + d
        maybe = np.flatnonzero((self.max_gap >= d) & (ready + d <= self.gap_end))
        if maybe.size:
            bound = ready[maybe] + d[maybe] + extra[maybe]
            best = float((finish + extra).min())
            order = np.argsort(bound, kind="stable")
            flat = self.flat
            picked = maybe[order]
            for i, r, di, e, b in zip(picked.tolist(), ready[picked].tolist(), d[picked].tolist(),
                                      extra[picked].tolist(), bound[order].tolist(), strict=True):
                if not exact and b > best:
                    break
                s = flat[i].earliest(r, di)
                start[i], finish[i] = s, s + di
                best = min(best, s + di + e)
        return start, finish


def list_schedule(c: Compiled, priority: np.ndarray, name: str) -> Plan:
    """HEFT's placement (earliest finish, idle gaps used) with any task priority: the ready task of
    highest priority goes first (ties: topological position), so any priority gives a valid order."""
    if list_kernel.COMPILED:
        return Plan(name, list_kernel.place_all(c, priority))
    state = PlanState(c)
    position = {v: i for i, v in enumerate(c.topo)}
    ready = [(-priority[v], position[v], v) for v in state.ready]
    heapq.heapify(ready)
    lanes = Lanes(state)
    while ready:
        v = heapq.heappop(ready)[2]
        start, finish = lanes.earliest_finish(state.arrival(v), c.cost[v], exact=False)
        i = int(np.argmin(finish))
        for s in state.place(v, int(lanes.group[i]), int(lanes.slot[i]), float(start[i])):
            heapq.heappush(ready, (-priority[s], position[s], s))
        lanes.refresh(i)
    return Plan(name, state.result())


def _step(v: int, r: int, start: float, finish: np.ndarray, group: np.ndarray) -> Step:
    """The chosen group and the best other group, scored by finish time."""
    chosen = float(finish[group == r].min())
    others = np.where(group != r, finish, np.inf)
    if not np.isfinite(others.min()):
        return Step(v, r, chosen, start)
    j = int(np.argmin(others))
    return Step(v, r, chosen, start, v, int(group[j]), float(others[j]))

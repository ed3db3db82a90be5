"""Modified dynamic level (algorithms.md §6, seed 004): choose the (task, group) pair together.

    MDL(v, R) = SL(v) − max(t_d(v, R), t_a(R)) + Δ(v, R),   Δ(v, R) = C̄(v) − C(v, R)

The part that never changes, SL(v) + C̄(v) − C(v, R), is computed once per task (`base`). t_d(v, R)
is fixed once v is ready (its predecessors are all placed), and t_a(R) (the group's earliest free
slot) only grows. So after placing a task on R only column R of the MDL matrix can change, and only
downwards: the planner refreshes that column, recomputes the best pair of the tasks whose best was
on R, and takes the largest. Each step costs O(ready + tasks touched × G) in a few vector
operations, not O(ready × G) pairs scored one by one.

Ties: the lower task index (request order), then the lower group index — what `argmax` gives.
A group with several slots starts the task on the busiest slot that is free by then (best fit),
keeping earlier-free slots for tasks whose data arrive sooner.
"""

from __future__ import annotations

import heapq

import numpy as np

from app.sched.dag.graph import Compiled
from app.sched.dag.model import Plan, Step
from app.sched.dag.state import PlanState

NAME = "mdl"


def base_matrix(c: Compiled) -> np.ndarray:
    """SL(v) + C̄(v) − C(v, R); −inf where R cannot run v."""
    return c.static_level[:, None] + c.mean_cost[:, None] - c.cost


def best_fit_slot(state: PlanState, r: int, start: float) -> int:
    """The slot of group r free by `start` that became free last (lowest index on ties)."""
    best_k, best_tail = 0, -np.inf
    for k, lane in enumerate(state.lanes[r]):
        if best_tail < lane.tail <= start:
            best_k, best_tail = k, lane.tail
    return best_k


class ReadyPool:
    """The ready tasks' MDL columns, packed: position p holds one ready task, arrays are (G, positions)
    so a group's row is contiguous, and freed positions are reused lowest first, so every vector
    operation spans the widest ready set seen, not the whole workflow."""

    def __init__(self, n_groups: int, capacity: int) -> None:
        self.base = np.zeros((n_groups, capacity))
        self.td = np.full((n_groups, capacity), np.inf)
        self.mdl = np.full((n_groups, capacity), -np.inf)
        self.best = np.full(capacity, -np.inf)
        self.arg = np.zeros(capacity, dtype=np.int64)
        self.task = np.full(capacity, -1, dtype=np.int64)
        self.free: list[int] = []
        self.hi = 0  # positions in use are below hi

    def add(self, v: int, base: np.ndarray, td: np.ndarray, ta: np.ndarray) -> None:
        p = heapq.heappop(self.free) if self.free else self._grow()
        self.task[p], self.base[:, p], self.td[:, p] = v, base, td
        self.mdl[:, p] = base - np.maximum(td, ta)
        self.arg[p] = int(np.argmax(self.mdl[:, p]))
        self.best[p] = self.mdl[self.arg[p], p]

    def _grow(self) -> int:
        if self.hi == self.best.size:
            extra = max(self.hi, 16)
            self.base = np.hstack([self.base, np.zeros((self.base.shape[0], extra))])
            self.td = np.hstack([self.td, np.full((self.td.shape[0], extra), np.inf)])
            self.mdl = np.hstack([self.mdl, np.full((self.mdl.shape[0], extra), -np.inf)])
            self.best = np.concatenate([self.best, np.full(extra, -np.inf)])
            self.arg = np.concatenate([self.arg, np.zeros(extra, dtype=np.int64)])
            self.task = np.concatenate([self.task, np.full(extra, -1, dtype=np.int64)])
        self.hi += 1
        return self.hi - 1

    def top(self, exclude: int = -1) -> int:
        """Position of the largest MDL; ties to the lower task index. -1 when nothing is left."""
        best = self.best[:self.hi]
        if exclude >= 0:
            best = best.copy()
            best[exclude] = -np.inf
        if not self.hi or best.max() == -np.inf:
            return -1
        tied = np.flatnonzero(best == best.max())
        return int(tied[0] if tied.size == 1 else tied[np.argmin(self.task[tied])])

    def remove(self, p: int) -> None:
        self.task[p], self.best[p] = -1, -np.inf
        self.td[:, p], self.mdl[:, p] = np.inf, -np.inf
        heapq.heappush(self.free, p)

    def group_later(self, r: int, ta: float) -> None:
        """t_a(r) grew: refresh row r, and the best pair of every task whose best was on r."""
        hi = self.hi
        self.mdl[r, :hi] = self.base[r, :hi] - np.maximum(self.td[r, :hi], ta)
        stale = np.flatnonzero((self.arg[:hi] == r) & (self.best[:hi] > -np.inf))
        if stale.size:
            sub = self.mdl[:, stale]
            self.arg[stale] = np.argmax(sub, axis=0)
            self.best[stale] = sub[self.arg[stale], np.arange(stale.size)]


class MdlPlanner:
    NAME = NAME

    def plan(self, c: Compiled, explain: bool = False) -> Plan:
        state = PlanState(c)
        base = base_matrix(c)
        ta = np.array([min(lane.tail for lane in lanes) for lanes in state.lanes], dtype=float)
        pool = ReadyPool(c.n_groups, min(c.n_tasks, 256) or 1)
        for v in state.ready:
            pool.add(v, base[v], state.arrival(v), ta)
        steps: list[Step] = []
        while (p := pool.top()) >= 0:
            v, r = int(pool.task[p]), int(pool.arg[p])
            start = max(float(pool.td[r, p]), float(ta[r]))
            if explain:
                steps.append(_step(pool, p, start))
            newly = state.place(v, r, best_fit_slot(state, r, start), start)
            pool.remove(p)
            new_ta = min(lane.tail for lane in state.lanes[r])
            if new_ta != ta[r]:
                ta[r] = new_ta
                pool.group_later(r, new_ta)
            for s in newly:
                pool.add(s, base[s], state.arrival(s), ta)
        return Plan(NAME, state.result(), steps)


def _step(pool: ReadyPool, p: int, start: float) -> Step:
    """The chosen pair and the best other pair: the task's second-best group or the best other task."""
    v, r = int(pool.task[p]), int(pool.arg[p])
    column = pool.mdl[:, p].copy()
    column[r] = -np.inf
    alt_r = int(np.argmax(column))
    q = pool.top(exclude=p)
    candidates = [(column[alt_r], -v, -alt_r)]
    if q >= 0:
        candidates.append((pool.best[q], -int(pool.task[q]), -int(pool.arg[q])))
    score, nv, nr = max(candidates)
    if score == -np.inf:
        return Step(v, r, float(pool.best[p]), start)
    return Step(v, r, float(pool.best[p]), start, -nv, -nr, float(score))

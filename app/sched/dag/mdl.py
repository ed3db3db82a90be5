"""Modified dynamic level (algorithms.md §6, seed 004): choose the (task, group) pair together.

    MDL(v, R) = SL(v) − max(t_d(v, R), t_a(R)) + Δ(v, R),   Δ(v, R) = C̄(v) − C(v, R)

The part that never changes, SL(v) + C̄(v) − C(v, R), is computed once per task (`base`). t_d(v, R)
is fixed once v is ready (its predecessors are all placed), and t_a(R) (the group's earliest free
slot) only grows. So after placing a task on R only column R of the MDL matrix can change, and only
downwards: the planner refreshes that column, recomputes the best pair of the rows whose best was
on R, and takes the largest row. Each step costs O(T + rows touched × G), not O(ready × G).

Ties: the lower task index (request order), then the lower group index — what `argmax` gives.
A group with several slots starts the task on the busiest slot that is free by then (best fit),
keeping earlier-free slots for tasks whose data arrive sooner.
"""

from __future__ import annotations

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


class MdlPlanner:
    NAME = NAME

    def plan(self, c: Compiled, explain: bool = False) -> Plan:
        state = PlanState(c)
        base = base_matrix(c)
        ta = np.array([min(lane.tail for lane in lanes) for lanes in state.lanes], dtype=float)
        td = np.full(c.cost.shape, np.inf)
        mdl = np.full(c.cost.shape, -np.inf)
        row_best = np.full(c.n_tasks, -np.inf)
        row_arg = np.zeros(c.n_tasks, dtype=np.int64)

        def admit(tasks: list[int]) -> None:
            for v in tasks:
                td[v] = state.arrival(v)
                mdl[v] = base[v] - np.maximum(td[v], ta)
                row_arg[v] = int(np.argmax(mdl[v]))
                row_best[v] = mdl[v, row_arg[v]]

        admit(state.ready)
        steps: list[Step] = []
        for _ in range(sum(p is None for p in state.placements)):
            v = int(np.argmax(row_best))
            r = int(row_arg[v])
            start = max(float(td[v, r]), float(ta[r]))
            if explain:
                steps.append(_step(v, r, start, mdl, row_best))
            newly = state.place(v, r, best_fit_slot(state, r, start), start)
            td[v], mdl[v], row_best[v] = np.inf, -np.inf, -np.inf
            new_ta = min(lane.tail for lane in state.lanes[r])
            if new_ta != ta[r]:
                ta[r] = new_ta
                mdl[:, r] = base[:, r] - np.maximum(td[:, r], new_ta)
                stale = np.flatnonzero((row_arg == r) & (row_best > -np.inf))
                if stale.size:
                    row_arg[stale] = np.argmax(mdl[stale], axis=1)
                    row_best[stale] = mdl[stale, row_arg[stale]]
            admit(newly)
        return Plan(NAME, state.result(), steps)


def _step(v: int, r: int, start: float, mdl: np.ndarray, row_best: np.ndarray) -> Step:
    """The chosen pair and the best other pair: the row's second best or the best other row."""
    row = mdl[v].copy()
    row[r] = -np.inf
    alt_r = int(np.argmax(row))
    others = row_best.copy()
    others[v] = -np.inf
    alt_v = int(np.argmax(others))
    candidates = [(row[alt_r], -v, -alt_r), (others[alt_v], -alt_v, -int(np.argmax(mdl[alt_v])))]
    score, nv, nr = max(candidates)
    if score == -np.inf:
        return Step(v, r, float(mdl[v, r]), start)
    return Step(v, r, float(mdl[v, r]), start, -nv, -nr, float(score))

"""Local search after list scheduling: move tasks of the critical path to other slots, re-time in place.

A plan is kept as each pending task's slot (lane) and one processing order, the tasks sorted by
(start, topological position): a valid order of both the DAG and every lane's sequence. Re-timing
walks that order once — start = max(lane free, inputs arrived), finish = start + cost — so the
re-timed plan is valid by construction (precedence, transfers, one task per slot at a time), and
re-timing a list plan never makes it longer (every task can only move left). A move puts one task
of the critical path on another lane, keeping its place in the order; it is kept when it shortens
the plan, or keeps the makespan and lowers the sum of finish times. When no move of the critical
path helps, a few of its tasks are moved at random (seeded) and the search goes on from there,
keeping the best plan seen. It stops at the time budget or after `max_evaluations` re-timings.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass

import numpy as np

from app.sched.dag.graph import Compiled
from app.sched.dag.model import Placement, Plan, TaskStatus
from app.sched.dag.state import PlanState


@dataclass(frozen=True, slots=True)
class SearchResult:
    plan: Plan
    before: float  # makespan of the list plan
    after: float  # makespan after the search (<= before)
    moves: int  # moves kept
    evaluations: int  # re-timings done
    seconds: float
    budget_s: float = 0.0

    @property
    def gain(self) -> float:
        """Fraction of the makespan the search removed."""
        return (self.before - self.after) / self.before if self.before > 0 else 0.0


@dataclass(slots=True)
class Layout:
    lane: list[int]  # per task: flat lane index (-1 for tasks done before the plan)
    key: list[tuple[float, int]]  # per task: (start, topological position), the processing order


class Retimer:
    """Everything re-timing needs, as plain lists (the inner loop runs in Python)."""

    def __init__(self, c: Compiled, plan: Plan) -> None:
        self.c = c
        state = PlanState(c)  # lanes as they are before any pending task: running tasks hold theirs
        self.lane_group = [r for r, lanes in enumerate(state.lanes) for _ in lanes]
        self.lane_index = {(r, k): i for i, (r, k) in enumerate(
            (r, k) for r, lanes in enumerate(state.lanes) for k in range(len(lanes)))}
        self.free0 = [lane.tail for lanes in state.lanes for lane in lanes]
        self.cost = c.cost.tolist()
        self.lat, self.inv_bw = c.lat.tolist(), c.inv_bw.tolist()
        self.preds = c.preds
        self.topo_pos = [0] * c.n_tasks
        for i, v in enumerate(c.topo):
            self.topo_pos[v] = i
        self.pending = [pl.task for pl in plan.placements if pl.status == TaskStatus.PENDING]
        self.fixed = {pl.task: pl for pl in plan.placements if pl.status != TaskStatus.PENDING}

    def layout(self, placements: list[Placement]) -> Layout:
        lane = [-1 if pl.slot is None else self.lane_index[(pl.group, pl.slot)] for pl in placements]
        key = [(pl.start, self.topo_pos[pl.task]) for pl in placements]
        return Layout(lane, key)

    def retime(self, lay: Layout) -> tuple[list[float], list[float], list[int]]:
        """(start, finish, binding) per task; binding = the task whose finish set the start (-1: none)."""
        n = self.c.n_tasks
        start, finish, bind = [0.0] * n, [0.0] * n, [-1] * n
        group = [0] * n
        for v, pl in self.fixed.items():
            start[v], finish[v], group[v] = pl.start, pl.finish, pl.group
        free, last = list(self.free0), [-1] * len(self.free0)
        cost, lat, inv_bw, lane_group = self.cost, self.lat, self.inv_bw, self.lane_group
        for v in sorted(self.pending, key=lay.key.__getitem__):
            lane = lay.lane[v]
            g = lane_group[lane]
            s, b = free[lane], last[lane]
            for u, data in self.preds[v]:
                gu = group[u]
                a = finish[u] + lat[gu][g] + data * inv_bw[gu][g]
                if a > s:
                    s, b = a, u
            s = max(s, 0.0)
            group[v], start[v], bind[v] = g, s, b
            finish[v] = free[lane] = s + cost[v][g]
            last[lane] = v
        return start, finish, bind


def _score(r: Retimer, finish: list[float]) -> tuple[float, float]:
    live = [finish[v] for v in r.pending] + [pl.finish for pl in r.fixed.values()
                                             if pl.status == TaskStatus.RUNNING]
    return (max(live, default=0.0), sum(finish[v] for v in r.pending))


def _better(a: tuple[float, float], b: tuple[float, float]) -> bool:
    """Shorter, or as short with a smaller sum of finish times (so the search cannot cycle)."""
    return a[0] < b[0] - 1e-9 * max(1.0, b[0]) or (a[0] <= b[0] and a[1] < b[1] - 1e-9 * max(1.0, b[1]))


def _critical(r: Retimer, finish: list[float], bind: list[int]) -> list[int]:
    """Pending tasks on the chain of binding constraints that ends at the last finish."""
    if not r.pending:
        return []
    v = max(r.pending, key=lambda t: (finish[t], -t))
    path = []
    while v >= 0 and v not in r.fixed and len(path) <= len(r.pending):
        path.append(v)
        v = bind[v]
    return path


def improve(c: Compiled, plan: Plan, budget_s: float, max_evaluations: int | None = None,
            seed: int = 0) -> SearchResult:
    """The best plan found from `plan` within the budget; never longer than `plan`."""
    t0 = time.perf_counter()
    r = Retimer(c, plan)
    lay = r.layout(plan.placements)
    before = max((pl.finish for pl in plan.placements if pl.status != TaskStatus.DONE), default=0.0)
    start, finish, bind = r.retime(lay)
    cur = _score(r, finish)
    best_lay, best = Layout(list(lay.lane), list(lay.key)), cur
    rng = random.Random(seed)
    evals, moves = 1, 0

    def out_of_budget() -> bool:
        return (max_evaluations is not None and evals >= max_evaluations) or (
            time.perf_counter() - t0 >= budget_s)

    able = [[i for i, g in enumerate(r.lane_group) if np.isfinite(c.cost[v, g])] for v in range(c.n_tasks)]
    if all(len(able[v]) < 2 for v in r.pending):  # no task has anywhere else to go
        return SearchResult(plan, before, before, 0, evals, time.perf_counter() - t0, budget_s)
    while not out_of_budget():
        improved = False
        for v in _critical(r, finish, bind):
            lanes = sorted((x for x in able[v] if x != lay.lane[v]),
                           key=lambda x: (r.cost[v][r.lane_group[x]], x))
            old = lay.lane[v]
            for x in lanes:
                if out_of_budget():
                    break
                lay.lane[v] = x
                s2, f2, b2 = r.retime(lay)
                evals += 1
                score = _score(r, f2)
                if _better(score, cur):
                    start, finish, bind, cur, improved = s2, f2, b2, score, True
                    moves += 1
                    break
                lay.lane[v] = old
            if improved or out_of_budget():
                break
        if improved:
            lay.key = [(start[v], r.topo_pos[v]) if v not in r.fixed else lay.key[v]
                       for v in range(c.n_tasks)]
            if cur < best:
                best_lay, best = Layout(list(lay.lane), list(lay.key)), cur
            continue
        if out_of_budget():
            break
        lay = _perturb(r, Layout(list(best_lay.lane), list(best_lay.key)), able, rng)
        start, finish, bind = r.retime(lay)
        evals += 1
        cur = _score(r, finish)
        lay.key = [(start[v], r.topo_pos[v]) if v not in r.fixed else lay.key[v] for v in range(c.n_tasks)]
        if cur < best:
            best_lay, best = Layout(list(lay.lane), list(lay.key)), cur
    start, finish, _ = r.retime(best_lay)
    placements = _placements(r, plan, best_lay, start, finish)
    after = best[0] if best[0] < before else before
    if best[0] >= before:
        placements = list(plan.placements)
    return SearchResult(Plan(plan.algorithm, placements, plan.steps), before, after, moves, evals,
                        time.perf_counter() - t0, budget_s)


def _perturb(r: Retimer, lay: Layout, able: list[list[int]], rng: random.Random) -> Layout:
    """Move up to three tasks of the best plan's critical path to random lanes able to run them."""
    _, f, b = r.retime(lay)
    path = _critical(r, f, b) or r.pending
    for v in rng.sample(sorted(path), min(3, len(path))):
        choices = [x for x in able[v] if x != lay.lane[v]]
        if choices:
            lay.lane[v] = rng.choice(choices)
    return lay


def _placements(r: Retimer, plan: Plan, lay: Layout, start: list[float],
                finish: list[float]) -> list[Placement]:
    out = []
    lane_slot = {i: k for (_, k), i in r.lane_index.items()}
    for pl in plan.placements:
        if pl.status != TaskStatus.PENDING:
            out.append(pl)
            continue
        v, lane = pl.task, lay.lane[pl.task]
        out.append(Placement(v, r.lane_group[lane], lane_slot[lane], start[v], finish[v], pl.status))
    return out


"""Local search after list scheduling: move tasks of the critical path to other slots, re-time in place.

A plan is kept as each pending task's slot (lane) and one processing order, the tasks sorted by
(start, finish, topological position): a valid order of both the DAG and every lane's sequence (a
zero-length task starts when the task after it on its lane does: by start and topological position
alone it could come after that task, and re-timing from the order would take the lane as free from
its finish, overlapping the two). Re-timing walks that order once — start = max(lane free, inputs
arrived), finish = start + cost — so the re-timed plan is valid by construction (precedence,
transfers, one task per slot at a time), and re-timing a list plan never makes it longer (every task
can only move left). A move puts one task of the critical path on another lane, keeping its place in
the order; it is kept when it shortens the plan, or keeps the makespan and lowers the sum of finish
times. When no move of the critical path helps, a few of its tasks are moved at random (seeded) and
the search goes on from there, keeping the best plan seen. It stops after `max_evaluations`
re-timings, or before work that could not end within the time budget (on the caller's clock): each
step is expected to take as long as the last one of its kind (the first full re-timing sets them),
and one full re-timing is kept in hand for the answer. Given a `patience`, it also stops once it has
stopped gaining (`stalled`): no shorter plan in the last max(patience, n) re-timings, n being the
re-timings it took to find the last one (none found: n = 0).
"""

from __future__ import annotations

import random
from bisect import bisect_left
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from app.sched.dag.bound import reaches
from app.sched.dag.graph import Compiled
from app.sched.dag.model import Placement, Plan, TaskStatus
from app.sched.dag.state import PlanState

RETIME_S_PER_TASK = 4e-6  # about what a full re-timing takes per task (Python loop, 20,000 tasks: 0.08 s)


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
    key: list[tuple[float, float, int]]  # per task: (start, finish, topological position), the order


class Retimer:
    """Everything re-timing needs, as plain lists (the inner loop runs in Python)."""

    def __init__(self, c: Compiled, plan: Plan) -> None:
        self.c = c
        state = PlanState(c)  # lanes as they are before any pending task: running tasks hold theirs
        self.lane_group = [r for r, lanes in enumerate(state.lanes) for _ in lanes]
        self.lane_index = {(r, k): i for i, (r, k) in enumerate(
            (r, k) for r, lanes in enumerate(state.lanes) for k in range(len(lanes)))}
        self.free0 = [lane.tail for lanes in state.lanes for lane in lanes]
        # C(v, g) at [v * groups + g]: a view of the matrix, read as Python floats without the copy
        # a list of lists costs (0.15 s at 20,000 x 200)
        self.cost = memoryview(np.ascontiguousarray(c.cost, dtype=float).reshape(-1))
        self.n_groups = c.n_groups
        self.lat, self.inv_bw = c.lat.tolist(), c.inv_bw.tolist()
        self.preds = c.preds
        self.topo_pos = [0] * c.n_tasks
        for i, v in enumerate(c.topo):
            self.topo_pos[v] = i
        self.pending = [pl.task for pl in plan.placements if pl.status == TaskStatus.PENDING]
        self.fixed = {pl.task: pl for pl in plan.placements if pl.status != TaskStatus.PENDING}

    def layout(self, placements: list[Placement]) -> Layout:
        lane = [-1 if pl.slot is None else self.lane_index[(pl.group, pl.slot)] for pl in placements]
        key = [(pl.start, pl.finish, self.topo_pos[pl.task]) for pl in placements]
        return Layout(lane, key)

    def retime(self, lay: Layout) -> Timing:
        """Re-time every pending task in the order of `lay.key`."""
        n = self.c.n_tasks
        t = Timing(sorted(self.pending, key=lay.key.__getitem__), [0.0] * n, [0.0] * n, [-1] * n, [0] * n)
        for v, pl in self.fixed.items():
            t.start[v], t.finish[v], t.group[v] = pl.start, pl.finish, pl.group
        t.index_lanes(lay, len(self.free0))
        self._run(lay, t, 0, list(self.free0), [-1] * len(self.free0))
        return t

    def retime_from(self, lay: Layout, old: Timing, i: int) -> Timing:
        """Re-time after a change at position i of `old.order`: the tasks before it keep their times."""
        t = Timing(old.order, list(old.start), list(old.finish), list(old.bind), list(old.group))
        free, last = list(self.free0), [-1] * len(self.free0)
        for lane, at in enumerate(old.lane_at):
            k = bisect_left(at, i)
            if k:
                last[lane] = u = old.order[at[k - 1]]
                free[lane] = old.finish[u]
        self._run(lay, t, i, free, last)
        return t

    def _run(self, lay: Layout, t: Timing, i: int, free: list[float], last: list[int]) -> None:
        cost, lat, inv_bw, lane_group, preds = self.cost, self.lat, self.inv_bw, self.lane_group, self.preds
        n_groups = self.n_groups
        start, finish, bind, group = t.start, t.finish, t.bind, t.group
        for v in t.order[i:]:
            lane = lay.lane[v]
            g = lane_group[lane]
            s, b = free[lane], last[lane]
            for u, data in preds[v]:
                gu = group[u]
                a = finish[u] + lat[gu][g] + data * inv_bw[gu][g]
                if a > s:
                    s, b = a, u
            s = max(s, 0.0)
            group[v], start[v], bind[v] = g, s, b
            finish[v] = free[lane] = s + cost[v * n_groups + g]
            last[lane] = v


@dataclass(slots=True)
class Timing:
    order: list[int]  # pending tasks in processing order
    start: list[float]
    finish: list[float]
    bind: list[int]  # the task whose finish set the start (-1: the lane's own free time or now)
    group: list[int]
    lane_at: list[list[int]] = field(default_factory=list)  # per lane: positions in `order`, ascending
    position: list[int] = field(default_factory=list)  # per task: its position in `order`

    def index_lanes(self, lay: Layout, n_lanes: int) -> None:
        self.lane_at = [[] for _ in range(n_lanes)]
        self.position = [0] * len(self.start)
        for i, v in enumerate(self.order):
            self.lane_at[lay.lane[v]].append(i)
            self.position[v] = i


def _score(r: Retimer, t: Timing) -> tuple[float, float]:
    live = [t.finish[v] for v in r.pending] + [pl.finish for pl in r.fixed.values()
                                               if pl.status == TaskStatus.RUNNING]
    return (max(live, default=0.0), sum(t.finish[v] for v in r.pending))


def _better(a: tuple[float, float], b: tuple[float, float]) -> bool:
    """Shorter, or as short with a smaller sum of finish times (so the search cannot cycle)."""
    return a[0] < b[0] - 1e-9 * max(1.0, b[0]) or (a[0] <= b[0] and a[1] < b[1] - 1e-9 * max(1.0, b[1]))


def stalled(done: int, gained_at: int, patience: int | None) -> bool:
    """Whether a search that has made `done` tries, the last gain at try `gained_at` (0: none),
    has stopped gaining: no gain in the last max(`patience`, `gained_at`) tries. None: never."""
    return patience is not None and done - gained_at >= max(patience, gained_at)


def _critical(r: Retimer, t: Timing) -> list[int]:
    """Pending tasks on the chain of binding constraints that ends at the last finish."""
    if not r.pending:
        return []
    v = max(r.pending, key=lambda x: (t.finish[x], -x))
    path = []
    while v >= 0 and v not in r.fixed and len(path) <= len(r.pending):
        path.append(v)
        v = t.bind[v]
    return path


class Search:
    """One local search: the current layout and timing, the best seen, the budget."""

    def __init__(self, c: Compiled, plan: Plan, budget_s: float, max_evaluations: int | None,
                 seed: int, clock: Callable[[], float], bound: float | None = None,
                 patience: int | None = None) -> None:
        self.clock, self.t0 = clock, clock()
        self.budget_s, self.max_evaluations, self.bound = budget_s, max_evaluations, bound
        self.patience, self.gained_at = patience, 0  # the evaluation that last shortened the plan
        self.r = r = Retimer(c, plan)
        self.lay = r.layout(plan.placements)
        t = clock()
        self.timing = r.retime(self.lay)
        # seconds a full re-timing and a partial one (from a moved task on) are expected to take
        self.full_s = self.part_s = clock() - t
        self.cur = _score(r, self.timing)
        self.best_lay, self.best = self._copy(self.lay), self.cur
        self.rng = random.Random(seed)
        self.evals, self.moves = 1, 0
        self.runs = np.isfinite(c.cost)  # (tasks, groups): which groups can run each
        self.slots = np.bincount(np.array(r.lane_group, dtype=np.int64), minlength=c.n_groups)  # lanes
        self._able: dict[int, list[int]] = {}

    def able(self, v: int) -> list[int]:
        """The lanes able to run v, ascending; found when first asked (only critical tasks move)."""
        if v not in self._able:
            self._able[v] = np.flatnonzero(self.runs[v][self.r.lane_group]).tolist()
        return self._able[v]

    def spent(self, next_s: float = 0.0) -> bool:
        """Whether the best plan is as short as any can be, the search has stopped gaining, the
        evaluations are used up, or work expected to take `next_s` seconds could not end within the
        budget with a full re-timing (the answer's) left after it."""
        return reaches(self.best[0], self.bound) or stalled(self.evals, self.gained_at, self.patience) or (
            self.max_evaluations is not None and self.evals >= self.max_evaluations) or (
            self.clock() - self.t0 + next_s + self.full_s >= self.budget_s)

    def _copy(self, lay: Layout) -> Layout:
        return Layout(list(lay.lane), list(lay.key))

    def run(self) -> None:
        if not (self.runs[self.r.pending] @ self.slots >= 2).any():
            return  # no task has anywhere else to go
        while not self.spent(self.part_s):  # room for at least one more move's re-timing
            if not self.step():
                if self.spent(2 * self.full_s):  # a perturbation re-times twice
                    return
                self.perturb()

    def step(self) -> bool:
        """Try moving each critical task to each other lane (cheapest first); keep the first that helps."""
        r, lay = self.r, self.lay
        for v in _critical(r, self.timing):
            old = lay.lane[v]
            row = v * r.n_groups
            others = sorted((x for x in self.able(v) if x != old),
                            key=lambda x: (r.cost[row + r.lane_group[x]], x))
            for x in others:
                if self.spent(self.part_s):
                    return True
                lay.lane[v] = x
                t0 = self.clock()
                t = r.retime_from(lay, self.timing, self.timing.position[v])
                self.part_s = self.clock() - t0
                self.evals += 1
                score = _score(r, t)
                if _better(score, self.cur):
                    self.moves += 1
                    self._settle(score, t)
                    return True
                lay.lane[v] = old
        return False

    def _settle(self, score: tuple[float, float], t: Timing) -> None:
        """Take the timing as current: the order follows the new (start, finish) of each task."""
        r, lay = self.r, self.lay
        for v in r.pending:
            lay.key[v] = (t.start[v], t.finish[v], r.topo_pos[v])
        t.order = sorted(r.pending, key=lay.key.__getitem__)
        t.index_lanes(lay, len(r.free0))
        self.timing, self.cur = t, score
        if score < self.best:
            if score[0] < self.best[0] - 1e-9 * max(1.0, self.best[0]):
                self.gained_at = self.evals
            self.best_lay, self.best = self._copy(lay), score

    def perturb(self) -> None:
        """From the best plan, move up to three of its critical tasks to random lanes able to run them."""
        r, lay = self.r, self._copy(self.best_lay)
        path = _critical(r, r.retime(lay)) or r.pending
        for v in self.rng.sample(sorted(path), min(3, len(path))):
            choices = [x for x in self.able(v) if x != lay.lane[v]]
            if choices:
                lay.lane[v] = self.rng.choice(choices)
        self.lay = lay
        t0 = self.clock()
        t = r.retime(lay)
        self.full_s = self.clock() - t0
        self.evals += 1
        self._settle(_score(r, t), t)


def improve(c: Compiled, plan: Plan, budget_s: float, max_evaluations: int | None = None,
            seed: int = 0, clock: Callable[[], float] = lambda: 0.0,
            bound: float | None = None, patience: int | None = None) -> SearchResult:
    """The best plan found from `plan` within the budget; never longer than `plan`. The core reads no
    clock of its own: `clock` is the caller's (monotonic seconds); without one, time never passes and
    only `max_evaluations` stops the search. `bound`: a makespan no plan can beat
    (`app.sched.dag.bound`): the search does not start, or stops, once the plan reaches it.
    `patience`: stop once it stops gaining (`stalled`, counted in re-timings); None: never. A budget
    too short for the two full re-timings any search makes (its start, the answer) starts none."""
    before = max((pl.finish for pl in plan.placements if pl.status != TaskStatus.DONE), default=0.0)
    if reaches(before, bound) or budget_s < 2 * RETIME_S_PER_TASK * len(plan.placements):
        return SearchResult(plan, before, before, 0, 0, 0.0, budget_s)
    s = Search(c, plan, budget_s, max_evaluations, seed, clock, bound, patience)
    s.run()
    seconds = clock() - s.t0
    if not s.best[0] < before:
        return SearchResult(plan, before, before, s.moves, s.evals, seconds, budget_s)
    t = s.r.retime(s.best_lay)
    placements = _placements(s.r, plan, s.best_lay, t)
    return SearchResult(Plan(plan.algorithm, placements, plan.steps), before, s.best[0], s.moves, s.evals,
                        seconds, budget_s)


def _placements(r: Retimer, plan: Plan, lay: Layout, t: Timing) -> list[Placement]:
    out = []
    lane_slot = {i: k for (_, k), i in r.lane_index.items()}
    for pl in plan.placements:
        if pl.status != TaskStatus.PENDING:
            out.append(pl)
            continue
        v, lane = pl.task, lay.lane[pl.task]
        out.append(Placement(v, r.lane_group[lane], lane_slot[lane], t.start[v], t.finish[v], pl.status))
    return out

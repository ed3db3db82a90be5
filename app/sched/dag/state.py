"""The planning state both planners share: where and when each task is placed, the groups' slots
(lanes) and which tasks are ready.

A lane is one slot of a group. It is idle from `max(now, free_at)`, or from the expected end of a
task already running there.
"""

from __future__ import annotations

import math
from bisect import bisect_right

import numpy as np

from app.sched.dag.graph import Compiled
from app.sched.dag.model import Placement, TaskStatus


class Lane:
    """One slot of a group, kept as its idle gaps: sorted, disjoint, the last one open-ended.

    Keeping the gaps rather than the bookings makes insertion cheap: back-to-back tasks leave no gap,
    so a search walks the few holes, not every booking, and `max_gap` says when there is none to try.
    """

    __slots__ = ("gap_starts", "gap_ends", "max_gap")

    def __init__(self, free_from: float) -> None:
        self.gap_starts: list[float] = [free_from]
        self.gap_ends: list[float] = [np.inf]
        self.max_gap = 0.0  # the longest task a closed gap may hold (`reach`)

    @property
    def last_gap_end(self) -> float:
        """End of the latest closed gap (-inf when there is none): nothing ready later can be inserted."""
        return self.gap_ends[-2] if len(self.gap_ends) > 1 else -np.inf

    @property
    def tail(self) -> float:
        """Start of the open-ended gap: free from then on."""
        return self.gap_starts[-1]

    def hold_until(self, t: float) -> None:
        """Busy until t (a task already running here); only before anything is booked."""
        self.gap_starts[0] = max(self.gap_starts[0], t)

    def earliest(self, ready: float, duration: float) -> float:
        """Earliest start >= ready of an idle stretch of `duration` seconds."""
        starts, ends = self.gap_starts, self.gap_ends
        tail = starts[-1]  # `tail`, read here without a property call: this runs per (task, slot)
        if duration > self.max_gap or ready >= tail:
            return tail if tail > ready else ready  # max(ready, tail), as max() picks on ties
        i = bisect_right(ends, ready)
        t = starts[i] if starts[i] > ready else ready
        if t + duration <= ends[i]:
            return t
        for j in range(i + 1, len(starts)):  # the later gaps all start after `ready`
            if starts[j] + duration <= ends[j]:
                return starts[j]
        raise AssertionError("the open-ended gap always fits")

    def book(self, start: float, finish: float) -> None:
        if finish <= start:
            return  # a zero-length task takes no time from anyone
        i = bisect_right(self.gap_starts, start) - 1
        g0, g1 = self.gap_starts[i], self.gap_ends[i]
        assert g0 <= start and finish <= g1, "booking outside an idle gap"
        starts, ends = [], []  # what is left of the gap: before the task, after it (the open end stays)
        if start > g0:
            starts.append(g0)
            ends.append(start)
        if g1 > finish or g1 == np.inf:
            starts.append(finish)
            ends.append(g1)
        self.gap_starts[i:i + 1] = starts
        self.gap_ends[i:i + 1] = ends
        if g1 != np.inf and reach(g0, g1) >= self.max_gap:
            closed = zip(self.gap_starts[:-1], self.gap_ends[:-1], strict=True)
            self.max_gap = max((reach(a, b) for a, b in closed), default=0.0)
        elif g1 == np.inf and start > g0:
            self.max_gap = max(self.max_gap, reach(g0, start))


def reach(a: float, b: float) -> float:
    """At least the longest duration d with `a + d <= b` in floating point: b − a can be a little
    less than such a d (the sum rounds to b), so a filter by gap length alone would refuse a task the
    fit test `start + d <= end` accepts. The margin (two units in the last place of b) keeps every
    length filter conservative.

    The unit is `np.spacing(b)` (negative for b < 0), taken with `math.ulp`: a third of the time of a
    NumPy call on a scalar, and this runs at every booking. The same value for every finite b
    (tests/dag/test_slots.py); b is never infinite here."""
    return b - a + 2 * (math.ulp(b) if b >= 0 else -math.ulp(b))


class PlanState:
    def __init__(self, c: Compiled) -> None:
        p = c.problem
        self.c = c
        self.now = p.now
        self.finish = np.full(c.n_tasks, np.nan)
        self.group_of = np.full(c.n_tasks, -1, dtype=np.int64)
        self.placements: list[Placement | None] = [None] * c.n_tasks
        self.lanes = [[Lane(max(p.now, g.free_at)) for _ in range(g.slots)] for g in p.groups]
        self._now_row = np.full(c.n_groups, self.now)
        self.waiting = [len(c.preds[v]) for v in range(c.n_tasks)]  # inputs not placed yet
        self._fix_started()
        self.ready = [v for v in range(c.n_tasks)
                      if self.placements[v] is None and self.waiting[v] == 0]

    def _fix_started(self) -> None:
        """Done tasks stay where they were; running ones hold the emptiest lane until their expected end."""
        c, g_index = self.c, {g.id: i for i, g in enumerate(self.c.problem.groups)}
        for v, task in enumerate(c.problem.tasks):
            if task.status == TaskStatus.PENDING:
                continue
            r = g_index[task.group]  # type: ignore[index]
            if task.status == TaskStatus.DONE:
                start = task.start if task.start is not None else task.finish - _finite(c.cost[v, r])
                self._record(Placement(v, r, None, start, task.finish, TaskStatus.DONE))  # type: ignore[arg-type]
                continue
            end = max(self.now, task.start + c.cost[v, r])  # type: ignore[operator]
            lanes = self.lanes[r]
            k = min(range(len(lanes)), key=lambda i: lanes[i].tail)
            lanes[k].hold_until(end)
            self._record(Placement(v, r, k, task.start, end, TaskStatus.RUNNING))  # type: ignore[arg-type]

    def _record(self, pl: Placement) -> list[int]:
        """Store a placement; return the tasks it made ready."""
        v = pl.task
        self.placements[v] = pl
        self.finish[v] = pl.finish
        self.group_of[v] = pl.group
        newly = []
        for s, _ in self.c.succs[v]:
            self.waiting[s] -= 1
            if self.waiting[s] == 0 and self.placements[s] is None:
                newly.append(s)
        return newly

    def arrival(self, v: int) -> np.ndarray:
        """t_d(v, R) for every group R: when all of v's inputs can be there (never before now)."""
        c = self.c
        t = self._now_row.copy()  # (a copy, not np.full: a third of the time, once per task)
        for u, data in c.preds[v]:
            g = self.group_of[u]
            np.maximum(t, self.finish[u] + c.lat[g] + data * c.inv_bw[g], out=t)
        return t

    def place(self, v: int, r: int, slot: int, start: float) -> list[int]:
        finish = start + float(self.c.cost[v, r])
        self.lanes[r][slot].book(start, finish)
        return self._record(Placement(v, r, slot, start, finish, TaskStatus.PENDING))

    def result(self) -> list[Placement]:
        assert all(p is not None for p in self.placements), "a task was left unplaced"
        return self.placements  # type: ignore[return-value]


def _finite(x: float) -> float:
    return float(x) if np.isfinite(x) else 0.0

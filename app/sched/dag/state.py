"""The planning state both planners share: where and when each task is placed, the groups' slots
(lanes) and which tasks are ready.

A lane is one slot of a group: its busy intervals, sorted and disjoint. It starts with one blocked
prefix up to `max(now, free_at)`, or the expected end of a task already running there.
"""

from __future__ import annotations

from bisect import bisect_right

import numpy as np

from app.sched.dag.graph import Compiled
from app.sched.dag.model import Placement, TaskStatus


class Lane:
    __slots__ = ("starts", "finishes", "tasks")

    def __init__(self, free_from: float) -> None:
        self.starts: list[float] = [-np.inf]
        self.finishes: list[float] = [free_from]
        self.tasks: list[int] = [-1]

    @property
    def tail(self) -> float:
        return self.finishes[-1]

    def earliest(self, ready: float, duration: float) -> float:
        """Earliest start >= ready of a gap of `duration` seconds (insertion between bookings)."""
        t = ready
        i = bisect_right(self.finishes, t)
        starts, finishes = self.starts, self.finishes
        while i < len(starts):
            if t + duration <= starts[i]:
                return t
            t = max(t, finishes[i])
            i += 1
        return t

    def book(self, task: int, start: float, finish: float) -> None:
        """Insert keeping (start, finish) order, so a zero-length task at t sorts before one from t on."""
        i = bisect_right(self.starts, start)
        while self.starts[i - 1] == start and self.finishes[i - 1] > finish:
            i -= 1
        self.starts.insert(i, start)
        self.finishes.insert(i, finish)
        self.tasks.insert(i, task)


class PlanState:
    def __init__(self, c: Compiled) -> None:
        p = c.problem
        self.c = c
        self.now = p.now
        self.finish = np.full(c.n_tasks, np.nan)
        self.group_of = np.full(c.n_tasks, -1, dtype=np.int64)
        self.placements: list[Placement | None] = [None] * c.n_tasks
        self.lanes = [[Lane(max(p.now, g.free_at)) for _ in range(g.slots)] for g in p.groups]
        self._waiting = [len(c.preds[v]) for v in range(c.n_tasks)]
        self._fix_started()
        self.ready = [v for v in range(c.n_tasks)
                      if self.placements[v] is None and self._waiting[v] == 0]

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
            lanes[k].finishes[0] = max(lanes[k].tail, end)
            lanes[k].tasks[0] = v
            self._record(Placement(v, r, k, task.start, end, TaskStatus.RUNNING))  # type: ignore[arg-type]

    def _record(self, pl: Placement) -> list[int]:
        """Store a placement; return the tasks it made ready."""
        v = pl.task
        self.placements[v] = pl
        self.finish[v] = pl.finish
        self.group_of[v] = pl.group
        newly = []
        for s, _ in self.c.succs[v]:
            self._waiting[s] -= 1
            if self._waiting[s] == 0 and self.placements[s] is None:
                newly.append(s)
        return newly

    def arrival(self, v: int) -> np.ndarray:
        """t_d(v, R) for every group R: when all of v's inputs can be there (never before now)."""
        c = self.c
        t = np.full(c.n_groups, self.now)
        for u, data in c.preds[v]:
            g = self.group_of[u]
            np.maximum(t, self.finish[u] + c.lat[g] + data * c.inv_bw[g], out=t)
        return t

    def place(self, v: int, r: int, slot: int, start: float) -> list[int]:
        finish = start + float(self.c.cost[v, r])
        self.lanes[r][slot].book(v, start, finish)
        return self._record(Placement(v, r, slot, start, finish, TaskStatus.PENDING))

    def result(self) -> list[Placement]:
        assert all(p is not None for p in self.placements), "a task was left unplaced"
        return self.placements  # type: ignore[return-value]


def _finite(x: float) -> float:
    return float(x) if np.isfinite(x) else 0.0

"""MDL's choice once every task left is ready and every group settled (the last wave).

No task joins the ready set any more, so each group's ready tasks can be sorted once by `base`
(L + Δ, larger first; ties by task). A group is *settled* when every task left can start on it only
at its earliest free slot: all their inputs are there by then, and no idle gap is long enough for any
of them. Its MDL column is then `base − free`, so its best task is the head of its sorted order,
whatever `free` is, and it stays settled (`free` only grows, and a task started at `free` leaves no
new gap). Once every group is settled the planner hands over to `LastWave`: a step costs a few vector
operations over the groups whose best task was the one placed, instead of O(ready). 10,000
independent tasks on 64 groups, or the leaves of a fan-out, are the cases this is for. The planner
tests settledness cheaply by bounds (`settled`) at every step and, now and then, exactly
(`settled_exactly`: every idle gap against every task left), since early gaps often stay too short
for any task while the bounds cannot tell.

The choice is exactly the pool's (tests/dag/test_properties.py): largest MDL, ties to the lower task,
then the lower group; scores are the same floating-point `base − free`, and where rounding makes two
different `base` values score alike, the lower task wins as in the plain scan.
"""

from __future__ import annotations

import numpy as np

from app.sched.dag.slots import GroupSlots


def bounds(td: np.ndarray, dur: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per group, for these ready tasks ((G, m) rows of t_d and C): the latest t_d and the earliest
    t_d + C of a task it can run. As tasks leave they only get looser, so they stay safe to test."""
    able = np.isfinite(dur)
    latest = np.where(able, td, -np.inf).max(axis=1, initial=-np.inf)
    reach = np.where(able, td + dur, np.inf).min(axis=1, initial=np.inf)
    return latest, reach


def settled(slots: GroupSlots, latest: np.ndarray, reach: np.ndarray) -> bool:
    """Every group settled (by the bounds): all inputs there by its earliest free slot, no gap
    ending late enough for any task."""
    return bool(((slots.free >= latest) & (slots.gap_end < reach)).all())


def settled_exactly(slots: GroupSlots, td: np.ndarray, dur: np.ndarray) -> bool:
    """Every group settled, each idle gap tried against every task left ((G, m) rows of t_d and C)."""
    latest, reach = bounds(td, dur)
    if not (slots.free >= latest).all():
        return False
    return all(_no_gap_fits(slots, r, td[r], dur[r]) for r in np.flatnonzero(slots.gap_end >= reach).tolist())


def _no_gap_fits(slots: GroupSlots, r: int, td: np.ndarray, dur: np.ndarray) -> bool:
    able = np.isfinite(dur)
    td, dur = td[able], dur[able]
    for lane in slots.lanes[r]:
        for a, b in zip(lane.gap_starts[:-1], lane.gap_ends[:-1], strict=True):
            if ((np.maximum(td, a) + dur <= b) & (td < b)).any():
                return False
    return True


def _next_run(sorted_base: np.ndarray) -> np.ndarray:
    """Per row of a sorted matrix: for each index, the index where the next smaller value starts."""
    g, m = sorted_base.shape
    out = np.empty((g, m), dtype=np.int64)
    for r in range(g):
        row = sorted_base[r]
        new = np.r_[True, row[1:] != row[:-1]]
        out[r] = np.r_[np.flatnonzero(new)[1:], m][np.cumsum(new) - 1]
    return out


class LastWave:
    def __init__(self, task: np.ndarray, base: np.ndarray, slots: GroupSlots) -> None:
        """Ready tasks by position: task ids (m,) and their (G, m) rows of base; every group settled."""
        self.slots = slots
        self.task, self.base = task, base
        g, m = base.shape
        self.m = m
        self.left = np.ones(m + 1, dtype=bool)
        self.left[m] = True  # a sentinel position: heads past the end stop there
        order = np.lexsort((np.broadcast_to(task, (g, m)), -base), axis=-1)
        self.order = np.hstack([order, np.full((g, 1), m)])
        self.sorted_base = np.hstack([np.take_along_axis(base, order, axis=1), np.full((g, 1), -np.inf)])
        self.next_run = np.hstack([_next_run(self.sorted_base[:, :m]), np.full((g, 1), m)])
        # the three (G, m + 1) tables above, flat: `_rescore` indexes them at (row, head) pairs, and
        # a 1-D gather at row × (m + 1) + head costs a third of a 2-D one at (rows, heads)
        self.width = m + 1
        self.order_at, self.base_at = self.order.ravel(), self.sorted_base.ravel()
        self.next_at = self.next_run.ravel()
        self.head = np.zeros(g, dtype=np.int64)
        self.best = np.full(g, -np.inf)
        self.best_pos = np.full(g, -1, dtype=np.int64)
        self._rescore(np.arange(g))

    def top(self) -> tuple[int, int]:
        """(position, group) of the largest MDL; ties to the lower task, then group. (-1, -1): done."""
        m = np.maximum.reduce(self.best)  # (ufuncs and methods, not numpy's Python-level wrappers
        if m == -np.inf:                  # such as np.flatnonzero: this runs once per task)
            return -1, -1
        rows = (self.best == m).nonzero()[0]
        i = int(self.task[self.best_pos[rows]].argmin())  # rows ascend: equal tasks go to the lower
        return int(self.best_pos[rows[i]]), int(rows[i])

    def placed(self, p: int, r: int) -> None:
        """The task at p was placed on r: rescore r and the groups whose best it was."""
        self.left[p] = False
        rows = (self.best_pos == p).nonzero()[0]
        self._rescore(rows if r in rows else np.concatenate((rows, [r])))

    def _rescore(self, rows: np.ndarray) -> None:
        h = self.head[rows]
        row_at = rows * self.width
        at = row_at + h
        while True:  # skip placed tasks (each row's head only moves forward)
            gone = ~self.left[self.order_at[at]]
            if not np.logical_or.reduce(gone):
                break
            h += gone
            at += gone
        self.head[rows] = h
        free = self.slots.free[rows]
        score = self.base_at[at] - free
        pos = self.order_at[at]
        nxt = self.next_at[at]
        close = ((score > -np.inf) & (self.base_at[row_at + nxt] - free == score)).nonzero()[0]
        for i in close.tolist():  # rounding made a smaller base score alike: the lower task may win
            pos[i] = self._lowest(int(rows[i]), int(h[i]), float(score[i]))
        self.best[rows] = score
        self.best_pos[rows] = np.where(score > -np.inf, pos, -1)

    def _lowest(self, r: int, h: int, score: float) -> int:
        """The lowest task left among those of row r scoring `score` from index h on."""
        order, pos, free = self.order[r], int(self.order[r, h]), self.slots.free[r]
        j = int(self.next_run[r, h])
        while j < self.m and self.sorted_base[r, j] - free == score:
            for k in range(j, int(self.next_run[r, j])):
                if self.left[order[k]]:
                    if self.task[order[k]] < self.task[pos]:
                        pos = int(order[k])
                    break
            j = int(self.next_run[r, j])
        return pos

"""When a task can start at the earliest on a group, idle gaps included, for many tasks at once.

A group's earliest start for a task ready at `ready` and lasting `duration` is the smallest
`Lane.earliest` over its slots. Most of the time no slot has an idle gap the task could use, and the
answer is `max(ready, the earliest tail)`: `GroupSlots` keeps, per group, that tail, the longest idle
gap and the latest end of one, so a whole matrix of tasks × groups costs one vector operation and
only the pairs that might fit a gap are searched. The result is exactly the minimum of
`Lane.earliest` over the slots (tests/dag/test_properties.py checks it).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable

import numpy as np

from app.sched.dag.state import Lane


class GroupSlots:
    def __init__(self, lanes: list[list[Lane]]) -> None:
        self.lanes = lanes
        g = len(lanes)
        self.free = np.empty(g)  # earliest tail over the group's slots
        self.gap = np.empty(g)  # longest closed idle gap over its slots
        self.gap_end = np.empty(g)  # latest end of a closed idle gap (-inf: none)
        self.start_on = [_start_on(group) for group in lanes]
        for r in range(g):
            self.refresh(r)

    def refresh(self, r: int) -> None:
        """Group r's slots changed."""
        lanes = self.lanes[r]
        if len(lanes) == 1:  # most groups, once a step: no generators
            lane = lanes[0]
            self.free[r], self.gap[r], self.gap_end[r] = lane.tail, lane.max_gap, lane.last_gap_end
            return
        self.free[r] = min([lane.tail for lane in lanes])  # (lists, not generators: once a step)
        self.gap[r] = max([lane.max_gap for lane in lanes])
        self.gap_end[r] = max([lane.last_gap_end for lane in lanes])

    def start_matrix(self, ready: np.ndarray, duration: np.ndarray) -> np.ndarray:
        """(tasks, groups) earliest starts; `ready` and `duration` have that shape."""
        s = np.maximum(ready, self.free)
        # the pairs that might fit a gap, as flat indices: 1-D gathers, ~2x cheaper than (row, column) pairs
        at = ((duration <= self.gap) & (ready + duration <= self.gap_end)).ravel().nonzero()[0]
        if at.size:
            groups = (at % self.free.size).tolist()
            pairs = zip(groups, ready.ravel()[at].tolist(), duration.ravel()[at].tolist(), strict=True)
            start_on = self.start_on
            s.ravel()[at] = [start_on[r](t, d) for r, t, d in pairs]  # (s is new, so contiguous: a view)
        return s

    def start_row(self, r: int, ready: np.ndarray, duration: np.ndarray) -> np.ndarray:
        """Earliest starts on group r of tasks given by vectors of ready times and durations."""
        s = np.maximum(ready, self.free[r])
        idx = ((duration <= self.gap[r]) & (ready + duration <= self.gap_end[r])).nonzero()[0]
        if not idx.size:
            return s
        td = ready[idx]
        s[idx] = np.minimum(s[idx], self.in_gaps(r, td, duration[idx], float(np.minimum.reduce(td))))
        return s

    def in_gaps(self, r: int, ready: np.ndarray, duration: np.ndarray, since: float) -> np.ndarray:
        """Each task's earliest start in a closed idle gap of group r (inf where none fits), trying
        only the gaps ending after `since`, a time none of these tasks can start before. Without
        a filter first (which tasks could fit any gap, by length): the fit test is exact, so tasks
        a filter would drop get inf, and filtering costs more calls than it saves here."""
        a, b = _gaps_after(self.lanes[r], since)
        t = np.maximum(ready[:, None], a)  # tasks × gaps
        fits = (t + duration[:, None] <= b) & (ready[:, None] < b)
        return np.minimum.reduce(t, axis=1, where=fits, initial=np.inf)

    def start_after(self, r: int, start: float, finish: float, booked: tuple[float, float],
                    est: np.ndarray, ready: np.ndarray, duration: np.ndarray) -> np.ndarray:
        """`start_row` after a task took [start, finish) on one slot of group r, for tasks whose
        earliest start `est` (before) met that interval. `booked`: that slot's tail and r's latest
        closed-gap end, both before (`gap_end`, -inf when there was none).

        A shortcut, exact: a task with est >= that gap end fitted no closed gap (each would have
        let it start before its end), and those gaps only shrank. It now starts either in the one
        new gap, [slot tail, start) when the booking was at the slot's end, or at
        max(ready, r's new free time). Only the other tasks have the group's gaps searched, and only
        the gaps ending after the earliest of their `est`: a booking only takes idle time away, so
        no task can now start before its earliest start of before.
        """
        tail, gap_end = booked
        if finish <= start:  # nothing was booked
            return self.start_row(r, ready, duration)
        out = np.maximum(ready, self.free[r])
        if start > tail:
            t = np.maximum(ready, tail)
            np.minimum(out, np.where((t + duration <= start) & (ready < start), t, np.inf), out=out)
        rest = ((est < gap_end) | (duration <= 0)).nonzero()[0]
        if rest.size:  # (the new gap, if any, is among r's gaps now: the search below covers it)
            since = float(np.minimum.reduce(est[rest]))
            out[rest] = np.minimum(out[rest], self.in_gaps(r, ready[rest], duration[rest], since))
        return out

    def choose(self, r: int, ready: float, duration: float) -> tuple[int, float]:
        """(slot, start) on group r: the earliest start; among equals a slot where the task fills an
        idle gap, else the one that became free last (best fit); lowest index on ties."""
        if len(self.lanes[r]) == 1:
            return 0, self.lanes[r][0].earliest(ready, duration)
        starts = [lane.earliest(ready, duration) for lane in self.lanes[r]]
        s = min(starts)
        fits = [k for k, t in enumerate(starts) if t == s]
        in_gap = [k for k in fits if self.lanes[r][k].tail > s]
        if in_gap:
            return in_gap[0], s
        return max(fits, key=lambda k: (self.lanes[r][k].tail, -k)), s


def _start_on(lanes: list[Lane]) -> Callable[[float, float], float]:
    """A group's earliest start, the smallest `Lane.earliest` over these slots, as a function of
    (ready, duration) that calls them directly (one slot: that method itself; two: no loop): this
    runs for each pair `start_matrix` searches."""
    if len(lanes) == 1:
        return lanes[0].earliest
    if len(lanes) == 2:
        first, second = lanes[0].earliest, lanes[1].earliest

        def both(ready: float, duration: float) -> float:
            s, t = first(ready, duration), second(ready, duration)
            return t if t < s else s
        return both
    return lambda ready, duration: min([lane.earliest(ready, duration) for lane in lanes])


def _gaps_after(lanes: list[Lane], low: float) -> tuple[np.ndarray, np.ndarray]:
    """(starts, ends) of the closed gaps of all these slots that end after `low` (the others take no
    task ready from `low` on). One tasks × gaps pass over all slots' gaps gives the same minimum as
    one pass per slot: the earliest fitting start of a group is the smallest of its slots'."""
    if len(lanes) == 1:
        j = bisect_right(lanes[0].gap_ends, low)
        return np.array(lanes[0].gap_starts[j:-1]), np.array(lanes[0].gap_ends[j:-1])
    a: list[float] = []
    b: list[float] = []
    for lane in lanes:
        j = bisect_right(lane.gap_ends, low)
        a += lane.gap_starts[j:-1]
        b += lane.gap_ends[j:-1]
    return np.array(a), np.array(b)

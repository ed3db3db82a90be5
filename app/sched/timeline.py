"""Per-node availability profile over time: what each node will have free, and when.

Two parts (algorithms.md §1):
- the *base* profile: free now, growing as running and just-started jobs release their resources.
  It never decreases over time, so "earliest time node x holds demand d" is one vectorized
  comparison over a (N, K) matrix of release steps (`lower_bounds`);
- *bookings* (reservations): per-node intervals that take resources away for a while. Only nodes
  that carry one need the exact, interval-aware check (`window_ok`, `earliest_on`).

All release times and reservation bounds are aligned to the time grain, so answers do not drift
between calls when nothing changed.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from app.sched.cluster import Eligible

Triple = tuple[int, int, int]
INF = math.inf


def align_up(t: float, grain: int) -> float:
    """The first multiple of `grain` (counted from epoch 0) at or after t."""
    return float(math.ceil(t / grain) * grain)


def release_time(end: float, now: float, grain: int) -> float:
    """When resources held until `end` count as free again; an overrunning job frees at the next grain."""
    if end <= now:
        return float(math.floor(now / grain) * grain + grain)
    return align_up(end, grain)


class Profile:
    """Mutable, pass-local availability profile of every node."""

    def __init__(
        self,
        free: np.ndarray,
        releases: Iterable[tuple[int, float, Triple]],
        now: float,
        grain: int,
    ) -> None:
        self.now, self.grain = now, grain
        self.free = [free[r].copy() for r in range(3)]  # contiguous, one array per resource
        self.times, self.cum = _release_matrix(self.free, releases, now)
        self.bookings: dict[int, list[tuple[float, float, Triple]]] = {}
        self.booked = np.zeros(len(self.free[0]), dtype=bool)

    # --- vectorized views -------------------------------------------------------------------
    def fits_now(self, elig: Eligible, d: Triple) -> np.ndarray:
        """Boolean over the eligible nodes: free now covers d (bookings not considered)."""
        ok = elig.take(self.free[0]) >= d[0]
        for r in (1, 2):
            if d[r] > 0:
                ok &= elig.take(self.free[r]) >= d[r]
        return ok

    def lower_bounds(self, elig: Eligible, d: Triple) -> np.ndarray:
        """Per eligible node, the earliest time the base profile covers d (INF if never)."""
        ok = elig.take(self.cum[0]) >= d[0]
        for r in (1, 2):
            if d[r] > 0:
                ok &= elig.take(self.cum[r]) >= d[r]
        first = ok.argmax(axis=1)
        rows = np.arange(len(first))
        t = elig.take(self.times)[rows, first]
        return np.where(ok[rows, first], t, INF)

    # --- exact per-node checks ---------------------------------------------------------------
    def base_at(self, x: int, t: float) -> Triple:
        col = int(np.searchsorted(self.times[x], t, side="right")) - 1
        return (int(self.cum[0][x, col]), int(self.cum[1][x, col]), int(self.cum[2][x, col]))

    def free_at(self, x: int, t: float) -> Triple:
        c, m, g = self.base_at(x, t)
        for start, end, (bc, bm, bg) in self.bookings.get(x, ()):
            if start <= t < end:
                c, m, g = c - bc, m - bm, g - bg
        return (c, m, g)

    def window_ok(self, x: int, t: float, end: float, d: Triple) -> bool:
        """Node x holds d over [t, end), bookings included."""
        points = [t] + [s for s, _, _ in self.bookings.get(x, ()) if t < s < end]
        for p in points:
            c, m, g = self.free_at(x, p)
            if c < d[0] or m < d[1] or g < d[2]:
                return False
        return True

    def earliest_on(self, x: int, t_min: float, walltime_s: float, d: Triple) -> float:
        """The earliest t >= t_min at which node x holds d for walltime_s, bookings included."""
        row = self.times[x]
        cands = {t_min}
        cands.update(float(t) for t in row[(row > t_min) & np.isfinite(row)])
        cands.update(e for _, e, _ in self.bookings.get(x, ()) if e > t_min)
        for t in sorted(cands):
            if self.window_ok(x, t, align_up(t + walltime_s, self.grain), d):
                return t
        return INF

    # --- changes -----------------------------------------------------------------------------
    def start(self, x: int, d: Triple, release: float) -> None:
        """Occupy d on node x from now until `release`."""
        for r in range(3):
            self.free[r][x] -= d[r]
        row = self.times[x]
        k = int(np.searchsorted(row, release, side="left"))
        for r in range(3):
            self.cum[r][x, :k] -= d[r]
        if k < row.shape[0] and row[k] == release:
            return
        if not math.isinf(row[-1]):
            self._grow()
            row = self.times[x]
        row[k + 1 :] = row[k:-1].copy()
        row[k] = release
        for r in range(3):
            c = self.cum[r][x]
            c[k + 1 :] = c[k:-1].copy()
            c[k] = c[k - 1] + d[r]

    def book(self, x: int, start: float, end: float, d: Triple) -> None:
        self.bookings.setdefault(x, []).append((start, end, d))
        self.booked[x] = True

    def _grow(self) -> None:
        n, k = self.times.shape
        times = np.full((n, 2 * k), INF)
        times[:, :k] = self.times
        self.times = times
        for r in range(3):
            cum = np.empty((n, 2 * k), dtype=np.int64)
            cum[:, :k] = self.cum[r]
            cum[:, k:] = self.cum[r][:, -1:]
            self.cum[r] = cum


def _release_matrix(
    free: list[np.ndarray], releases: Iterable[tuple[int, float, Triple]], now: float
) -> tuple[np.ndarray, list[np.ndarray]]:
    """(times (N, K), cumulative free (N, K) per resource); column 0 is `now`, padding is INF."""
    per_node: dict[int, dict[float, list[int]]] = {}
    for x, t, d in releases:
        acc = per_node.setdefault(x, {}).setdefault(t, [0, 0, 0])
        for r in range(3):
            acc[r] += d[r]
    n = len(free[0])
    k = 2 + max((len(v) for v in per_node.values()), default=0)
    times = np.full((n, k), INF)
    times[:, 0] = now
    cum = [np.repeat(free[r][:, None], k, axis=1) for r in range(3)]
    for x, steps in per_node.items():
        running = [int(free[r][x]) for r in range(3)]
        for col, t in enumerate(sorted(steps), start=1):
            times[x, col] = t
            for r in range(3):
                running[r] += steps[t][r]
                cum[r][x, col:] = running[r]
    return times, cum

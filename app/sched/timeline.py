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
import numpy as np

from app.sched.cluster import Eligible

Triple = tuple[int, int, int]
ROW_FLUSH_LIMIT = 64  # below this many touched nodes, folding rows one by one beats a rebuild
Releases = tuple[np.ndarray, np.ndarray, np.ndarray]  # node indices, times, (3, R) amounts
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
        releases: Releases,
        now: float,
        grain: int,
    ) -> None:
        self.now, self.grain = now, grain
        self.free = [free[r].copy() for r in range(3)]  # contiguous, one array per resource
        self.times, self.cum = _release_matrix(self.free, releases, now)
        self.unflushed: dict[int, list[tuple[Triple, float]]] = {}  # starts not yet in `cum`
        self.bookings: dict[int, list[tuple[float, float, Triple]]] = {}
        self.booked = np.zeros(len(self.free[0]), dtype=bool)
        self.first_booking = np.full(len(self.free[0]), INF)  # earliest booking start per node

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
        self._flush_all()
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
        if x in self.unflushed:
            self._flush_row(x)
        col = int(np.searchsorted(self.times[x], t, side="right")) - 1
        c, m, g = self.cum[:, x, col].tolist()
        return (c, m, g)

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
        if x in self.unflushed:
            self._flush_row(x)
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
        """Occupy d on node x from now until `release` (folded into `cum` when next needed)."""
        for r in range(3):
            self.free[r][x] -= d[r]
        self.unflushed.setdefault(x, []).append((d, release))

    def _flush_row(self, x: int) -> None:
        for d, release in self.unflushed.pop(x):
            self._apply_start(x, d, release)

    def _flush_all(self) -> None:
        """Fold every pending start into the matrix: row by row if few, else one rebuild."""
        if not self.unflushed:
            return
        if len(self.unflushed) <= ROW_FLUSH_LIMIT:
            for x in list(self.unflushed):
                self._flush_row(x)
            return
        n, k = self.times.shape
        has = np.isfinite(self.times[:, 1:])
        xs, cols = np.nonzero(has)
        cols = cols + 1
        steps = self.cum[:, xs, cols] - self.cum[:, xs, cols - 1]
        new_x, new_t, new_d = [], [], []
        for x, items in self.unflushed.items():
            for d, release in items:
                new_x.append(x)
                new_t.append(release)
                new_d.append(d)
        self.unflushed = {}
        release = (
            np.concatenate([xs, np.asarray(new_x, dtype=np.int64)]),
            np.concatenate([self.times[xs, cols], np.asarray(new_t, dtype=np.float64)]),
            np.concatenate([steps, np.asarray(new_d, dtype=np.int64).T], axis=1),
        )
        self.times, self.cum = _release_matrix(self.free, release, self.now)

    def _apply_start(self, x: int, d: Triple, release: float) -> None:
        row = self.times[x]
        k = int(np.searchsorted(row, release, side="left"))
        dvec = np.asarray(d, dtype=np.int64)
        self.cum[:, x, :k] -= dvec[:, None]
        if k < row.shape[0] and row[k] == release:
            return
        if not math.isinf(row[-1]):
            self._grow()
            row = self.times[x]
        row[k + 1 :] = row[k:-1].copy()
        row[k] = release
        cum = self.cum[:, x, :]
        cum[:, k + 1 :] = cum[:, k:-1].copy()
        cum[:, k] = cum[:, k - 1] + dvec

    def book(self, x: int, start: float, end: float, d: Triple) -> None:
        self.bookings.setdefault(x, []).append((start, end, d))
        self.booked[x] = True
        self.first_booking[x] = min(self.first_booking[x], start)

    def _grow(self) -> None:
        n, k = self.times.shape
        times = np.full((n, 2 * k), INF)
        times[:, :k] = self.times
        cum = np.empty((3, n, 2 * k), dtype=np.int64)
        cum[:, :, :k] = self.cum
        cum[:, :, k:] = self.cum[:, :, -1:]
        self.times, self.cum = times, cum


def _release_matrix(
    free: list[np.ndarray], releases: Releases, now: float
) -> tuple[np.ndarray, np.ndarray]:
    """(times (N, K), cumulative free (3, N, K)); column 0 is `now`, padding is INF.

    `releases` = (node index array, time array, (3, R) amounts array), in any order.
    """
    xs, ts, amounts = releases
    n = len(free[0])
    base = np.stack(free)
    if len(xs) == 0:
        times = np.full((n, 2), INF)
        times[:, 0] = now
        return times, np.repeat(base[:, :, None], 2, axis=2)
    order = np.lexsort((ts, xs))
    xs, ts, amounts = xs[order], ts[order], amounts[:, order]
    new = np.ones(len(xs), dtype=bool)
    new[1:] = (xs[1:] != xs[:-1]) | (ts[1:] != ts[:-1])
    starts = np.flatnonzero(new)
    ux, ut = xs[starts], ts[starts]
    summed = np.add.reduceat(amounts, starts, axis=1)
    first_of_row = np.ones(len(ux), dtype=bool)
    first_of_row[1:] = ux[1:] != ux[:-1]
    row_start = np.maximum.accumulate(np.where(first_of_row, np.arange(len(ux)), 0))
    col = np.arange(len(ux)) - row_start + 1
    k = int(col.max()) + 2
    times = np.full((n, k), INF)
    times[:, 0] = now
    times[ux, col] = ut
    steps = np.zeros((3, n, k), dtype=np.int64)
    steps[:, :, 0] = base
    steps[:, ux, col] = summed
    cum = np.cumsum(steps, axis=2)
    return times, cum

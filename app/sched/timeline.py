"""Per-node availability profile over time: what each node will have free, and when.

Every node's free resources are a step function of time, kept as a matrix: `times` (K, N), the
instants where something changes (instant 0 is `now`, padding is INF), and `cum` (3, K, N), what is
free from that instant on. Running jobs and started jobs step it up when they end; reservations
(bookings) step it down over their interval. So one vectorized pass answers, for every node at once,
"the earliest time this node holds demand d for w seconds" (`earliest`), and "does it hold d over
[t, end)" (`holds_over`) — the backfill rule of docs/methods.md §1 without a per-node loop.

Changes are recorded as intervals and folded into the matrix only when a question needs it: each
change on all its nodes at once (`_fold`), or many changes in one vectorized rebuild.

All instants but `now` are multiples of the time grain, so answers do not drift between calls.
"""

from __future__ import annotations

import functools
import math
from bisect import bisect_left
from collections.abc import Sequence

import numpy as np

from app.sched import profile_kernels as kernels
from app.sched.cluster import Eligible

Triple = tuple[int, int, int]
# what a job takes on each node: one triple for all, or (3, n) amounts, one column per node (a
# whole-node job takes each node's capacity)
Demand = Triple | np.ndarray
Releases = tuple[np.ndarray, np.ndarray, np.ndarray]  # node indices, times, (3, R) amounts
Change = tuple[float, float, Triple]  # take d over [t0, t1); t0 <= now: in force from now
Batch = tuple[float, float, Demand]  # a change recorded for many nodes at once
Columns = slice | np.ndarray  # some nodes: a slice of the node axis, or node indices
INF = math.inf
# from this many changes waiting on, one rebuild of their rows beats folding them one by one (each
# fold is one compiled call now: 32 measured 4-6 % faster than 8 on conservative/priority passes at
# 10k x 5k and on Python replays, bench/README 2026-11-27)
REBUILD_FROM = 32
# fold a change on all its nodes in a few numpy steps; False folds it node by node on Python
# lists (`_fold_row`, the plain way, kept for checks and as the reference of the tests)
FOLD_BY_BATCH = True
# up to this many instants, a masked min finds a node's first covered instant fastest; past it, its
# (instants, nodes) float temporaries outgrow the cache, and argmax over the booleans wins
MASKED_MIN_WIDTH = 8
# questions and folds walk each node's instants in compiled loops (`app.sched.profile_kernels`);
# False answers them with the numpy code below, the reference of the tests
COMPILED = True
HEAD_COLUMNS = 4  # instants searched for every node before the full search on the few that matter
RADIX_MIN_EVENTS = 2048  # below this many steps, lexsort beats the fixed cost of two radix sorts


def align_up(t: float, grain: int) -> float:
    """The first multiple of `grain` (counted from epoch 0) at or after t."""
    return float(math.ceil(t / grain) * grain)


def release_time(end: float, now: float, grain: int) -> float:
    """When resources held until `end` count as free again; an overrunning job frees at the next grain."""
    if end <= now:
        return float(math.floor(now / grain) * grain + grain)
    return align_up(end, grain)


def release_times(ends: np.ndarray, now: float, grain: int) -> np.ndarray:
    """`release_time` for an array of ends."""
    overrun = float(math.floor(now / grain) * grain + grain)  # as release_time: no numpy scalars
    return np.where(ends <= now, overrun, np.ceil(ends / grain) * grain)


class Profile:
    """Mutable, pass-local availability profile of every node.

    The matrices are instant-major, `times` (K, N) and `cum` (3, K, N): a question about many nodes
    then works on rows of N contiguous values, not on N short rows of K (numpy's per-row overhead).
    """

    def __init__(self, free: np.ndarray, releases: Releases, now: float, grain: int) -> None:
        self.now, self.grain = now, grain
        n = free.shape[1]
        self.free = [free[r].copy() for r in range(3)]  # free now, bookings not counted
        # the matrices are built at the first question about later times: a pass whose jobs all
        # start or wait (about half of a trace replay's decisions) never needs them
        self.sources: tuple[np.ndarray, Releases] | None = (free.astype(np.int64), releases)
        self.times = self.cum = np.empty((0, n))
        self.width = 0  # instants in use (the rest is INF padding)
        # changes not folded in yet: made before the build (the build takes them), or since
        self.batches: list[tuple[np.ndarray, Batch]] = []
        self.dirty = np.zeros(n, dtype=bool)  # nodes a change since the build is waiting for
        self.booked = np.zeros(n, dtype=bool)
        self.first_booking = np.full(n, INF)  # earliest booking start per node
        self.any_booking = False  # whether anything was booked yet (first_booking all INF until then)
        self.any_window = False  # whether a maintenance window took anything (see `block`)
        self.blocks: list[tuple[np.ndarray, float, float, Demand]] = []  # the windows' takes, as given
        self.shrunk: list[np.ndarray] = []  # the nodes of each start, in order: free shrank there
        self.rows_read = 0  # node rows the pass's questions read: a measure of its work (tests)

    # --- questions ------------------------------------------------------------------------------
    def fits_now(self, elig: Eligible, d: Triple) -> np.ndarray:
        """Boolean over the eligible nodes: free now covers d (bookings not considered)."""
        cols = _columns(elig)
        self.rows_read += elig.size()
        cpu, mem, gpu = self.free
        ok = cpu[cols] >= d[0]
        if d[1] > 0:
            ok &= mem[cols] >= d[1]
        if d[2] > 0:
            ok &= gpu[cols] >= d[2]
        return ok

    def earliest(self, elig: Eligible, d: Demand, walltime_s: float) -> np.ndarray:
        """Per eligible node, the earliest t >= now at which it holds d for walltime_s (INF: never)."""
        self._flush_rows(_columns(elig))
        return self._earliest(_columns(elig), d, walltime_s)

    def earliest_of(self, nodes: np.ndarray, d: Demand, walltime_s: float) -> np.ndarray:
        """`earliest` for the given node indices."""
        self._flush_rows(nodes)
        return self._earliest(nodes, d, walltime_s)

    def _earliest(self, cols: Columns, d: Demand, walltime_s: float) -> np.ndarray:
        w = self.width
        if COMPILED:
            return kernels.earliest(self.times, self.cum, *self._kernel_args(cols, d), float(walltime_s),
                                    self.grain, w)
        times = self.times[:w, cols]
        covers = self._covers(w, cols, d)
        bad = np.where(covers, INF, times)
        # first instant at or after each one where the node falls short of d
        first_bad = np.minimum.accumulate(bad[::-1], axis=0)[::-1]
        with np.errstate(invalid="ignore"):
            ends = np.ceil((times + walltime_s) / self.grain) * self.grain
        feasible = first_bad >= ends
        k = feasible.argmax(axis=0)
        nodes = np.arange(len(k))
        return np.where(feasible[k, nodes], times[k, nodes], INF)

    def earliest_starts(self, elig: Eligible, nodes: np.ndarray, d: Triple, n: int,
                        walltime_s: float) -> np.ndarray:
        """Per eligible node (`nodes`: their indices), its earliest start for a job of n nodes
        taking d on each for walltime_s, exact where it can matter; elsewhere INF.

        The first instant a node has d free is a lower bound, and exact on a node with no booking
        before the job would end there; the full window check runs only on the other nodes, and
        only on those whose bound could beat or tie the n-th best exact time, lowest bound first,
        in growing chunks. A node whose bound is only known past the first `HEAD_COLUMNS` instants
        is searched further only if it could beat or tie the n-th best. (A tie matters: it goes to
        the first node in node order.) So the times are exact up to the n-th best: the first
        common candidate is, and a later one needs every node's (`earliest`).
        """
        self._flush_rows(_columns(elig))
        if COMPILED:
            cols, dd, per_node, check = self._kernel_args(nodes, d)
            return kernels.earliest_starts(self.times, self.cum, cols, dd, per_node, check, n,
                                           float(walltime_s), self.grain, self.width, HEAD_COLUMNS,
                                           self.first_booking, self.any_booking)
        bound = self._first_cover(_columns(elig), d, min(HEAD_COLUMNS, self.width))
        partial = bound < 0  # not covered within the head: -bound is only a lower bound
        if not self.any_booking and not partial.any():
            return bound  # every node searched to its end, and none booked: all exact
        first_booking = elig.take(self.first_booking)
        with np.errstate(invalid="ignore"):
            ends = np.ceil((bound + walltime_s) / self.grain) * self.grain
        clear = first_booking >= ends
        clear &= ~partial
        times = np.where(clear, bound, INF)
        nth = nth_smallest(times, n)
        more = np.flatnonzero(partial & (bound >= -nth))  # -bound <= nth
        if len(more):  # search the rest of their instants: their bounds become exact
            bound[more] = self._first_cover(nodes[more], d, self.width)
            ends[more] = np.ceil((bound[more] + walltime_s) / self.grain) * self.grain
            clear[more] = first_booking[more] >= ends[more]
            times[more] = np.where(clear[more], bound[more], INF)
            partial[more] = False
            nth = nth_smallest(times, n)
        doubt = np.flatnonzero(~(clear | partial) & (bound <= nth))
        if len(doubt):
            self._exact_best_first(nodes, d, n, walltime_s, bound, times, doubt)
        return times

    def _exact_best_first(self, nodes: np.ndarray, d: Triple, n: int, walltime_s: float,
                          bound: np.ndarray, times: np.ndarray, doubt: np.ndarray) -> None:
        """Exact earliest starts for the doubtful nodes, in place, lowest bound first, in growing
        chunks, until no remaining bound can beat or tie the n-th best time found."""
        order = doubt[np.argsort(bound[doubt], kind="stable")]
        nth, i, chunk = nth_smallest(times, n), 0, max(32, 2 * n)
        while i < len(order) and bound[order[i]] <= nth:
            part = order[i : i + chunk]
            times[part] = self._earliest(nodes[part], d, walltime_s)
            nth = nth_smallest(times, n)
            i, chunk = i + chunk, 2 * chunk

    def common_start(self, nodes: np.ndarray, times: np.ndarray, d: Demand, n: int, walltime_s: float,
                     tries: int) -> tuple[float, np.ndarray] | None:
        """The earliest instant at which n of `nodes` (each free for the job from `times`, INF:
        never) all hold d (a triple, or one column per node of `nodes`) for walltime_s, among the
        first `tries` distinct candidates from the n-th smallest time on; and those nodes, sorted.
        None if no candidate holds.

        At a candidate t the nodes free by t are taken, those free last first (nodes free sooner
        stay open for backfilling until t); a node free from `times[p]` may be booked again later,
        so one that carries a booking before the window ends is checked over the whole window.
        """
        if COMPILED:
            cols, dd, per_node, check = self._kernel_args(nodes, d)
            return _found(kernels.common_start(self.times, self.cum, cols, times, dd, per_node, check, n,
                                               float(walltime_s), self.grain, self.width, self.first_booking,
                                               self.any_booking, tries, False))
        finite = np.sort(times[np.isfinite(times)])
        later = finite[n - 1 :]
        candidates = later[run_starts(later)][:tries]
        for t in candidates.tolist():
            chosen = self._held_at(t, nodes, times, d, n, walltime_s)
            if chosen is not None:
                return t, chosen
        return None

    def slot(self, nodes: np.ndarray, times: np.ndarray, d: Demand, n: int, walltime_s: float,
             tries: int) -> tuple[float, np.ndarray] | None:
        """Where a job of n nodes starts earliest given each node's earliest start `times`: for one
        node, the node free earliest (argmin: the first on ties); for more, `common_start`."""
        if n > 1:
            return self.common_start(nodes, times, d, n, walltime_s, tries)
        p = int(np.argmin(times)) if len(times) else 0
        return None if not len(times) or np.isinf(times[p]) else (float(times[p]), nodes[p : p + 1])

    def earliest_slot(self, elig: Eligible, nodes: np.ndarray, d: Triple, n: int, walltime_s: float,
                      tries: int) -> tuple[np.ndarray, tuple[float, np.ndarray] | None]:
        """`earliest_starts`, and `slot` on its times: a reservation's search, in one compiled call."""
        if not COMPILED:
            times = self.earliest_starts(elig, nodes, d, n, walltime_s)
            return times, self.slot(nodes, times, d, n, walltime_s, tries)
        self._flush_rows(_columns(elig))
        cols, dd, per_node, check = self._kernel_args(nodes, d)
        times, t, chosen = kernels.earliest_slot(self.times, self.cum, cols, dd, per_node, check, n,
                                                 float(walltime_s), self.grain, self.width, HEAD_COLUMNS,
                                                 self.first_booking, self.any_booking, tries)
        return times, _found((t, chosen))

    def _held_at(self, t: float, nodes: np.ndarray, times: np.ndarray, d: Demand, n: int,
                 walltime_s: float) -> np.ndarray | None:
        """n of `nodes` that hold d over [t, its window's end), free last first, or None."""
        end = align_up(t + walltime_s, self.grain)
        ok = times <= t
        if self.any_booking:  # else no node is booked before the end
            recheck = np.flatnonzero(ok & (self.first_booking[nodes] < end))
            if len(recheck):
                ok[recheck] = self.holds_over(nodes[recheck], _part(d, recheck), t, end)
        pos = np.flatnonzero(ok)
        if len(pos) < n:
            return None
        best = pos[np.lexsort((pos, -times[pos]))][:n]
        return np.sort(nodes[best])

    def first_cover(self, elig: Eligible, d: Demand, head: int | None = None) -> np.ndarray:
        """Per eligible node, the first instant it has d free. Exact for nodes never booked,
        whose free amounts only grow from now on; a lower bound for the others.

        With `head`, only the first `head` instants are searched; a node not covered by then
        gets minus the instant after them (a lower bound, negated to mark it as one).
        """
        self._flush_rows(_columns(elig))
        w = self.width if head is None else min(head, self.width)
        return self._first_cover(_columns(elig), d, w)

    def first_cover_of(self, nodes: np.ndarray, d: Demand) -> np.ndarray:
        self._flush_rows(nodes)
        return self._first_cover(nodes, d, self.width)

    def _first_cover(self, cols: Columns, d: Demand, w: int) -> np.ndarray:
        if COMPILED:
            return kernels.first_cover(self.times, self.cum, *self._kernel_args(cols, d), w, self.width)
        covers, times = self._covers(w, cols, d), self.times[:w, cols]
        if w <= MASKED_MIN_WIDTH:  # a node's instants only grow: its first covered one is the least
            found = np.where(covers, times, INF).min(axis=0)
        else:
            k = covers.argmax(axis=0)
            nodes = np.arange(len(k))
            found = np.where(covers[k, nodes], times[k, nodes], INF)
        if w >= self.width:
            return found
        after = self.times[w, cols]
        return np.where(found < INF, found, np.where(np.isinf(after), INF, -after))

    def last_step(self, nodes: np.ndarray) -> np.ndarray:
        """For each node, its last instant of change (after it, what it has free stays put)."""
        self._flush_rows(nodes)
        times = self.times[:, nodes]
        last = np.isfinite(times).sum(axis=0) - 1
        return times[last, np.arange(len(nodes))]

    def holds_over(self, nodes: np.ndarray, d: Demand, t: float, end: float) -> np.ndarray:
        """For each of `nodes`, whether it holds d over the whole of [t, end)."""
        self._flush_rows(nodes)
        w = self.width  # past it every instant is INF: nothing there overlaps [t, end)
        if COMPILED:
            return kernels.holds_over(self.times, self.cum, *self._kernel_args(nodes, d), float(t),
                                      float(end), w)
        times = self.times[:w, nodes]
        nxt = np.empty_like(times)
        nxt[:-1] = times[1:]
        nxt[-1] = INF
        overlaps = (times < end) & (nxt > t)
        ok = self._covers(w, nodes, d)
        return (ok | ~overlaps).all(axis=0)

    def free_at(self, x: int, t: float) -> Triple:
        """What node x has free at t, bookings included."""
        self._flush_rows(np.array([x]))
        k = int(np.searchsorted(self.times[:, x], t, side="right")) - 1
        c, m, g = self.cum[:, k, x].tolist()
        return (c, m, g)

    def _kernel_args(self, cols: Columns, d: Demand) -> tuple[np.ndarray, np.ndarray, bool, np.ndarray]:
        """Nodes and demand as the compiled loops take them: node indices, d as (3, m) columns,
        whether there is one column per node, and which resources are compared."""
        if isinstance(cols, slice):
            cols = np.arange(*cols.indices(self.times.shape[1]))
        return kernel_args(cols, d)

    def _covers(self, w: int, cols: Columns, d: Demand) -> np.ndarray:
        """(w, n): whether each of the first w instants of the nodes `cols` covers d (one column
        of d per node when d is an array)."""
        if isinstance(d, np.ndarray):
            every: np.ndarray = self.cum[0][:w, cols] >= d[0]
            every &= self.cum[1][:w, cols] >= d[1]
            every &= self.cum[2][:w, cols] >= d[2]
            return every
        ok = self.cum[0][:w, cols] >= d[0]
        for r in (1, 2):
            if d[r] > 0:
                ok &= self.cum[r][:w, cols] >= d[r]
        return ok

    def matrices(self) -> tuple[np.ndarray, np.ndarray, int]:
        """(times, cum, width) with every change recorded so far folded in: what the compiled pass
        (`app.sched.core_kernel`) takes over."""
        self._flush_all()
        return self.times, self.cum, self.width

    # --- changes --------------------------------------------------------------------------------
    def start(self, nodes: np.ndarray, d: Demand, release: float) -> None:
        """Occupy d on each of `nodes` (distinct) from now until `release`."""
        self.shrunk.append(nodes)
        if isinstance(d, np.ndarray):
            for r in range(3):
                self.free[r][nodes] -= d[r]
            self._record(nodes, (self.now, release, d))
            return
        at = int(nodes[0]) if len(nodes) == 1 else nodes  # one node: scalar updates are cheaper
        for r in range(3):
            if d[r]:
                self.free[r][at] -= d[r]
        self._record(nodes, (self.now, release, d))

    def book(self, x: int, start: float, end: float, d: Triple) -> None:
        """Reserve d on node x over [start, end)."""
        self._record(np.array([x]), (start, end, d))
        self.booked[x] = True
        self.first_booking[x] = min(self.first_booking[x], start)
        self.any_booking = True

    def book_many(self, nodes: np.ndarray, start: float, end: float, d: Demand) -> None:
        """Reserve d on each of `nodes` over [start, end)."""
        self._take(nodes, start, end, d)
        self.booked[nodes] = True

    def book_all(self, bookings: Sequence[tuple[np.ndarray, float, float, Demand]]) -> bool:
        """Reserve every (nodes, start, end, d) at once if, all of them booked, no node they use
        has less than nothing free at any time from now on: then each holds over its window with
        the ones before it booked (bookings only take), as booking them one by one would check.
        Else change nothing and say False (also when the matrices are built already, or when a
        booking is empty or names a node twice: a check one by one answers those)."""
        if self.sources is None or not bookings:
            return False
        if any(end <= start or _repeats(nodes) for nodes, start, end, _ in bookings):
            return False
        base, releases = self.sources
        saved = (base.copy(), list(self.batches), self.first_booking.copy(), self.booked.copy(),
                 self.any_booking)
        for nodes, start, end, d in bookings:
            self.book_many(nodes, start, end, d)
        self._build()
        used = np.zeros(len(self.booked), dtype=bool)
        for nodes, *_ in bookings:
            used[nodes] = True
        if (self.cum[:, : self.width, used] >= 0).all():
            return True
        base, self.batches, self.first_booking, self.booked, self.any_booking = saved
        self.sources = (base, releases)
        self.times = self.cum = np.empty((0, len(self.booked)))
        self.width = 0
        return False

    def block(self, nodes: np.ndarray, start: float, end: float, d: Demand) -> None:
        """Take d from each of `nodes` over [start, end) without reserving the nodes: a
        maintenance window (`booked`, which says a node holds a reservation, stays as it was)."""
        self._take(nodes, start, end, d)
        self.any_window = True
        self.blocks.append((nodes, start, end, d))

    def _take(self, nodes: np.ndarray, start: float, end: float, d: Demand) -> None:
        self._record(nodes, (start, end, d))
        np.minimum.at(self.first_booking, nodes, start)
        self.any_booking = True

    def _record(self, nodes: np.ndarray, change: Batch) -> None:
        self.batches.append((nodes, change))
        if self.sources is None:  # built: a question about these nodes folds it first
            self.dirty[nodes] = True

    def _build(self) -> None:
        """Build the matrices from the releases and every change recorded so far, in one go."""
        if self.sources is None:
            return
        base, (xs, ts, amounts) = self.sources
        self.sources = None
        if self.batches:
            add_x, add_t, add_d = self._batch_steps(base)
            xs, ts = np.concatenate((xs, add_x)), np.concatenate((ts, add_t))
            amounts = np.concatenate((amounts, add_d), axis=1)
        self.times, self.cum = _step_matrix(base, (xs, ts, amounts), self.now, self.grain)
        self.width = self.times.shape[0]

    def _batch_steps(self, base: np.ndarray) -> Releases:
        """The changes recorded before the build as steps; those in force now lower `base`."""
        batches, self.batches = self.batches, []
        return _steps(batches, base, self.now)

    def _flush_rows(self, nodes: Columns) -> None:
        """Fold the changes waiting, if any is for one of `nodes`, before a question about them.

        All are folded then, not only those of `nodes`: a row's matrix is the same whenever its
        changes are folded, and a change is folded on all its nodes about as fast as on a few.
        """
        self._build()
        if self.batches and self.dirty[nodes].any():
            self._fold_waiting()

    def _flush_all(self) -> None:
        self._build()
        if self.batches:
            self._fold_waiting()

    def _fold_waiting(self) -> None:
        batches, self.batches = self.batches, []
        for nodes, _ in batches:
            self.dirty[nodes] = False
        if len(batches) >= REBUILD_FROM:
            self._rebuild(batches)
        elif not FOLD_BY_BATCH:
            self._fold_rows(batches)
        else:
            for nodes, change in batches:
                self._fold(nodes, change)

    def _rebuild(self, batches: list[tuple[np.ndarray, Batch]]) -> None:
        """Fold every change of `batches` into the matrix at once, on the rows they touch."""
        rows = np.unique(np.concatenate([nodes for nodes, _ in batches]))
        sub_times = self.times[:, rows]
        sub_cum = self.cum[:, :, rows]
        cols, xs = np.nonzero(np.isfinite(sub_times[1:]))
        cols = cols + 1
        ev_x, ev_t = [xs], [sub_times[cols, xs]]
        ev_d = [sub_cum[:, cols, xs] - sub_cum[:, cols - 1, xs]]
        base = sub_cum[:, 0, :].copy()
        add_x, add_t, add_d = _steps(batches, base, self.now, rows)
        ev_x.append(add_x)
        ev_t.append(add_t)
        ev_d.append(add_d)
        events = (np.concatenate(ev_x), np.concatenate(ev_t), np.concatenate(ev_d, axis=1))
        times, cum = _step_matrix(base, events, self.now, self.grain)
        while times.shape[0] > self.times.shape[0]:
            self._grow()
        k = times.shape[0]
        self.times[:k, rows] = times
        self.times[k:, rows] = INF
        self.cum[:, :k, rows] = cum
        self.cum[:, k:, rows] = cum[:, -1:, :]
        self.width = max(self.width, k)

    def _fold(self, nodes: np.ndarray, change: Batch) -> None:
        """Take a change's d from each of `nodes` over its [t0, t1): the instants and amounts
        `_fold_row` gives node by node, in one compiled loop (or a few numpy steps on all of them)."""
        t0, t1, d = change
        w = self.width
        while w + 2 > self.times.shape[0]:  # room for two new instants on every node
            self._grow()
        if COMPILED:  # (a node named twice takes the change twice: the loop meets it twice)
            nodes, dd, per_node, _ = self._kernel_args(nodes, d)
            self.width = kernels.fold(self.times, self.cum, nodes, float(t0), float(t1), dd, per_node,
                                      float(self.now), w)
            return
        if _repeats(nodes):  # a node named twice takes the change twice: once each time
            _, first = np.unique(nodes, return_index=True)
            again = np.ones(len(nodes), dtype=bool)
            again[first] = False
            self._fold(nodes[first], (t0, t1, _part(d, first)))
            self._fold(nodes[again], (t0, t1, _part(d, again)))
            return
        new = [t for t in (t0, t1) if t > self.now]
        # flat indices into the matrices of each node's first w + 2 instants: `take` and a flat
        # store move these scattered values several times faster than [rows, nodes] indexing
        n = self.times.shape[1]
        at = np.arange(w + 2)[:, None] * n + nodes
        times, src = _with_instants(self.times.take(at), at, n, new if len(new) < 2 or t0 < t1 else new[:1])
        cum = self.cum.reshape(3, -1).take(src, axis=1)  # (the matrices are C-contiguous)
        inside = times < t1
        if t0 > self.now:
            inside &= times >= t0
        amount = d[:, None, :] if isinstance(d, np.ndarray) else np.array(d, dtype=np.int64)[:, None, None]
        np.subtract(cum, amount, out=cum, where=inside)
        self.times.put(at, times)
        self.cum.reshape(3, -1)[:, at] = cum
        if times[w - 1 :].min() < INF:  # an instant was added where a node used its last row
            used = int(np.isfinite(times[w - 1 :]).any(axis=1).sum()) + w - 1
            self.width = min(used + 1, self.times.shape[0])

    def _fold_rows(self, batches: list[tuple[np.ndarray, Batch]]) -> None:
        """Fold the changes of `batches` node by node (`_fold_row`)."""
        rows: dict[int, list[Change]] = {}
        for nodes, (t0, t1, d) in batches:
            for i, x in enumerate(nodes.tolist()):
                c, m, g = d[:, i].tolist() if isinstance(d, np.ndarray) else d
                rows.setdefault(x, []).append((t0, t1, (c, m, g)))
        for x, changes in rows.items():
            self._fold_row(x, changes)

    def _fold_row(self, x: int, changes: list[Change]) -> None:
        """Take each change's d from node x over its [t0, t1), adding the instants it needs."""
        times = self.times[: self.width, x].tolist()
        m = bisect_left(times, INF)
        del times[m:]
        cum = self.cum[:, :m, x].tolist()  # one list per resource
        cpu, mem, gpu = cum
        now = self.now
        for t0, t1, (dc, dm, dg) in changes:
            lo = _instant(times, cum, t0) if t0 > now else 0
            hi = _instant(times, cum, t1)
            for i in range(lo, hi):  # plain loops: rows are short, numpy calls cost more here
                cpu[i] -= dc
                mem[i] -= dm
            if dg:
                for i in range(lo, hi):
                    gpu[i] -= dg
        k = len(times)
        while k > self.times.shape[0]:
            self._grow()
        # instants were only added, and no change reaches past the last one (its amounts stay):
        # the INF padding after instant k, and those amounts repeated there, are already right
        if k > m:
            self.times[:k, x] = times
        self.cum[:, :k, x] = cum
        self.width = max(self.width, min(k + 1, self.times.shape[0]))

    def _grow(self) -> None:
        k, n = self.times.shape
        times = np.full((2 * k, n), INF)
        times[:k] = self.times
        cum = np.empty((3, 2 * k, n), dtype=np.int64)
        cum[:, :k] = self.cum
        cum[:, k:] = self.cum[:, -1:, :]
        self.times, self.cum = times, cum


def kernel_args(nodes: np.ndarray, d: Demand) -> tuple[np.ndarray, np.ndarray, bool, np.ndarray]:
    """Node indices and a demand as the compiled loops take them (`app.sched.profile_kernels`):
    int64 contiguous indices, d as (3, m) columns, whether there is one column per node, and which
    resources are compared."""
    if nodes.dtype != np.int64 or not nodes.flags.c_contiguous:  # the types `warm` compiled
        nodes = np.ascontiguousarray(nodes, dtype=np.int64)
    if isinstance(d, np.ndarray):
        return nodes, np.ascontiguousarray(d, dtype=np.int64), True, _EVERY
    return nodes, _column(d), False, _CHECKED[d[1] > 0, d[2] > 0]


_EVERY = np.ones(3, dtype=bool)  # per-node demands are compared on every resource (`_covers`)
# a triple's cpu is always compared, its memory and gpu only when asked for: keyed by (mem, gpu) > 0
_CHECKED = {(m, g): np.array([True, m, g]) for m in (False, True) for g in (False, True)}


@functools.lru_cache(maxsize=1024)
def _column(d: Triple) -> np.ndarray:
    """A triple as the (3, 1) column the compiled loops take (made once per demand; the loops only
    read it, and a read-only array would be another type for numba to compile for)."""
    return np.array(d, dtype=np.int64).reshape(3, 1)


def _found(answer: tuple[float, np.ndarray]) -> tuple[float, np.ndarray] | None:
    """A compiled search's (time, nodes), or None where it found none (a NaN time)."""
    t, chosen = answer
    return None if math.isnan(t) else (t, chosen)


def _columns(elig: Eligible) -> Columns:
    """The eligible nodes as an index into the matrices' node axis."""
    return elig.sl if elig.idx is None else elig.idx


def _instant(times: list[float], cum: list[list[int]], t: float) -> int:
    """The index of instant t in a row held as lists (`cum`: one per resource), inserted (amounts
    carried over) if missing."""
    k = bisect_left(times, t)
    if k == len(times) or times[k] != t:
        times.insert(k, t)
        for amounts in cum:
            amounts.insert(k, amounts[k - 1])
    return k


def _part(d: Demand, which: np.ndarray) -> Demand:
    """The demand of some of a change's nodes: a triple stays, per-node columns are taken."""
    return d[:, which] if isinstance(d, np.ndarray) else d


def _repeats(nodes: np.ndarray) -> bool:
    """Whether a node index appears twice (node lists are mostly sorted: checked that first)."""
    if len(nodes) < 2 or (nodes[1:] > nodes[:-1]).all():
        return False
    return len(np.unique(nodes)) < len(nodes)


def _with_instants(times: np.ndarray, at: np.ndarray, n: int,
                   new: list[float]) -> tuple[np.ndarray, np.ndarray]:
    """Some nodes' first rows of instants, `times` (r, k), taken from the flat places `at` of a
    matrix n wide, with each instant of `new` (ascending, distinct) added to the nodes that lack
    it, as `_instant` does row by row; and for each new place, the flat place whose amounts it
    carries (an added instant carries those of the instant before). The last two rows must be
    padding: they take the shift."""
    cols = np.arange(times.shape[1])
    rows = np.arange(times.shape[0])[:, None]
    shift = 0  # per new row, how many rows down it moved
    spots = []
    added = 0  # per node, instants of `new` added before this one
    for t in new:
        pos = (times < t).sum(axis=0)  # where t is, or goes
        missing = times[pos, cols] != t
        if missing.any():
            pos += added
            shift = shift + ((rows >= pos) & missing)
            spots.append((pos[missing], cols[missing], t))
            added = added + missing
    if not spots:
        return times, at
    src = at - shift * n
    times = times.take((rows - shift) * len(cols) + cols)
    for pos, where, t in spots:
        times[pos, where] = t
    return times, src


def _steps(batches: list[tuple[np.ndarray, Batch]], base: np.ndarray, now: float,
           rows: np.ndarray | None = None) -> Releases:
    """The changes of `batches` as (node, time, amount) steps; those in force now lower `base`
    (3, N) instead. With `rows` (sorted), a node is named by its place there (base is (3, len(rows)))."""
    xs: list[np.ndarray] = []
    ts: list[np.ndarray] = []
    amounts: list[np.ndarray] = []
    for nodes, (t0, t1, d) in batches:
        if t1 <= now:  # over by now: it takes nothing (as `_fold_row` leaves it)
            continue
        at, k = (nodes if rows is None else np.searchsorted(rows, nodes)), len(nodes)
        if isinstance(d, np.ndarray):  # one amount per node
            each = d.astype(np.int64, copy=False)
        else:
            each = np.broadcast_to(np.array(d, dtype=np.int64)[:, None], (3, k))
        if t0 <= now:
            for r in range(3):  # a node may repeat across batches, or in a promise's list
                np.subtract.at(base[r], at, each[r])
        else:
            xs.append(at)
            ts.append(np.full(k, t0))
            amounts.append(-each)
        xs.append(at)
        ts.append(np.full(k, t1))
        amounts.append(each)
    if not xs:
        return np.zeros(0, dtype=np.int64), np.zeros(0), np.zeros((3, 0), dtype=np.int64)
    return (np.concatenate(xs).astype(np.int64, copy=False), np.concatenate(ts),
            np.concatenate(amounts, axis=1))


def _step_matrix(base: np.ndarray, events: Releases, now: float,
                 grain: int) -> tuple[np.ndarray, np.ndarray]:
    """(times (K, N), cum (3, K, N)) from free-now `base` (3, N) and (node, time, amount) steps."""
    xs, ts, amounts = events
    n = base.shape[1]
    if len(xs) == 0:
        times = np.full((2, n), INF)
        times[0] = now
        return times, np.repeat(base[:, None, :], 2, axis=1)
    if np.bincount(xs, minlength=n).max() == 1:
        return _single_steps(base, events, now)
    if COMPILED:  # (the two cases above are as fast in numpy)
        return kernels.step_matrix(np.ascontiguousarray(base, dtype=np.int64),
                                   np.ascontiguousarray(xs, dtype=np.int64),
                                   np.ascontiguousarray(ts, dtype=np.float64),
                                   np.ascontiguousarray(amounts, dtype=np.int64), float(now))
    order = _by_node_then_time(xs, ts, n, grain)
    xs, ts, amounts = xs[order], ts[order], amounts[:, order]
    new = np.ones(len(xs), dtype=bool)
    new[1:] = (xs[1:] != xs[:-1]) | (ts[1:] != ts[:-1])
    starts = np.flatnonzero(new)
    ux, ut = xs[starts], ts[starts]
    summed = np.add.reduceat(amounts, starts, axis=1)
    col = _rank_in_run(ux) + 1
    k = int(col.max()) + 2
    times = np.full((k, n), INF)
    times[0] = now
    times[col, ux] = ut
    steps = np.zeros((3, k, n), dtype=np.int64)
    steps[:, 0, :] = base
    steps[:, col, ux] = summed
    for j in range(1, k):  # running sums, instant by instant: numpy's cumsum along this axis
        steps[:, j] += steps[:, j - 1]  # works node by node, 3x slower on a large cluster
    return times, steps


def _by_node_then_time(xs: np.ndarray, ts: np.ndarray, n: int, grain: int) -> np.ndarray:
    """np.lexsort((ts, xs)): the events' order by node, then time, ties in input order."""
    if n > 1 << 16 or len(xs) < RADIX_MIN_EVENTS:
        return np.lexsort((ts, xs))
    # both sorts are stable, so the second keeps the time order within a node; a stable sort of
    # 16-bit keys is a radix sort, several times faster than lexsort
    by_time = np.argsort(_time_keys(ts, grain), kind="stable")
    return by_time[np.argsort(xs[by_time].astype(np.uint16), kind="stable")]


def _time_keys(ts: np.ndarray, grain: int) -> np.ndarray:
    """Keys that sort as `ts` does: when every instant is a whole number of grains (as releases
    and bookings are) within 2**16 grains of the first, those numbers from the first as 16 bits
    (exact integers, in the order of the instants, ties where they tie); else `ts`."""
    grains = ts / grain
    first, last = grains.min(), grains.max()
    if np.isfinite(last) and last - first < 1 << 16 and (np.floor(grains) * grain == ts).all():
        return (grains - first).astype(np.uint16)
    return ts


def nth_smallest(times: np.ndarray, n: int) -> float:
    """The n-th smallest finite value of `times`, or INF when fewer are finite."""
    if n == 1:  # the smallest; INF when none is finite
        return float(times.min()) if len(times) else INF
    finite = times[np.isfinite(times)]
    return float(np.partition(finite, n - 1)[n - 1]) if len(finite) >= n else INF


def run_starts(ordered: np.ndarray) -> np.ndarray:
    """Boolean over a sorted array: where a run of equal values starts (`ordered[mask]` is its
    distinct values, in order: np.unique without its sort)."""
    new = np.empty(len(ordered), dtype=bool)
    new[:1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=new[1:])
    return new


def _rank_in_run(ordered: np.ndarray) -> np.ndarray:
    """For each value of a sorted array, how many before it are equal to it."""
    at = np.arange(len(ordered))
    return at - np.maximum.accumulate(np.where(run_starts(ordered), at, 0))


def _single_steps(base: np.ndarray, events: Releases, now: float) -> tuple[np.ndarray, np.ndarray]:
    """`_step_matrix` when no node has more than one step (a machine of one-core nodes, or every
    node running one job): each step is instant 1 of its node, with no sort or grouping needed.
    The result is the general one: instant 0 `now`, instant 1 the step (INF where none), and an
    INF instant 2 that repeats instant 1's amounts."""
    xs, ts, amounts = events
    n = base.shape[1]
    times = np.full((3, n), INF)
    times[0] = now
    times[1, xs] = ts
    steps = np.empty((3, 3, n), dtype=np.int64)
    steps[:, 0, :] = base
    after = base.copy()
    after[:, xs] += amounts
    steps[:, 1, :] = after
    steps[:, 2, :] = after
    return times, steps

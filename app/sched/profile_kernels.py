"""Compiled node-by-node loops behind `Profile`'s questions and folds (app.sched.timeline).

A deep pass (every pending job reserves: `priority`, `conservative`) asks the profile one question
and folds one booking per job, each a few dozen numpy calls on all nodes and instants; most of
those cells are padding or lie past the answer. Here the same questions walk each node's instants
in order and stop at the answer, and a fold inserts a booking's two instants in place: the same
answers, without the temporaries. `Profile` keeps its numpy code as the reference (`COMPILED` in
app.sched.timeline switches between them, and tests/sched/test_timeline.py holds one to the other).

The matrices are `Profile`'s: `times` (K, N), a node's instants ascending then INF padding;
`cum` (3, K, N), what it has free from each instant on (padding repeats the last amounts). A demand
is `d` (3, m) int64, one column per node when `per_node`, else column 0 for every node; `check[r]`
says whether resource r is compared (cpu always; a triple's zero memory or gpu is not; per-node
columns are compared on every resource, as `Profile._covers` does).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

INF = math.inf
# The helpers called in the searches' innermost loops (per node, per instant) take the matrices but
# neither keep nor make an array: compiled without numba's reference counting, their calls cost no
# atomic increment and decrement of the matrices' counts. Inlined into the loops instead
# (inline="always"), each call counted the matrices up and down again, and those atomic operations
# were 40 % of a 5,504-node replay's time (perf); `earliest` on every node ran 1.7x faster without.
NO_REFCOUNTS = {"_nrt": False}
DISTINCT_BOUNDS = 64  # `_by_bound` counts up to this many distinct bounds, else it sorts


@njit(cache=True, nogil=True, **NO_REFCOUNTS)
def _covered(cum: np.ndarray, k: int, x: int, need: tuple[int, int, int], mem: bool, gpu: bool) -> bool:
    """Whether node x's instant k covers `need` (cpu always compared; memory, gpu if asked)."""
    return (cum[0, k, x] >= need[0] and (not mem or cum[1, k, x] >= need[1])
            and (not gpu or cum[2, k, x] >= need[2]))


@njit(cache=True, nogil=True, **NO_REFCOUNTS)
def _need(d: np.ndarray, col: int) -> tuple[int, int, int]:
    return d[0, col], d[1, col], d[2, col]


@njit(cache=True, nogil=True)
def earliest(times: np.ndarray, cum: np.ndarray, cols: np.ndarray, d: np.ndarray, per_node: bool,
             check: np.ndarray, walltime: float, grain: int, w: int) -> np.ndarray:
    """Per node of `cols`, the first of its first w instants from which it holds d until that
    instant plus `walltime` (rounded up to the grain); INF if none. One pass over the instants: a
    start that fails at instant j fails from every instant up to j (it would end later)."""
    out = np.full(len(cols), INF)
    mem, gpu = check[1], check[2]
    for i in range(len(cols)):
        x, need = cols[i], _need(d, i if per_node else 0)
        k = 0
        while k < w:
            t = times[k, x]
            if t == INF:
                break
            if walltime > 1e-12 * abs(t) and not _covered(cum, k, x, need, mem, gpu):
                k += 1  # short at k, and the window is not empty: its end is past t, whatever the rounding
                continue
            end = np.ceil((t + walltime) / grain) * grain
            j = k  # (an empty window, end == t, holds even where d is short)
            while j < w and times[j, x] < end and _covered(cum, j, x, need, mem, gpu):
                j += 1
            if j < w and times[j, x] < end:  # short at j: no start from k to j holds (their ends are later)
                k = j + 1
                continue
            out[i] = t
            break
    return out


@njit(cache=True, nogil=True)
def first_cover(times: np.ndarray, cum: np.ndarray, cols: np.ndarray, d: np.ndarray, per_node: bool,
                check: np.ndarray, w: int, width: int) -> np.ndarray:
    """Per node, its first instant among the first w that covers d; when none does and w is short
    of `width`, minus its instant w (a lower bound, negated), or INF where that is padding."""
    out = np.full(len(cols), INF)
    mem, gpu = check[1], check[2]
    for i in range(len(cols)):
        x, need = cols[i], _need(d, i if per_node else 0)
        for k in range(w):
            if times[k, x] == INF:  # padding repeats the last instant's amounts: INF either way
                break
            if _covered(cum, k, x, need, mem, gpu):
                out[i] = times[k, x]
                break
        if out[i] == INF and w < width and times[w, x] < INF:
            out[i] = -times[w, x]
    return out


@njit(cache=True, nogil=True, **NO_REFCOUNTS)
def holds(times: np.ndarray, cum: np.ndarray, x: int, need: tuple[int, int, int], mem: bool, gpu: bool,
          t: float, end: float, w: int) -> bool:
    """Whether every one of node x's first w instants that overlaps [t, end) covers `need`. The
    instants before the last one under t overlap none of it: the walk starts there (`_bisect`; an
    instant that ends at t is passed over by the test below)."""
    for k in range(max(_bisect(times, x, w, t) - 1, 0), w):
        if times[k, x] >= end:
            break
        after = times[k + 1, x] if k + 1 < w else INF
        if after > t and not _covered(cum, k, x, need, mem, gpu):
            return False
    return True


@njit(cache=True, nogil=True)
def holds_over(times: np.ndarray, cum: np.ndarray, nodes: np.ndarray, d: np.ndarray, per_node: bool,
               check: np.ndarray, t: float, end: float, w: int) -> np.ndarray:
    """Per node, whether every one of its first w instants that overlaps [t, end) covers d."""
    out = np.ones(len(nodes), dtype=np.bool_)
    mem, gpu = check[1], check[2]
    for i in range(len(nodes)):
        out[i] = holds(times, cum, nodes[i], _need(d, i if per_node else 0), mem, gpu, t, end, w)
    return out


@njit(cache=True, nogil=True)
def common_start(times: np.ndarray, cum: np.ndarray, nodes: np.ndarray, node_times: np.ndarray,
                 d: np.ndarray, per_node: bool, check: np.ndarray, n: int, walltime: float, grain: int,
                 width: int, first_booking: np.ndarray, any_booking: bool, tries: int,
                 exact: bool) -> tuple[float, np.ndarray]:
    """`Profile.common_start`: its first `tries` candidates in order, each found as the next
    distinct time above the last, from the n-th smallest on (the candidates a sort would list:
    most searches end at the first, so none is sorted); (NaN, no nodes) when none holds. `exact`:
    `node_times` are each node's earliest start for this job (`earliest_starts`), so a node whose
    start is the candidate holds the job over its window and is not checked again."""
    scratch, ok = np.empty(len(node_times)), np.empty(len(node_times), dtype=np.bool_)
    t = _nth(node_times, n, scratch)
    for _ in range(tries):
        if t == INF:
            break
        chosen = _held_at(times, cum, nodes, node_times, d, per_node, check, n, t,
                          np.ceil((t + walltime) / grain) * grain, width, first_booking, any_booking, exact,
                          ok, scratch)
        if len(chosen):
            return t, chosen
        t = _next_above(node_times, t)
    return np.nan, nodes[:0]


@njit(cache=True, nogil=True)
def _held_at(times: np.ndarray, cum: np.ndarray, nodes: np.ndarray, node_times: np.ndarray,
             d: np.ndarray, per_node: bool, check: np.ndarray, n: int, t: float, end: float, width: int,
             first_booking: np.ndarray, any_booking: bool, exact: bool, ok: np.ndarray,
             scratch: np.ndarray) -> np.ndarray:
    """`Profile._held_at`: n of `nodes` that hold d over [t, end), free last first, sorted; none if
    fewer do (`exact`: see `common_start`). `ok`, `scratch`: room for one value per node."""
    mem, gpu = check[1], check[2]
    count = 0
    for i in range(len(nodes)):
        ok[i] = node_times[i] <= t
        if ok[i] and any_booking and first_booking[nodes[i]] < end and not (exact and node_times[i] == t):
            ok[i] = holds(times, cum, nodes[i], _need(d, i if per_node else 0), mem, gpu, t, end, width)
        count += ok[i]
    if count < n:
        return nodes[:0]
    return _latest(nodes, node_times, ok, n, scratch)


@njit(cache=True, nogil=True)
def _next_above(values: np.ndarray, t: float) -> float:
    """The smallest of `values` above t (INF if none): the candidate after t, without a sort."""
    found = INF
    for v in values:
        if t < v < found:
            found = v
    return found


@njit(cache=True, nogil=True)
def slot(times: np.ndarray, cum: np.ndarray, nodes: np.ndarray, node_times: np.ndarray, d: np.ndarray,
         per_node: bool, check: np.ndarray, n: int, walltime: float, grain: int, width: int,
         first_booking: np.ndarray, any_booking: bool, tries: int) -> tuple[float, np.ndarray]:
    """`Profile.slot` on `node_times` from `earliest_starts` (each node's earliest start for the
    job): for one node, the node free earliest (the first on ties); for more, `common_start`. (NaN,
    no nodes) when none holds."""
    if n > 1:
        return common_start(times, cum, nodes, node_times, d, per_node, check, n, walltime, grain, width,
                            first_booking, any_booking, tries, True)
    if not len(node_times) or node_times.min() == INF:
        return np.nan, nodes[:0]
    p = np.argmin(node_times)
    return node_times[p], nodes[p : p + 1].copy()


@njit(cache=True, nogil=True)
def earliest_slot(times: np.ndarray, cum: np.ndarray, nodes: np.ndarray, d: np.ndarray, per_node: bool,
                  check: np.ndarray, n: int, walltime: float, grain: int, width: int, head: int,
                  first_booking: np.ndarray, any_booking: bool,
                  tries: int) -> tuple[np.ndarray, float, np.ndarray]:
    """`Profile.earliest_slot`: `earliest_starts`, then `slot` on its times, in one call."""
    node_times = earliest_starts(times, cum, nodes, d, per_node, check, n, walltime, grain, width, head,
                                 first_booking, any_booking)
    t, chosen = slot(times, cum, nodes, node_times, d, per_node, check, n, walltime, grain, width,
                     first_booking, any_booking, tries)
    return node_times, t, chosen


@njit(cache=True, nogil=True)
def _latest(nodes: np.ndarray, values: np.ndarray, ok: np.ndarray, n: int, scratch: np.ndarray) -> np.ndarray:
    """Sorted, the n of `nodes` where `ok` with the largest `values`, ties at the cut taken in
    position order (the first n of a stable sort by decreasing value, as a set): the cut found by
    selection (in `scratch`), then one pass in position order (no sort, unless `nodes` is not
    ascending)."""
    count, above = 0, 0
    for i in range(len(nodes)):
        if ok[i]:
            scratch[count] = -values[i]
            count += 1
    cut = -_select(scratch, count, n - 1)  # the n-th largest value
    for i in range(len(nodes)):
        above += ok[i] and values[i] > cut
    at_cut = n - above
    out = np.empty(n, dtype=nodes.dtype)
    k = 0
    for i in range(len(nodes)):
        if ok[i] and (values[i] > cut or (values[i] == cut and at_cut > 0)):
            at_cut -= values[i] == cut
            out[k] = nodes[i]
            k += 1
    for i in range(1, n):
        if out[i] < out[i - 1]:
            return np.sort(out)
    return out


@njit(cache=True, nogil=True, **NO_REFCOUNTS)
def _bisect(times: np.ndarray, x: int, hi: int, t: float) -> int:
    """The first of node x's instants 0..hi-1 at or after t (hi if none): its instants ascend."""
    lo = 0
    while lo < hi:
        mid = (lo + hi) // 2
        if times[mid, x] < t:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True, nogil=True, **NO_REFCOUNTS)
def _insert(times: np.ndarray, cum: np.ndarray, x: int, m: int, t: float) -> int:
    """Add instant t (after instant 0) to node x's m instants, carrying the amounts before it, if
    it is missing; how many instants the node has then. Row m, padding, takes the shift."""
    lo = _bisect(times, x, m, t)
    if lo < m and times[lo, x] == t:
        return m
    for k in range(m, lo, -1):
        times[k, x] = times[k - 1, x]
        for r in range(3):
            cum[r, k, x] = cum[r, k - 1, x]
    times[lo, x] = t
    for r in range(3):
        cum[r, lo, x] = cum[r, lo - 1, x]
    return m + 1


@njit(cache=True, nogil=True)
def fold(times: np.ndarray, cum: np.ndarray, nodes: np.ndarray, t0: float, t1: float, d: np.ndarray,
         per_node: bool, now: float, width: int) -> int:
    """Take d from each of `nodes` (distinct) over [t0, t1), adding the instants t0 and t1 where
    they are missing (t0 only when it is after now; t1 only when it is after now and after t0, or
    t0 is not added), as `Profile._fold` does; the width after (one padding row past the longest
    node). The matrices must have room for two more instants past `width`."""
    add0 = t0 > now
    add1 = t1 > now and (not add0 or t0 < t1)
    for i in range(len(nodes)):
        x, col = nodes[i], i if per_node else 0
        m = _bisect(times, x, times.shape[0], INF)  # its instants: the finite ones
        if add0:
            m = _insert(times, cum, x, m, t0)
        if add1:
            m = _insert(times, cum, x, m, t1)
        # (from now on: every instant before t1; else from t0's instant, found by bisection)
        for k in range(0 if t0 <= now else _bisect(times, x, m, t0), m):
            tk = times[k, x]
            if tk >= t1:
                break
            if t0 <= now or tk >= t0:
                for r in range(3):
                    if d[r, col] != 0:  # (a row it takes nothing of is not touched: a cache miss each)
                        cum[r, k, x] -= d[r, col]
        width = max(width, m + 1)
    return width


@njit(cache=True, nogil=True)
def nth_smallest(times: np.ndarray, n: int) -> float:
    """`timeline.nth_smallest`."""
    return _nth(times, n, np.empty(len(times)))


@njit(cache=True, nogil=True)
def _nth(values: np.ndarray, n: int, scratch: np.ndarray) -> float:
    """`nth_smallest`, selecting in `scratch` (room for every value): the n-th smallest finite
    value, INF if there are fewer (for n = 1, the least value)."""
    if n == 1:
        least = INF
        for v in values:
            least = min(least, v)
        return least
    count = 0
    for v in values:
        if np.isfinite(v):
            scratch[count] = v
            count += 1
    return _select(scratch, count, n - 1) if count >= n else INF


@njit(cache=True, nogil=True)
def _select(buf: np.ndarray, count: int, k: int) -> float:
    """The k-th smallest (from 0) of buf[:count], which it reorders: Hoare's selection (no NaN)."""
    lo, hi = 0, count - 1
    while lo < hi:
        pivot = buf[(lo + hi) // 2]
        i, j = lo, hi
        while i <= j:  # after it: buf[lo..j] <= pivot <= buf[i..hi], and between them all equal pivot
            while buf[i] < pivot:
                i += 1
            while buf[j] > pivot:
                j -= 1
            if i <= j:
                buf[i], buf[j] = buf[j], buf[i]
                i += 1
                j -= 1
        if k <= j:
            hi = j
        elif k >= i:
            lo = i
        else:
            break
    return buf[k]


@njit(cache=True, nogil=True)
def _by_bound(doubt: np.ndarray, bound: np.ndarray) -> np.ndarray:
    """`doubt` stably sorted by `bound`: a counting sort over its distinct bounds, few in a profile
    (each is one of a node's instants); past `DISTINCT_BOUNDS` of them, a stable argsort."""
    values = np.empty(DISTINCT_BOUNDS)
    rank = np.empty(len(doubt), dtype=np.int64)
    n_values = 0
    for i in range(len(doubt)):
        v = bound[doubt[i]]
        at = np.searchsorted(values[:n_values], v)
        if at == n_values or values[at] != v:
            if n_values == DISTINCT_BOUNDS:
                return doubt[np.argsort(bound[doubt], kind="mergesort")]
            values[at + 1 : n_values + 1] = values[at:n_values].copy()
            values[at] = v
            n_values += 1
    starts = np.zeros(n_values + 1, dtype=np.int64)
    for i in range(len(doubt)):
        rank[i] = np.searchsorted(values[:n_values], bound[doubt[i]])
        starts[rank[i] + 1] += 1
    for r in range(n_values):
        starts[r + 1] += starts[r]
    out = np.empty_like(doubt)
    for i in range(len(doubt)):
        out[starts[rank[i]]] = doubt[i]
        starts[rank[i]] += 1
    return out


@njit(cache=True, nogil=True)
def _columns(d: np.ndarray, part: np.ndarray, per_node: bool) -> np.ndarray:
    """The demand columns of the nodes at places `part` (one column per node when `per_node`, else
    the one column for all): a search of some of the nodes reads their own columns."""
    return d[:, part] if per_node else d


@njit(cache=True, nogil=True)
def earliest_starts(times: np.ndarray, cum: np.ndarray, nodes: np.ndarray, d: np.ndarray, per_node: bool,
                    check: np.ndarray, n: int, walltime: float, grain: int, width: int, head: int,
                    first_booking: np.ndarray, any_booking: bool) -> np.ndarray:
    """`Profile.earliest_starts`, step for step: the same nodes searched in the same order and
    chunks, so the same nodes end up exact. (`per_node` is passed on as it came: the loops compiled
    for a constant False here ran ten times slower.)"""
    bound = first_cover(times, cum, nodes, d, per_node, check, min(head, width), width)
    m = len(nodes)  # a node whose bound is negative was not searched past the head: -bound is a lower bound
    partial = np.empty(m, dtype=np.int64)
    n_partial = 0
    for i in range(m):
        if bound[i] < 0:
            partial[n_partial] = i
            n_partial += 1
    if not any_booking and n_partial == 0:
        return bound
    out, clear, scratch = np.empty(m), np.zeros(m, dtype=np.bool_), np.empty(m)
    for i in range(m):
        if bound[i] >= 0:  # exact where no booking starts before the job would end
            clear[i] = first_booking[nodes[i]] >= np.ceil((bound[i] + walltime) / grain) * grain
        out[i] = bound[i] if clear[i] else INF
    nth = _nth(out, n, scratch)
    more = partial[:n_partial][bound[partial[:n_partial]] >= -nth]
    if len(more):
        exact = first_cover(times, cum, nodes[more], _columns(d, more, per_node), per_node, check, width,
                            width)
        for j in range(len(more)):
            i = more[j]
            bound[i] = exact[j]
            clear[i] = first_booking[nodes[i]] >= np.ceil((exact[j] + walltime) / grain) * grain
            out[i] = exact[j] if clear[i] else INF
        nth = _nth(out, n, scratch)
    doubt = np.empty(m, dtype=np.int64)
    n_doubt = 0
    for i in range(m):
        if not clear[i] and 0 <= bound[i] <= nth:
            doubt[n_doubt] = i
            n_doubt += 1
    order = _by_bound(doubt[:n_doubt], bound)
    i, chunk = 0, max(32, 2 * n)
    while i < len(order) and bound[order[i]] <= nth:
        part = order[i : i + chunk]
        out[part] = earliest(times, cum, nodes[part], _columns(d, part, per_node), per_node, check, walltime,
                             grain, width)
        nth = _nth(out, n, scratch)
        i, chunk = i + chunk, 2 * chunk
    return out

# --- a reservation's search over level bounds ------------------------------------------------------
#
# A job on one node reserves the node of its eligible set whose earliest start is least (the first in
# the set's order on ties: `slot`); a job on n nodes the first candidate start at which n hold it, and
# failing every candidate the sure start (`core_kernel._when_quiet`). `earliest_slot` finds them by
# searching every node's head; here each node keeps, per demand level, the first of its instants that
# has that level free (`bounds`): a level at most a job's demand in every resource is free no later
# than the demand, so a node whose bound is past the best start found so far (the n-th best, the
# candidate being tried) cannot matter, and only the nodes that can are searched, each as
# `earliest_starts` would search it. A level is a demand rounded down to powers of two (memory and
# gpu not compared where the job asks none), or for whole-node jobs each node's capacity; a decision
# makes a level the first time a job of it reserves, and a fold logs the nodes it changed, which each
# level reads again when it is next asked.

LEVELS = 128  # most levels a decision's bounds hold; past them a search is the plain one
NOT_COMPARED = -(1 << 62)  # a level's threshold where the job asks none of a resource
WHOLE = -(1 << 61)  # the key of the whole-node level: each node's thresholds are its capacity (`full`)


def new_bounds(times: np.ndarray, full: np.ndarray, levels: int = LEVELS,
               ring: int = 0) -> tuple[np.ndarray, ...]:
    """Empty bounds for a profile of `times`' nodes, room for `levels` levels (at most `LEVELS`: a
    decision sizes it to the levels its jobs may ask, `levels_asked`): (keys (levels, 3): each
    level's thresholds; first (levels, N): each node's first instant with the level free, INF if
    none; synced (levels,): how much of the log each level has read (-1: none yet, read every node);
    log (`ring` (default 2 N), 3): what the folds changed, a ring (`log_fold`); state: [levels made,
    folds logged]; hi: [the largest magnitude of an instant]; full (3, N): each node's capacity, the
    whole-node level's thresholds). Rows of `first` are written only when a level is made."""
    n = times.shape[1]
    levels = max(1, min(levels, LEVELS))
    finite = times[np.isfinite(times)]
    hi = np.array([float(np.abs(finite).max()) if len(finite) else 0.0])
    return (np.zeros((levels, 3), dtype=np.int64), np.empty((levels, n)), np.full(levels, -1, dtype=np.int64),
            np.empty((ring or max(2 * n, 64), 3)), np.zeros(2, dtype=np.int64), hi,
            np.ascontiguousarray(full, dtype=np.int64))


@njit(cache=True, nogil=True)
def levels_asked(demand: np.ndarray, whole: np.ndarray) -> int:
    """How many distinct levels jobs of `demand` (3, J) (cpu, memory, gpu per node) and `whole`
    (J: whole-node jobs, one level for all of them) can ask (`_level`'s keys): the rows their bounds
    need."""
    seen = np.empty((len(whole) + 1, 3), dtype=np.int64)
    count = 0
    for j in range(len(whole)):
        if whole[j]:
            c, m, g = WHOLE, WHOLE, WHOLE
        else:
            c, m, g = _keys(demand[0, j], demand[1, j], demand[2, j])
        new = True
        for row in range(count):
            if seen[row, 0] == c and seen[row, 1] == m and seen[row, 2] == g:
                new = False
                break
        if new:
            seen[count, 0], seen[count, 1], seen[count, 2] = c, m, g
            count += 1
            if count == LEVELS:
                break
    return count


@njit(cache=True, nogil=True)
def log_fold(bounds: tuple, nodes: np.ndarray, t0: float, t1: float, d: np.ndarray, per_node: bool,
             now: float) -> None:
    """A fold took d from `nodes` over [t0, t1) (from instant 0 when t0 is not after now) and may
    have added the instants t0 and t1: logged per node as (x, from, to) where it only took, so that a
    level's bound moves only where it lay in that span and only later; as (-x - 1, ...) where it
    gave, and a level finds the node's bound afresh."""
    log, state, hi = bounds[3], bounds[4], bounds[5]
    lo = t0 if t0 > now else -INF
    for i in range(len(nodes)):
        col = i if per_node else 0
        took = d[0, col] >= 0 and d[1, col] >= 0 and d[2, col] >= 0
        row = state[1] % len(log)
        log[row, 0] = nodes[i] if took else -nodes[i] - 1
        log[row, 1], log[row, 2] = lo, t1
        state[1] += 1
    hi[0] = max(hi[0], abs(t0), abs(t1))


@njit(cache=True, nogil=True, inline="always")
def _floor2(v: int) -> int:
    """The largest power of two at most v (v itself below 1)."""
    if v < 1:
        return v
    p = 1
    while 2 * p <= v:
        p *= 2
    return p


@njit(cache=True, nogil=True, inline="always")
def _keys(c: int, m: int, g: int) -> tuple[int, int, int]:
    """The level of demand (c, m, g), memory and gpu 0 where not compared: each rounded down to a
    power of two, NOT_COMPARED where 0."""
    return _floor2(c), _floor2(m) if m > 0 else NOT_COMPARED, _floor2(g) if g > 0 else NOT_COMPARED


@njit(cache=True, nogil=True)
def _level(bounds: tuple, lc: int, lm: int, lg: int) -> int:
    """The row of the level of keys (lc, lm, lg), made if new; -1 when every row is taken."""
    keys, state = bounds[0], bounds[4]
    for row in range(state[0]):
        if keys[row, 0] == lc and keys[row, 1] == lm and keys[row, 2] == lg:
            return row
    if state[0] == keys.shape[0]:
        return -1
    row = state[0]
    keys[row, 0], keys[row, 1], keys[row, 2] = lc, lm, lg
    state[0] += 1
    return row


@njit(cache=True, nogil=True, **NO_REFCOUNTS)
def _first_with(times: np.ndarray, cum: np.ndarray, x: int, lc: int, lm: int, lg: int, k: int) -> float:
    """Node x's first instant from its k-th on with (lc, lm, lg) free (INF if none)."""
    while k < times.shape[0]:
        t = times[k, x]
        if t == INF:
            break
        if cum[0, k, x] >= lc and cum[1, k, x] >= lm and cum[2, k, x] >= lg:
            return t
        k += 1
    return INF


@njit(cache=True, nogil=True, **NO_REFCOUNTS)
def _first_of(times: np.ndarray, cum: np.ndarray, keys: np.ndarray, full: np.ndarray, row: int, x: int,
              k: int) -> float:
    """Node x's first instant from its k-th on with level `row` free: its thresholds, or for the
    whole-node level the node's capacity."""
    if keys[row, 0] == WHOLE:
        return _first_with(times, cum, x, full[0, x], full[1, x], full[2, x], k)
    return _first_with(times, cum, x, keys[row, 0], keys[row, 1], keys[row, 2], k)


@njit(cache=True, nogil=True)
def _sync(times: np.ndarray, cum: np.ndarray, bounds: tuple, row: int) -> None:
    """Level `row`'s bounds brought up to date with the folds logged since it last read the log (every
    node afresh, if it never did or the ring has turned over since). A fold that only took moves a
    bound only where it lay in the fold's span, and then later: the node is searched on from there."""
    keys, first, synced, log, state = bounds[:5]
    full = bounds[6]
    if synced[row] < 0 or state[1] - synced[row] > len(log):
        for x in range(first.shape[1]):
            first[row, x] = _first_of(times, cum, keys, full, row, x, 0)
    else:
        for p in range(synced[row], state[1]):
            code, lo, hi = log[p % len(log), 0], log[p % len(log), 1], log[p % len(log), 2]
            x = int(code) if code >= 0 else int(-code - 1)
            b = first[row, x]
            if code < 0:
                first[row, x] = _first_of(times, cum, keys, full, row, x, 0)
            elif lo <= b < hi:
                at = _bisect(times, x, times.shape[0], b)
                first[row, x] = _first_of(times, cum, keys, full, row, x, at)
    synced[row] = state[1]


@njit(cache=True, nogil=True, **NO_REFCOUNTS)
def _start_on(times: np.ndarray, cum: np.ndarray, nodes: np.ndarray, i: int, d: np.ndarray, per_node: bool,
              check: np.ndarray, walltime: float, grain: int, width: int, first_booking: np.ndarray,
              bound: float) -> float:
    """`earliest_starts`' answer for node i of `nodes` where it searches the node: its first instant
    covering d (`first_cover`) when no booking starts before the job would end from it, else its
    exact earliest start (`earliest`), node by node without an array made. No instant before `bound`
    (the node's level bound) covers d, and the walltime is not negligible (`bound_slot`): none of them
    can start the job, so both searches begin at `bound` (found by bisection, not instant by instant).
    Either way the node's exact earliest start (`earliest`'s), an instant of the node, or INF."""
    x, need, mem, gpu = nodes[i], _need(d, i if per_node else 0), check[1], check[2]
    first, at = INF, _bisect(times, x, width, bound)
    for k in range(at, width):
        if times[k, x] == INF:
            break
        if _covered(cum, k, x, need, mem, gpu):
            first, at = times[k, x], k
            break
    if first == INF or first_booking[x] >= np.ceil((first + walltime) / grain) * grain:
        return first
    k = at  # (the instants before it do not cover d: `earliest` steps over them one by one)
    while k < width:  # (`earliest`'s loop, for node x)
        t = times[k, x]
        if t == INF:
            break
        if walltime > 1e-12 * abs(t) and not _covered(cum, k, x, need, mem, gpu):
            k += 1
            continue
        end = np.ceil((t + walltime) / grain) * grain
        j = k
        while j < width and times[j, x] < end and _covered(cum, j, x, need, mem, gpu):
            j += 1
        if j < width and times[j, x] < end:
            k = j + 1
            continue
        return t
    return INF


@njit(cache=True, nogil=True)
def bound_slot(times: np.ndarray, cum: np.ndarray, bounds: tuple, nodes: np.ndarray, d: np.ndarray,
               per_node: bool, check: np.ndarray, n: int, walltime: float, grain: int, width: int,
               first_booking: np.ndarray, any_booking: bool,
               tries: int) -> tuple[float, np.ndarray, int, np.ndarray]:
    """A reservation's search over level bounds: `slot`'s (start, nodes) on every node's earliest
    start, its first `tries` candidates for n > 1 (NaN, none: no candidate held), searching only the
    nodes whose level bound does not rule them out; how many were searched; and each node's start as
    the sure start (`core_kernel._when_quiet`) reads it when no candidate held (see `_later`; for
    n = 1, none). d is one demand column (its level: `_keys`), or `per_node` each node's capacity for
    a whole-node job (the whole-node level, compared on every resource). -1 searched when the
    bounds cannot say (every level taken, or a walltime so short that `earliest` may start a node
    before its demand is free): the caller searches as before."""
    if per_node:
        row = _level(bounds, WHOLE, WHOLE, WHOLE)
    else:
        lc, lm, lg = _keys(d[0, 0], d[1, 0] if check[1] else 0, d[2, 0] if check[2] else 0)
        row = _level(bounds, lc, lm, lg)
    if row < 0 or not walltime > 1e-12 * bounds[5][0]:
        return np.nan, nodes[:0], -1, np.empty(0)
    _sync(times, cum, bounds, row)
    first = bounds[1][row]
    if n == 1:
        t, chosen, searched = _one_node(times, cum, first, nodes, d, per_node, check, walltime, grain, width,
                                        first_booking)
        return t, chosen, searched, np.empty(0)
    node_times, known, searched = _n_least(times, cum, first, nodes, d, per_node, check, n, walltime, grain,
                                           width, first_booking)
    t, chosen, more = _later(times, cum, first, nodes, node_times, known, d, per_node, check, n, walltime,
                             grain, width, first_booking, any_booking, tries)
    return t, chosen, searched + more, node_times


@njit(cache=True, nogil=True)
def _one_node(times: np.ndarray, cum: np.ndarray, first: np.ndarray, nodes: np.ndarray, d: np.ndarray,
              per_node: bool, check: np.ndarray, walltime: float, grain: int, width: int,
              first_booking: np.ndarray) -> tuple[float, np.ndarray, int]:
    """`slot` for one node: the node whose start is least, the first on ties; a node whose bound
    (`first`, by node) is no earlier than the best start yet is not searched."""
    best, at, searched = INF, -1, 0
    for i in range(len(nodes)):
        if first[nodes[i]] >= best:
            continue
        searched += 1
        t = _start_on(times, cum, nodes, i, d, per_node, check, walltime, grain, width, first_booking,
                      first[nodes[i]])
        if t < best:
            best, at = t, i
    if at < 0:
        return np.nan, nodes[:0], searched
    return best, nodes[at : at + 1].copy(), searched


@njit(cache=True, nogil=True)
def _n_least(times: np.ndarray, cum: np.ndarray, first: np.ndarray, nodes: np.ndarray, d: np.ndarray,
             per_node: bool, check: np.ndarray, n: int, walltime: float, grain: int, width: int,
             first_booking: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """Per node, its start where searched, else INF, as `slot` needs them for n nodes: every node
    whose start is at most the n-th least is searched (its bound is at most the n-th least start found
    when it comes, kept in a heap of the n least), so those and the n-th least are `earliest_starts`'
    own; (the times, which are exact (searched, or a bound of INF), the nodes searched). A node not
    known has a bound above the n-th least start."""
    out = np.full(len(nodes), INF)
    known = np.zeros(len(nodes), dtype=np.bool_)
    heap = np.full(n, INF)  # the n least starts found, the greatest at the root
    searched = 0
    for i in range(len(nodes)):
        b = first[nodes[i]]
        known[i] = b == INF
        if b == INF or b > heap[0]:
            continue
        searched += 1
        known[i] = True
        t = _start_on(times, cum, nodes, i, d, per_node, check, walltime, grain, width, first_booking, b)
        out[i] = t
        if t < heap[0]:
            _replace_root(heap, t)
    return out, known, searched


@njit(cache=True, nogil=True)
def _later(times: np.ndarray, cum: np.ndarray, first: np.ndarray, nodes: np.ndarray, node_times: np.ndarray,
           known: np.ndarray, d: np.ndarray, per_node: bool, check: np.ndarray, n: int, walltime: float,
           grain: int, width: int, first_booking: np.ndarray, any_booking: bool,
           tries: int) -> tuple[float, np.ndarray, int]:
    """`common_start` on every node's earliest start, its first `tries` candidates, with only the
    nodes searched that can matter; (start, nodes, nodes searched). A candidate is the next distinct
    start above the last: before it is tried, every node not known whose bound is at most it is
    searched (each may lower it), so every node starting at or before it is known and the rest start
    after it, as `common_start` sees them. When none held, `core_kernel._when_quiet` reads of each
    node only whether it ever holds the job, and then its last instant (a start is one of the node's
    instants): a node not known holds the job from its last instant on when that instant covers d
    (the stand-in start written is that instant), else it is searched."""
    scratch, ok = np.empty(len(nodes)), np.empty(len(nodes), dtype=np.bool_)
    searched = 0
    t = _nth(node_times, n, scratch)
    for attempt in range(tries):
        if t == INF:
            break
        chosen = _held_at(times, cum, nodes, node_times, d, per_node, check, n, t,
                          np.ceil((t + walltime) / grain) * grain, width, first_booking, any_booking, True,
                          ok, scratch)
        if len(chosen):
            return t, chosen, searched
        if attempt == tries - 1:
            break
        nxt = _next_above(node_times, t)
        for i in range(len(nodes)):
            if not known[i] and first[nodes[i]] <= nxt:
                v = _start_on(times, cum, nodes, i, d, per_node, check, walltime, grain, width, first_booking,
                              first[nodes[i]])
                node_times[i], known[i] = v, True
                searched += 1
                nxt = min(nxt, v)  # (v > t: its bound is)
        t = nxt
    mem, gpu = check[1], check[2]
    for i in range(len(nodes)):
        if known[i]:
            continue
        x = nodes[i]
        last = _bisect(times, x, width, INF) - 1
        if _covered(cum, last, x, _need(d, i if per_node else 0), mem, gpu):
            node_times[i] = times[last, x]
        else:
            node_times[i] = _start_on(times, cum, nodes, i, d, per_node, check, walltime, grain, width,
                                      first_booking, first[x])
            searched += 1
    return np.nan, nodes[:0], searched


@njit(cache=True, nogil=True, **NO_REFCOUNTS)
def _replace_root(heap: np.ndarray, v: float) -> None:
    """A max-heap's greatest replaced by v, sifted down."""
    i, size = 0, len(heap)
    while True:
        child = 2 * i + 1
        if child >= size:
            break
        if child + 1 < size and heap[child + 1] > heap[child]:
            child += 1
        if heap[child] <= v:
            break
        heap[i] = heap[child]
        i = child
    heap[i] = v


@njit(cache=True, nogil=True)
def step_matrix(base: np.ndarray, xs: np.ndarray, ts: np.ndarray, amounts: np.ndarray,
                now: float) -> tuple[np.ndarray, np.ndarray]:
    """`timeline._step_matrix`: from free-now `base` (3, N) and (node, time, amount) steps, each
    node's distinct step times ascending after `now`, and what it has free from each on; one
    padding instant past the node with the most."""
    offsets, by_node, most = step_groups(xs, ts, base.shape[1])
    k = most + 2
    times = np.full((k, base.shape[1]), INF)
    cum = np.empty((3, k, base.shape[1]), dtype=np.int64)
    step_fill(times, cum, k, base, ts, amounts, offsets, by_node, now)
    return times, cum


@njit(cache=True, nogil=True)
def step_groups(xs: np.ndarray, ts: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray, int]:
    """The steps grouped by node in one counting pass, ordered by time within a node (stable):
    node x's are `by_node[offsets[x]:offsets[x + 1]]`; and the most distinct times a node has."""
    offsets = np.zeros(n + 1, dtype=np.int64)
    for e in range(len(xs)):
        offsets[xs[e] + 1] += 1
    for x in range(n):
        offsets[x + 1] += offsets[x]
    by_node = np.empty(len(xs), dtype=np.int64)
    filled = offsets[:-1].copy()
    for e in range(len(xs)):
        by_node[filled[xs[e]]] = e
        filled[xs[e]] += 1
    most = 0
    for x in range(n):
        group = by_node[offsets[x] : offsets[x + 1]]
        if len(group) > 32:  # a node with many jobs: a merge sort (stable)
            group[:] = group[np.argsort(ts[group], kind="mergesort")]
        for i in range(1, len(group)):  # else a stable insertion sort by time (sorted: one pass)
            e, j = group[i], i - 1
            while j >= 0 and ts[group[j]] > ts[e]:
                group[j + 1] = group[j]
                j -= 1
            group[j + 1] = e
        distinct = 0
        for i in range(len(group)):
            if i == 0 or ts[group[i]] != ts[group[i - 1]]:
                distinct += 1
        most = max(most, distinct)
    return offsets, by_node, most


@njit(cache=True, nogil=True)
def step_fill(times: np.ndarray, cum: np.ndarray, k: int, base: np.ndarray, ts: np.ndarray,
              amounts: np.ndarray, offsets: np.ndarray, by_node: np.ndarray, now: float) -> None:
    """Rows 0..k-1 of the matrices from the grouped steps (`step_groups`): instant 0 `now` with
    `base`, then each distinct time with the amounts summed; INF after a node's last, its amounts
    repeated. Rows past k are left as they are."""
    for x in range(base.shape[1]):
        times[0, x] = now
        for r in range(3):
            cum[r, 0, x] = base[r, x]
        row = 0
        for i in range(offsets[x], offsets[x + 1]):
            e = by_node[i]
            if i == offsets[x] or ts[e] != ts[by_node[i - 1]]:
                row += 1
                times[row, x] = ts[e]
                for r in range(3):
                    cum[r, row, x] = cum[r, row - 1, x]
            for r in range(3):
                cum[r, row, x] += amounts[r, e]
        for pad in range(row + 1, k):
            times[pad, x] = INF
            for r in range(3):
                cum[r, pad, x] = cum[r, row, x]






def warm() -> None:
    """Compile (or load from numba's cache) every loop for the argument types `Profile` passes,
    so that no decision pays for it: node indices come writable, or read-only (the cluster index's
    shared lists of eligible nodes), and numba compiles each kind apart."""
    step_matrix(np.zeros((3, 1), dtype=np.int64), np.zeros(1, dtype=np.int64), np.ones(1),
                np.zeros((3, 1), dtype=np.int64), 0.0)
    times = np.array([[0.0], [60.0], [INF], [INF]])
    cum = np.zeros((3, 4, 1), dtype=np.int64)
    d = np.zeros((3, 1), dtype=np.int64)
    check = np.ones(3, dtype=np.bool_)
    shared = np.zeros(1, dtype=np.int64)
    shared.setflags(write=False)
    for cols in (np.zeros(1, dtype=np.int64), shared):
        earliest(times, cum, cols, d, False, check, 60.0, 60, 2)
        first_cover(times, cum, cols, d, False, check, 1, 2)
        holds_over(times, cum, cols, d, False, check, 0.0, 60.0, 2)
        fold(times, cum, cols, 0.0, 60.0, d, False, 0.0, 2)
        earliest_starts(times, cum, cols, d, False, check, 1, 60.0, 60, 2, 4, np.zeros(1), True)
        common_start(times, cum, cols, np.zeros(1), d, False, check, 1, 60.0, 60, 2, np.zeros(1), True, 16,
                     False)
        earliest_slot(times, cum, cols, d, False, check, 1, 60.0, 60, 2, 4, np.zeros(1), True, 16)


"""The scheduling pass of docs/methods.md §1 as one compiled loop: the decision core.

`app.sched.core` prepares a decision's arrays and reads the answer back; this module is the pass
itself, job by job in the order it is given: a promised slot given back, never fits or a stopped
queue, a start on the best nodes that hold the job until its release without delaying a booking,
else a reservation on the nodes that hold it earliest (while the queue's depth and the policy allow),
else a wait, with the reason as a code. `app.sched.reference` is the same pass written to be read;
tests/sched/test_reference.py holds this one to it, decision for decision.

The availability profile is `app.sched.timeline.Profile`'s pair of matrices: `times` (K, N), each
node's instants ascending then INF padding, and `cum` (3, K, N), what it has free from each on. The
questions and folds are `app.sched.profile_kernels`'. Besides them the pass keeps:

- `free` (3, N): what each node has free now, bookings not counted (a node down: NEG);
- `first_booking` (N): the earliest start of anything booked on a node (reservations, promised
  slots, windows ahead): a node whose first booking is at or after a job's release holds it as
  long as it has the demand free now, since running jobs only give back until then;
- `room` (3, N): what a booking that starts at a node's first booking leaves of its capacity (its
  capacity where unknown: the snapshot's bookings, a promised slot given back): a job that needs
  more than that cannot run past that start;
- per eligible set (a queue and labels), its nodes in node order and in the selector's order when
  that order is fixed (first_fit: node order; least_load: by load; evaluation: by its key at the
  pass's start, with the nodes whose key has changed since listed apart, `evaluation_order`), and
  over the latter a tree of the most each range of places has free of each resource (`tree`): the
  next node with a demand free now is found past the ranges where no node has enough of some
  resource, and a set where none has is told at the root;
- per eligible set, a few demands that found too few nodes free now (`FRONTIER`): free only
  shrinks during a pass, so a job asking at least as much of every resource, for more nodes than
  that, cannot start now either;
- per eligible set, a few demands that found too few nodes clear of bookings until their release
  (`bl`): bookings only grow, so a job of that demand released no earlier, for more nodes than
  that, cannot start either, and with no start since it finds as many nodes free now.

Each shortcut gives the answer the plain pass gives, and the reference tests hold it to that. The
pass counts the node rows its walks touch (`WORK`), which tests/sched/test_work_bound.py bounds, and
the nodes its reservation searches search (`SEARCHED`): those the level bounds do not rule out
(`profile_kernels.bound_slot`, for every candidate start and the sure start; every eligible node under
memory_backfill), which it bounds too.

The level bounds (`nodes[6]`, `profile_kernels.new_bounds`): per demand level, each node's first instant
with that level free, made the first time a job of that level reserves; each fold logs the nodes it
changed (`_fold`), and a level reads the log when it is next asked.

The arguments come bundled, each a tuple the caller builds once per decision (see `core.CorePass`):
`nodes` (free, cap, first_booking, booked, cpu_part, room, bounds); `sets` (e_off, e_nodes, e_rank,
t_off, t_size, tree, m_off, m_set, m_pos, fr, fr_n, bl, bl_n, mv, mv_n, m_moved); `jobs` (cols,
walltime, may, never, promise, p_off, p_nodes, held); `queues` (reserved_in, stopped_by, deferred);
`out` (outcome, aux, o_off, o_nodes, start_at, seq, left, counters); `how` (rules, coef, selector, now,
grain).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from app.sched import profile_kernels as kernels

INF = math.inf
# what became of a job (`outcome`)
(LOOKING, START, BACKFILL, RESERVED, NEVER_FITS, NODE_DOWN, BEHIND, BLOCKED, SHORT, NOT_EVALUATED,
 DEFERRED) = range(11)
# the selectors (app.sched.selectors): the first two rank nodes in an order fixed for the pass
FIRST_FIT, LEAST_LOAD, EVALUATION, FRAGMENT = range(4)
# `rules`: reservations per queue, a node holds one reservation at most (memory_backfill), a queue
# stops at its first blocked job (fcfs), reserved nodes withheld from now on (firstfit), candidate
# instants of a multi-node reservation, instants searched on every node first
DEPTH, ONE_PER_NODE, STOP_AT_BLOCK, FROM_NOW, TRIES, HEAD = range(6)
# `counters`: jobs in `seq`, jobs deferred to `left`, node rows the starts' walks touched, the
# profile's width, anything booked yet, a window ahead taken, nodes handed to reservation searches,
# starts made
N_SEQ, N_LEFT, WORK, WIDTH, ANY_BOOKING, ANY_WINDOW, SEARCHED, STARTS = range(8)
# rows of `cols` (7, J) int64: each job's demand per node, nodes, whole-node (1), queue, eligible set
CPU, MEM, GPU, NODES, WHOLE, QUEUE, ELIG = range(7)
FRONTIER = 32  # demands remembered per eligible set that found too few nodes free now
NEG = -(1 << 40)  # a tree's padding: no demand fits there (as `cluster.NEG`, a node down)
MOVED = 256  # most nodes a set lists as moved out of its evaluation order before it is made afresh

NO = np.bool_(False)  # (a plain bool, as the kernels are compiled for: see app.sim.compiled)
_EVERY = np.ones(3, dtype=np.bool_)


# --- the profile's buffers -------------------------------------------------------------------------

@njit(cache=True, nogil=True)
def room(times: np.ndarray, cum: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
    """`Profile._grow` until a fold has room for two more instants past `width`: twice the rows,
    INF instants whose amounts repeat the last row's."""
    while width + 2 > times.shape[0]:
        k, n = times.shape
        grown = np.full((2 * k, n), INF)
        more = np.empty((3, 2 * k, n), dtype=np.int64)
        for row in range(2 * k):
            for x in range(n):
                if row < k:
                    grown[row, x] = times[row, x]
                for r in range(3):
                    more[r, row, x] = cum[r, min(row, k - 1), x]
        times, cum = grown, more
    return times, cum


@njit(cache=True, nogil=True)
def _fold(times: np.ndarray, cum: np.ndarray, counters: np.ndarray, nodes: np.ndarray, t0: float, t1: float,
          d: np.ndarray, per_node: bool, now: float, bounds: tuple) -> tuple[np.ndarray, np.ndarray]:
    """Take d from `nodes` over [t0, t1) (`kernels.fold`), logged for the level bounds."""
    times, cum = room(times, cum, counters[WIDTH])
    counters[WIDTH] = kernels.fold(times, cum, nodes, t0, t1, d, per_node, now, counters[WIDTH])
    kernels.log_fold(bounds, nodes, t0, t1, d, per_node, now)
    return times, cum


@njit(cache=True, nogil=True)
def _book(times: np.ndarray, cum: np.ndarray, nodes: tuple, chosen: np.ndarray, t0: float, t1: float,
          d: np.ndarray, per_node: bool, counters: np.ndarray, now: float) -> tuple[np.ndarray, np.ndarray]:
    """Book d on `chosen` over [t0, t1): a reservation or a promised slot. A node's `room` becomes
    what this booking leaves of its capacity where it is now the node's first (the least left
    where it starts with the first)."""
    _, cap, first_booking, booked, _, room, bounds = nodes
    times, cum = _fold(times, cum, counters, chosen, t0, t1, d, per_node, now, bounds)
    for i in range(len(chosen)):
        x = chosen[i]
        booked[x] = True
        if t0 <= first_booking[x]:
            for r in range(3):
                left = cap[r, x] - d[r, i if per_node else 0]
                room[r, x] = left if t0 < first_booking[x] else min(room[r, x], left)
            first_booking[x] = t0
    counters[ANY_BOOKING] = 1
    return times, cum


@njit(cache=True, nogil=True)
def release(end: float, now: float, grain: int) -> float:
    """`timeline.release_time`."""
    if end <= now:
        return np.floor(now / grain) * grain + grain
    return np.ceil(end / grain) * grain


@njit(cache=True, nogil=True)
def _need(cols: np.ndarray, j: int, chosen: np.ndarray, cap: np.ndarray, sign: int) -> np.ndarray:
    """What job j takes on each of `chosen` (times `sign`): its demand as one column, or, for a
    whole-node job, each node's capacity."""
    if cols[WHOLE, j] == 1:
        d = np.empty((3, len(chosen)), dtype=np.int64)
        for i in range(len(chosen)):
            for r in range(3):
                d[r, i] = sign * cap[r, chosen[i]]
        return d
    d = np.empty((3, 1), dtype=np.int64)
    d[0, 0], d[1, 0], d[2, 0] = sign * cols[CPU, j], sign * cols[MEM, j], sign * cols[GPU, j]
    return d


# --- the eligible sets' trees ------------------------------------------------------------------------

@njit(cache=True, nogil=True)
def build_trees(free: np.ndarray, e_off: np.ndarray, e_rank: np.ndarray, t_off: np.ndarray,
                t_size: np.ndarray, tree: np.ndarray) -> None:
    """Each set's tree over its places in `e_rank`: leaf p (at t_size + p) holds what that node has
    free now, an inner node the most of each resource under it; padding leaves hold NEG."""
    for e in range(len(t_size)):
        _build_tree(free, e_off, e_rank, t_off, t_size, tree, e)


@njit(cache=True, nogil=True)
def _build_tree(free: np.ndarray, e_off: np.ndarray, e_rank: np.ndarray, t_off: np.ndarray,
                t_size: np.ndarray, tree: np.ndarray, e: int) -> None:
    """Set e's tree (`build_trees`)."""
    base, size, lo = t_off[e], t_size[e], e_off[e]
    for p in range(size):
        for r in range(3):
            tree[r, base + size + p] = free[r, e_rank[lo + p]] if lo + p < e_off[e + 1] else NEG
    for i in range(size - 1, 0, -1):
        for r in range(3):
            tree[r, base + i] = max(tree[r, base + 2 * i], tree[r, base + 2 * i + 1])


@njit(cache=True, nogil=True, **kernels.NO_REFCOUNTS)
def _next_fit(tree: np.ndarray, base: int, size: int, p: int, c: int, m: int, g: int) -> int:
    """The first place at or after p whose node has (c, m, g) free now (-1: none): the ranges in
    order from leaf p on, left to right, entering one only where its most covers the demand. The
    most of each resource may come from different nodes, so a range entered may hold no node that
    covers it all: then the search goes on to the right of it. A leaf is one node: exact."""
    if p >= size:
        return -1
    i = size + p
    while True:
        while not (tree[0, base + i] >= c and (m == 0 or tree[1, base + i] >= m)
                   and (g == 0 or tree[2, base + i] >= g)):
            while i & 1:  # a right child: its parent's range is done too
                i >>= 1
            if i == 0:
                return -1
            i += 1
        if i >= size:
            return i - size
        i = 2 * i  # its left half first


@njit(cache=True, nogil=True, **kernels.NO_REFCOUNTS)
def _shrunk(free: np.ndarray, t_off: np.ndarray, t_size: np.ndarray, tree: np.ndarray, m_off: np.ndarray,
            m_set: np.ndarray, m_pos: np.ndarray, x: int) -> None:
    """Node x's free fell: its leaf in every set it belongs to, and the ranges above it."""
    for k in range(m_off[x], m_off[x + 1]):
        e = m_set[k]
        _leaf(tree, t_off[e], t_size[e] + m_pos[k], free[0, x], free[1, x], free[2, x])


@njit(cache=True, nogil=True, **kernels.NO_REFCOUNTS)
def _leaf(tree: np.ndarray, base: int, i: int, c: int, m: int, g: int) -> None:
    """Tree leaf i (counted from the tree's root) holds (c, m, g), and each range above it the most
    under it: up to the first range whose most stays as it was (those above it are made of the same
    values; a start's leaf is seldom the most of a range more than a few levels up, and each level
    is a few cache misses on a large set)."""
    tree[0, base + i], tree[1, base + i], tree[2, base + i] = c, m, g
    i >>= 1
    while i >= 1:
        left, right = base + 2 * i, base + 2 * i + 1
        mc, mm, mg = (max(tree[0, left], tree[0, right]), max(tree[1, left], tree[1, right]),
                      max(tree[2, left], tree[2, right]))
        if tree[0, base + i] == mc and tree[1, base + i] == mm and tree[2, base + i] == mg:
            return
        tree[0, base + i], tree[1, base + i], tree[2, base + i] = mc, mm, mg
        i >>= 1


# --- the evaluation selector's order --------------------------------------------------------------
# Its key (`_key`) moves with a node's free memory, which only a start changes. Each set's places
# (`e_rank`) are its nodes by their key when the order was made, ties in node order, and its tree is
# over them as for a fixed order; a node whose key has changed since is out of that walk (its leaf
# NEG, `m_moved`) and on the set's short list of moved nodes (`mv`, `mv_n`), by key now, ties in
# node order. A start's walk merges the two, so it meets the nodes in the order of every node's key
# now (a stable sort of them all by key now), and stops at the n-th clear one. A set whose list is
# full is ordered afresh.

@njit(cache=True, nogil=True, **kernels.NO_REFCOUNTS)
def _key(free: np.ndarray, cpu_part: np.ndarray, coef: np.ndarray, x: int) -> float:
    """Node x's evaluation key now: minus its E, the lower the better (`selectors.evaluation`'s,
    operation for operation)."""
    return -(coef[0] * cpu_part[x] + coef[1] * max(free[1, x], 0))


@njit(cache=True, nogil=True, inline="always")
def _before(ka: float, xa: int, kb: float, xb: int) -> bool:
    """Whether node xa of key ka comes before node xb of key kb in a stable sort by key of nodes in
    node order (NaN last, as numba's sort has it)."""
    if ka < kb:
        return True
    if kb < ka:
        return False
    a_nan, b_nan = np.isnan(ka), np.isnan(kb)
    if a_nan != b_nan:
        return b_nan
    return xa < xb


@njit(cache=True, nogil=True, inline="always")
def _same_key(ka: float, kb: float) -> bool:
    """Whether two keys sort alike (NaN with NaN)."""
    return ka == kb or (np.isnan(ka) and np.isnan(kb))


@njit(cache=True, nogil=True)
def evaluation_order(free: np.ndarray, cpu_part: np.ndarray, coef: np.ndarray, e_off: np.ndarray,
                     e_nodes: np.ndarray, e_rank: np.ndarray, m_off: np.ndarray, m_set: np.ndarray,
                     m_pos: np.ndarray, m_moved: np.ndarray) -> None:
    """Each set's nodes (`e_nodes`: node order) by key now into `e_rank`, and each node's place in
    each set (`m_pos`), none moved."""
    for e in range(len(e_off) - 1):
        lo, hi = e_off[e], e_off[e + 1]
        key = np.empty(hi - lo)
        for i in range(hi - lo):
            key[i] = _key(free, cpu_part, coef, e_nodes[lo + i])
        by_key = np.argsort(key, kind="mergesort")
        for i in range(hi - lo):
            e_rank[lo + i] = e_nodes[lo + by_key[i]]
        _placed(e_off, e_rank, m_off, m_set, m_pos, m_moved, e)


@njit(cache=True, nogil=True)
def _placed(e_off: np.ndarray, e_rank: np.ndarray, m_off: np.ndarray, m_set: np.ndarray, m_pos: np.ndarray,
            m_moved: np.ndarray, e: int) -> None:
    """Each node of set e at its place in `e_rank`, not moved."""
    lo = e_off[e]
    for p in range(e_off[e + 1] - lo):
        i = _entry(m_off, m_set, e_rank[lo + p], e)
        m_pos[i] = p
        m_moved[i] = False


@njit(cache=True, nogil=True, **kernels.NO_REFCOUNTS)
def _entry(m_off: np.ndarray, m_set: np.ndarray, x: int, e: int) -> int:
    """Where node x's membership of set e is kept (`m_set`, `m_pos`, `m_moved`)."""
    i = m_off[x]
    while m_set[i] != e:
        i += 1
    return i


@njit(cache=True, nogil=True)
def _shrunk_evaluated(free: np.ndarray, cpu_part: np.ndarray, coef: np.ndarray, sets: tuple, x: int,
                      was: float) -> int:
    """`_shrunk` for the evaluation order: node x's free fell, its key was `was`. In each set it
    stays at its place if its key did not change and it has not moved; else it leaves its place
    (leaf NEG) and takes its place by key now in the set's moved list; a set whose list is full is
    ordered afresh. (Node rows a fresh order touched.)"""
    e_off, t_off, t_size, tree = sets[0], sets[3], sets[4], sets[5]
    m_off, m_set, m_pos = sets[6], sets[7], sets[8]
    mv, mv_n, m_moved = sets[13], sets[14], sets[15]
    now = _key(free, cpu_part, coef, x)
    changed = not _same_key(was, now)
    rows = 0
    for i in range(m_off[x], m_off[x + 1]):
        e = m_set[i]
        leaf = t_size[e] + m_pos[i]
        if not m_moved[i] and not changed:
            _leaf(tree, t_off[e], leaf, free[0, x], free[1, x], free[2, x])
            continue
        if not changed:
            continue  # (a moved node of the same key keeps its place in the list)
        if not m_moved[i]:
            m_moved[i] = True
            _leaf(tree, t_off[e], leaf, NEG, NEG, NEG)
        _relisted(free, cpu_part, coef, mv, mv_n, e, x, now)
        if mv_n[e] >= _moved_most(e_off[e + 1] - e_off[e]):
            rows += _reordered(free, cpu_part, coef, sets, e)
    return rows


@njit(cache=True, nogil=True, inline="always")
def _moved_most(size: int) -> int:
    """How many moved nodes a set of `size` nodes lists before it is ordered afresh: about twice the
    root of its size (a walk may read the list, a fresh order reads the set; on the benchmark's
    10,000 nodes, once the root: 385 k rows, twice: 311 k, half: 571 k)."""
    return min(MOVED, max(2, int(2 * np.sqrt(size))))


@njit(cache=True, nogil=True)
def _relisted(free: np.ndarray, cpu_part: np.ndarray, coef: np.ndarray, mv: np.ndarray, mv_n: np.ndarray,
              e: int, x: int, now: float) -> None:
    """Node x (key `now`) at its place in set e's moved list, by key now then node (out of the place
    it held there, if any: the others' keys are as they were)."""
    count = mv_n[e]
    for i in range(count):
        if mv[e, i] == x:
            for j in range(i, count - 1):
                mv[e, j] = mv[e, j + 1]
            count -= 1
            break
    at = count
    while at > 0 and _before(now, x, _key(free, cpu_part, coef, mv[e, at - 1]), mv[e, at - 1]):
        mv[e, at] = mv[e, at - 1]
        at -= 1
    mv[e, at] = x
    mv_n[e] = count + 1


@njit(cache=True, nogil=True)
def _reordered(free: np.ndarray, cpu_part: np.ndarray, coef: np.ndarray, sets: tuple, e: int) -> int:
    """Set e ordered afresh: the nodes that kept their places merged with its moved list (both by key
    now, ties in node order), its tree made anew and its list emptied. (Node rows touched.)"""
    e_off, e_rank, t_off, t_size, tree, m_off, m_set, m_pos = (sets[0], sets[2], sets[3], sets[4], sets[5],
                                                               sets[6], sets[7], sets[8])
    mv, mv_n, m_moved = sets[13], sets[14], sets[15]
    lo, hi = e_off[e], e_off[e + 1]
    merged = np.empty(hi - lo, dtype=np.int64)
    q, count, out = 0, mv_n[e], 0
    for p in range(hi - lo):
        x = e_rank[lo + p]
        if m_moved[_entry(m_off, m_set, x, e)]:
            continue
        kx = _key(free, cpu_part, coef, x)
        while q < count and _before(_key(free, cpu_part, coef, mv[e, q]), mv[e, q], kx, x):
            merged[out] = mv[e, q]
            out += 1
            q += 1
        merged[out] = x
        out += 1
    while q < count:
        merged[out] = mv[e, q]
        out += 1
        q += 1
    e_rank[lo:hi] = merged
    mv_n[e] = 0
    _placed(e_off, e_rank, m_off, m_set, m_pos, m_moved, e)
    _build_tree(free, e_off, e_rank, t_off, t_size, tree, e)
    return hi - lo


@njit(cache=True, nogil=True, **kernels.NO_REFCOUNTS)
def _short_known(fr: np.ndarray, fr_n: np.ndarray, e: int, c: int, m: int, g: int, n: int) -> bool:
    """Whether a demand at most (c, m, g) found fewer than n nodes of set e free now earlier in the
    pass: free only shrinks, so this one finds no more."""
    for i in range(fr_n[e]):
        if c >= fr[e, i, 0] and m >= fr[e, i, 1] and g >= fr[e, i, 2] and n > fr[e, i, 3]:
            return True
    return False


@njit(cache=True, nogil=True)
def _note_short(fr: np.ndarray, fr_n: np.ndarray, e: int, c: int, m: int, g: int, count: int) -> None:
    """Remember that (c, m, g) found `count` nodes of set e free now, unless an entry tells as much
    (it asks no more of any resource and found no more nodes); the entries this one tells more than
    go, so the memory holds none that another covers (on a queue of one shape, one entry); when it
    is full the oldest goes."""
    for i in range(fr_n[e]):
        if fr[e, i, 0] <= c and fr[e, i, 1] <= m and fr[e, i, 2] <= g and fr[e, i, 3] <= count:
            return
    covered = np.empty(fr_n[e], dtype=np.bool_)
    for i in range(fr_n[e]):
        covered[i] = c <= fr[e, i, 0] and m <= fr[e, i, 1] and g <= fr[e, i, 2] and count <= fr[e, i, 3]
    _remember(fr, fr_n, e, covered, np.array([c, m, g, count], dtype=np.int64))


@njit(cache=True, nogil=True, **kernels.NO_REFCOUNTS)
def _blocked_known(bl: np.ndarray, bl_n: np.ndarray, e: int, c: int, m: int, g: int, n: int, until: float,
                   starts: int) -> bool:
    """Whether a job of the same demand, whose release came no later, found fewer than n nodes of set
    e clear of bookings until it, with no start since (so as many nodes have the demand free now as
    it found, at least n): bookings only grow and free room only shrinks, so this one finds no more
    clear, and it is blocked by a booking. (A promise given back empties the memory: `run`.) The
    entries are read newest first, up to the first made before the last start."""
    for i in range(bl_n[e] - 1, -1, -1):
        if bl[e, i, 6] != starts:
            return False
        if (bl[e, i, 0] == c and bl[e, i, 1] == m and bl[e, i, 2] == g and until >= bl[e, i, 3]
                and n > bl[e, i, 4] and n <= bl[e, i, 5]):
            return True
    return False


@njit(cache=True, nogil=True)
def _note_blocked(bl: np.ndarray, bl_n: np.ndarray, e: int, c: int, m: int, g: int, until: float, clear: int,
                  fit: int, starts: int) -> None:
    """Remember that (c, m, g) found `clear` nodes of set e clear until `until`, `fit` free now, as
    of the `starts`-th start: the memory is emptied once a start makes it stale, and holds no entry
    another of its demand covers (released no later, found no more clear); when full the oldest goes."""
    if bl_n[e] and bl[e, bl_n[e] - 1, 6] != starts:
        bl_n[e] = 0
    for i in range(bl_n[e]):
        if (bl[e, i, 0] == c and bl[e, i, 1] == m and bl[e, i, 2] == g and bl[e, i, 3] <= until
                and bl[e, i, 4] <= clear):
            return
    covered = np.empty(bl_n[e], dtype=np.bool_)
    for i in range(bl_n[e]):
        covered[i] = (bl[e, i, 0] == c and bl[e, i, 1] == m and bl[e, i, 2] == g and until <= bl[e, i, 3]
                      and clear <= bl[e, i, 4])
    _remember(bl, bl_n, e, covered, np.array([c, m, g, until, clear, fit, starts], dtype=np.float64))


@njit(cache=True, nogil=True)
def _remember(memory: np.ndarray, count: np.ndarray, e: int, covered: np.ndarray, entry: np.ndarray) -> None:
    """Set e's memory (its first `count[e]` entries) without those `covered` marks, and without its
    oldest when it is full, then `entry` last."""
    kept = 0
    for i in range(count[e]):
        if not covered[i]:
            memory[e, kept, :] = memory[e, i, :]
            kept += 1
    if kept == FRONTIER:
        memory[e, : kept - 1, :] = memory[e, 1:kept, :]
        kept -= 1
    memory[e, kept, :] = entry
    count[e] = kept + 1


@njit(cache=True, nogil=True, **kernels.NO_REFCOUNTS)
def _known(j: int, cols: np.ndarray, walltime: np.ndarray, fr: np.ndarray, fr_n: np.ndarray, bl: np.ndarray,
           bl_n: np.ndarray, starts: int, now: float, grain: int) -> int:
    """SHORT or BLOCKED where the memories tell job j (not whole-node) cannot start, as `_start`
    asks them; else LOOKING."""
    e, c, m, g, n = cols[ELIG, j], cols[CPU, j], cols[MEM, j], cols[GPU, j], cols[NODES, j]
    if _short_known(fr, fr_n, e, c, m, g, n):
        return SHORT
    if _blocked_known(bl, bl_n, e, c, m, g, n, release(now + walltime[j], now, grain), starts):
        return BLOCKED
    return LOOKING


# --- §1.1: a start -------------------------------------------------------------------------------

@njit(cache=True, nogil=True)
def _by_fragment(cand: np.ndarray, free: np.ndarray, cap: np.ndarray, c: int, m: int, g: int) -> np.ndarray:
    """`cand` (node order) in the fragment selector's order, which moves with free and with the
    demand: the lowest score after placement, then the least leftover, ties in node order:
    `Selector.order` over every candidate, computed operation for operation."""
    k = len(cand)
    key = np.empty(k)
    left = np.empty(k)
    for i in range(k):
        x = cand[i]
        s0, r0, n0 = _share(cap[0, x], free[0, x] - c)
        s1, r1, n1 = _share(cap[1, x], free[1, x] - m)
        s2, r2, n2 = _share(cap[2, x], free[2, x] - g)
        count = n0 + n1 + n2
        mean = (s0 + s1 + s2) / count
        dev = n0 * (s0 - mean) ** 2 + n1 * (s1 - mean) ** 2 + n2 * (s2 - mean) ** 2
        key[i] = np.rint(np.sqrt(dev / count) * 1e9) / 1e9
        left[i] = (r0 + r1) + r2
    by_left = np.argsort(left, kind="mergesort")
    return cand[by_left[np.argsort(key[by_left], kind="mergesort")]]


@njit(cache=True, nogil=True)
def _share(cap: int, after: int) -> tuple[float, float, int]:
    """A resource's used share and leftover share of a node after placement, and 1; (0, 0, 0) for a
    resource the node has none of (`fragment_scores`)."""
    if cap <= 0:
        return 0.0, 0.0, 0
    return (cap - after) / cap, after / cap, 1


@njit(cache=True, nogil=True, **kernels.NO_REFCOUNTS)
def _clear_by_bookings(first_booking: np.ndarray, cap: np.ndarray, room: np.ndarray, x: int, c: int, m: int,
                       g: int, whole: bool, release: float) -> int:
    """Whether node x keeps the job's demand (whole: its capacity) free until `release` without
    delaying a booking, as far as its bookings tell: 1 surely (its first booking starts at or after
    then), -1 surely not (that booking leaves it too little room: `room`), 0 its instants must say
    (`_holds`). Like the other helpers called per node, compiled without reference counting
    (`profile_kernels.NO_REFCOUNTS`): a call counts none of the arrays it is handed."""
    if first_booking[x] >= release:
        return 1
    if whole:
        if room[0, x] < cap[0, x] or room[1, x] < cap[1, x] or room[2, x] < cap[2, x]:
            return -1
    elif room[0, x] < c or room[1, x] < m or room[2, x] < g:
        return -1
    return 0


@njit(cache=True, nogil=True, **kernels.NO_REFCOUNTS)
def _holds(times: np.ndarray, cum: np.ndarray, width: int, cap: np.ndarray, x: int, c: int, m: int, g: int,
           whole: bool, now: float, release: float) -> bool:
    """Whether node x's instants keep the demand (whole: its capacity) free from now to `release`."""
    if whole:
        need = (cap[0, x], cap[1, x], cap[2, x])
        return kernels.holds(times, cum, x, need, True, True, now, release, width)
    return kernels.holds(times, cum, x, (c, m, g), m > 0, g > 0, now, release, width)


@njit(cache=True, nogil=True, **kernels.NO_REFCOUNTS)
def _able(free: np.ndarray, cap: np.ndarray, x: int, c: int, m: int, g: int, whole: bool) -> bool:
    """Whether node x has the demand free now (whole: could hold it, and is idle now)."""
    if whole:
        return (cap[0, x] >= c and cap[1, x] >= m and cap[2, x] >= g and free[0, x] >= cap[0, x]
                and free[1, x] >= cap[1, x] and free[2, x] >= cap[2, x])
    return free[0, x] >= c and (m == 0 or free[1, x] >= m) and (g == 0 or free[2, x] >= g)


@njit(cache=True, nogil=True)
def _start(j: int, times: np.ndarray, cum: np.ndarray, nodes: tuple, sets: tuple, jobs: tuple, out: tuple,
           how: tuple) -> tuple[np.ndarray, np.ndarray, bool, bool]:
    """§1.1: start job j on the selector's best n nodes that have its demand free now (whole: are
    idle now) and keep it until its release clear of every booking; (times, cum, started, whether n
    nodes have it free now, bookings aside)."""
    free, cap, first_booking, _, cpu_part, room, bounds = nodes
    e_off, e_rank, t_off, t_size, tree, fr, fr_n, bl, bl_n = (sets[0], sets[2], sets[3], sets[4], sets[5],
                                                               sets[9], sets[10], sets[11], sets[12])
    cols, walltime = jobs[0], jobs[1]
    _, _, o_off, o_nodes, _, _, _, counters = out
    _, coef, selector, now, grain = how
    c, m, g, n, e = cols[CPU, j], cols[MEM, j], cols[GPU, j], cols[NODES, j], cols[ELIG, j]
    whole = cols[WHOLE, j] == 1
    if not whole:
        known = _known(j, cols, walltime, fr, fr_n, bl, bl_n, counters[STARTS], now, grain)
        if known != LOOKING:
            return times, cum, False, known == BLOCKED
    until = release(now + walltime[j], now, grain)
    lo, base, size = e_off[e], t_off[e], t_size[e]
    chosen = o_nodes[o_off[j] : o_off[j] + n]
    width = counters[WIDTH]
    fit, k = 0, 0
    p = _next_fit(tree, base, size, 0, c, m, g)
    if selector == FIRST_FIT or selector == LEAST_LOAD:  # the order is fixed: walk it, stop at n clear
        while p >= 0:
            x = e_rank[lo + p]
            counters[WORK] += 1
            if _able(free, cap, x, c, m, g, whole):
                fit += 1
                sure = _clear_by_bookings(first_booking, cap, room, x, c, m, g, whole, until)
                if sure > 0 or (sure == 0 and _holds(times, cum, width, cap, x, c, m, g, whole, now, until)):
                    chosen[k] = x
                    k += 1
                    if k == n:
                        break
            p = _next_fit(tree, base, size, p + 1, c, m, g)
    elif selector == EVALUATION:  # the places by key merged with the moved nodes: stop at n clear
        fit, k = _walk_evaluation(j, p, times, cum, nodes, sets, jobs, chosen, counters, how, until)
    else:  # every node with it free, ranked
        cand = np.empty(e_off[e + 1] - lo, dtype=np.int64)
        while p >= 0:  # (e_rank is e_nodes here: node order)
            x = e_rank[lo + p]
            counters[WORK] += 1
            if _able(free, cap, x, c, m, g, whole):
                cand[fit] = x
                fit += 1
            p = _next_fit(tree, base, size, p + 1, c, m, g)
        if fit >= n:
            for x in _by_fragment(cand[:fit], free, cap, c, m, g):
                counters[WORK] += 1
                sure = _clear_by_bookings(first_booking, cap, room, x, c, m, g, whole, until)
                if sure > 0 or (sure == 0 and _holds(times, cum, width, cap, x, c, m, g, whole, now, until)):
                    chosen[k] = x
                    k += 1
                    if k == n:
                        break
    if k < n:
        if fit < n and not whole:
            _note_short(fr, fr_n, e, c, m, g, fit)
        elif not whole:
            _note_blocked(bl, bl_n, e, c, m, g, until, k, fit, counters[STARTS])
        return times, cum, False, fit >= n
    counters[STARTS] += 1
    d = _need(cols, j, chosen, cap, 1)
    m_off, m_set, m_pos = sets[6], sets[7], sets[8]
    for i in range(n):
        x = chosen[i]
        was = _key(free, cpu_part, coef, x) if selector == EVALUATION else 0.0
        for r in range(3):
            free[r, x] -= d[r, i if whole else 0]
        if selector == EVALUATION:
            counters[WORK] += _shrunk_evaluated(free, cpu_part, coef, sets, x, was)
        else:
            _shrunk(free, t_off, t_size, tree, m_off, m_set, m_pos, x)
    times, cum = _fold(times, cum, counters, chosen, now, until, d, whole, now, bounds)
    return times, cum, True, True


@njit(cache=True, nogil=True)
def _walk_evaluation(j: int, p: int, times: np.ndarray, cum: np.ndarray, nodes: tuple, sets: tuple,
                     jobs: tuple, chosen: np.ndarray, counters: np.ndarray, how: tuple,
                     until: float) -> tuple[int, int]:
    """`_start`'s walk under the evaluation selector, from place p (the first with the demand free
    now): set e's places (by key, tree-found) merged with its moved nodes (by key now), each with
    the demand free now taken in that order while it is clear of bookings, until n are. (fit: nodes
    with it free now, all of them when fewer than n were clear; k: clear nodes, in `chosen`.)"""
    free, cap, first_booking, _, cpu_part, room, _ = nodes
    e_off, e_rank, t_off, t_size, tree, mv, mv_n = (sets[0], sets[2], sets[3], sets[4], sets[5], sets[13],
                                                    sets[14])
    cols = jobs[0]
    coef, now = how[1], how[3]
    c, m, g, n, e = cols[CPU, j], cols[MEM, j], cols[GPU, j], cols[NODES, j], cols[ELIG, j]
    whole = cols[WHOLE, j] == 1
    lo, base, size, count = e_off[e], t_off[e], t_size[e], mv_n[e]
    width = counters[WIDTH]
    fit, k, q = 0, 0, 0
    while True:
        while q < count and not _able(free, cap, mv[e, q], c, m, g, whole):
            counters[WORK] += 1
            q += 1
        if q < count and (p < 0 or _before(_key(free, cpu_part, coef, mv[e, q]), mv[e, q],
                                           _key(free, cpu_part, coef, e_rank[lo + p]), e_rank[lo + p])):
            x = mv[e, q]
            q += 1
        elif p >= 0:
            x = e_rank[lo + p]
            p = _next_fit(tree, base, size, p + 1, c, m, g)
            if not _able(free, cap, x, c, m, g, whole):
                counters[WORK] += 1
                continue
        else:
            break
        counters[WORK] += 1
        fit += 1
        sure = _clear_by_bookings(first_booking, cap, room, x, c, m, g, whole, until)
        if sure > 0 or (sure == 0 and _holds(times, cum, width, cap, x, c, m, g, whole, now, until)):
            chosen[k] = x
            k += 1
            if k == n:
                break
    return fit, k


# --- §1.3: a reservation -----------------------------------------------------------------------------

@njit(cache=True, nogil=True)
def _when_quiet(times: np.ndarray, nodes: np.ndarray, node_times: np.ndarray, n: int,
                grain: int) -> tuple[float, np.ndarray]:
    """No candidate common start held: the instant by which n nodes that can hold the job have no
    change left ahead (past its last instant a node's free stays put), those quiet first (node order
    on ties), sorted; (NaN, none) for one node or fewer than n ever free."""
    none = nodes[:0]
    finite = 0
    for v in node_times:
        finite += v < INF
    if n == 1 or finite < n:
        return np.nan, none
    quiet = np.full(len(nodes), INF)
    for i in range(len(nodes)):
        if node_times[i] < INF:
            x, last = nodes[i], 0
            while last + 1 < times.shape[0] and times[last + 1, x] < INF:
                last += 1
            quiet[i] = max(times[last, x], node_times[i])
    best = _least(quiet, n)
    start = np.ceil(quiet[best].max() / grain) * grain
    return start, np.sort(nodes[best])


@njit(cache=True, nogil=True)
def _least(values: np.ndarray, n: int) -> np.ndarray:
    """The places of the n least of `values` (no NaN), ties at the cut in place order: the first n of
    a stable argsort, as a set, found by selection (`kernels._select`) and one pass, without the sort
    (which was 6 % of a conservative 50,000-node decision)."""
    cut = kernels._select(values.copy(), len(values), n - 1)
    at_cut = n
    for v in values:
        at_cut -= v < cut
    out = np.empty(n, dtype=np.int64)
    k = 0
    for i in range(len(values)):
        if values[i] < cut or (values[i] == cut and at_cut > 0):
            at_cut -= values[i] == cut
            out[k] = i
            k += 1
    return out


@njit(cache=True, nogil=True)
def _common(times: np.ndarray, cum: np.ndarray, elig: np.ndarray, node_times: np.ndarray, d: np.ndarray,
            per_node: bool, check: np.ndarray, n: int, wall: float, grain: int, width: int,
            first_booking: np.ndarray, any_booking: bool, tries: int) -> tuple[float, np.ndarray]:
    """`Profile.slot` on each node's earliest start, then the sure start once n nodes are quiet."""
    if n > 1:
        t, chosen = kernels.common_start(times, cum, elig, node_times, d, per_node, check, n, wall, grain,
                                         width, first_booking, any_booking, tries, NO)
    elif len(node_times) and node_times.min() < INF:
        p = np.argmin(node_times)
        t, chosen = node_times[p], elig[p : p + 1].copy()
    else:
        t, chosen = np.nan, elig[:0]
    if np.isnan(t):
        return _when_quiet(times, elig, node_times, n, grain)
    return t, chosen


@njit(cache=True, nogil=True)
def _whole_able(cols: np.ndarray, j: int, elig: np.ndarray, cap: np.ndarray, booked: np.ndarray,
                one_per_node: bool) -> np.ndarray:
    """The nodes of `elig` that can ever hold whole-node job j (its demand within their capacity,
    and not booked under one reservation per node), in their order: a search over them answers as
    one over all of `elig` with the others never free."""
    keep = np.empty(len(elig), dtype=np.bool_)
    for i in range(len(elig)):
        x = elig[i]
        keep[i] = not (cap[0, x] < cols[CPU, j] or cap[1, x] < cols[MEM, j] or cap[2, x] < cols[GPU, j]
                       or (one_per_node and booked[x]))
    return elig[keep]


@njit(cache=True, nogil=True)
def _earliest(j: int, times: np.ndarray, cum: np.ndarray, nodes: tuple, sets: tuple, jobs: tuple,
              counters: np.ndarray, how: tuple) -> tuple[float, np.ndarray]:
    """The earliest instant n eligible nodes all hold job j, and those nodes; (NaN, none) if never."""
    _, cap, first_booking, booked, _, _, bounds = nodes
    e_off, e_nodes = sets[0], sets[1]
    cols, walltime = jobs[0], jobs[1]
    rules, grain = how[0], how[4]
    e, n, wall = cols[ELIG, j], cols[NODES, j], walltime[j]
    elig = e_nodes[e_off[e] : e_off[e + 1]]
    width, tries, any_booking = counters[WIDTH], rules[TRIES], counters[ANY_BOOKING] == 1
    one_per_node = rules[ONE_PER_NODE] == 1
    if cols[WHOLE, j] == 1:  # when each node able to hold the demand is idle for the whole run
        able = _whole_able(cols, j, elig, cap, booked, one_per_node)  # (the others never start it)
        d = _need(cols, j, able, cap, 1)
        t, chosen, searched, node_times = kernels.bound_slot(times, cum, bounds, able, d, True, _EVERY, n,
                                                             wall, grain, width, first_booking, any_booking,
                                                             tries)
        if searched >= 0:
            counters[SEARCHED] += searched
            return _when_quiet(times, able, node_times, n, grain) if np.isnan(t) else (t, chosen)
        counters[SEARCHED] += len(able)
        node_times = kernels.earliest(times, cum, able, d, True, _EVERY, wall, grain, width)
        return _common(times, cum, able, node_times, d, True, _EVERY, n, wall, grain, width, first_booking,
                       any_booking, tries)
    d = _need(cols, j, elig[:0], cap, 1)
    check = np.array([True, cols[MEM, j] > 0, cols[GPU, j] > 0])
    if one_per_node:  # booked nodes are out; the others' free only grows, windows aside
        counters[SEARCHED] += len(elig)
        node_times = kernels.first_cover(times, cum, elig, d, NO, check, width, width)
        for i in range(len(elig)):
            x = elig[i]
            if booked[x]:
                node_times[i] = INF
            elif counters[ANY_WINDOW] and node_times[i] < INF and first_booking[x] < INF:
                node_times[i] = kernels.earliest(times, cum, elig[i : i + 1], d, NO, check, wall, grain,
                                                 width)[0]
        return _common(times, cum, elig, node_times, d, NO, check, n, wall, grain, width, first_booking,
                       any_booking, tries)
    # The nodes the level bounds rule out are not searched (`kernels.bound_slot`), where the bounds can say.
    t, chosen, searched, node_times = kernels.bound_slot(times, cum, bounds, elig, d, NO, check, n, wall,
                                                         grain, width, first_booking, any_booking, tries)
    if searched >= 0:
        counters[SEARCHED] += searched
        return _when_quiet(times, elig, node_times, n, grain) if np.isnan(t) else (t, chosen)
    # the first candidate only: `earliest_starts` leaves INF the nodes whose start is past the n-th
    # best, so a later candidate would miss those that are free by then
    counters[SEARCHED] += len(elig)
    _, t, chosen = kernels.earliest_slot(times, cum, elig, d, NO, check, n, wall, grain, width,
                                         rules[HEAD], first_booking, any_booking, min(1, tries))
    if np.isnan(t) and n > 1:  # the later candidates, and the sure start, on every node's earliest start
        counters[SEARCHED] += len(elig)
        node_times = kernels.earliest(times, cum, elig, d, NO, check, wall, grain, width)
        return _common(times, cum, elig, node_times, d, NO, check, n, wall, grain, width, first_booking,
                       any_booking, tries)
    return t, chosen


@njit(cache=True, nogil=True)
def _reserve(j: int, promised: float, times: np.ndarray, cum: np.ndarray, nodes: tuple, sets: tuple,
             jobs: tuple, out: tuple, how: tuple) -> tuple[np.ndarray, np.ndarray, float]:
    """§1.3: book the nodes that hold job j earliest, from then (from now under firstfit) to its
    grain-aligned end; a promised job keeps its promised slot if the search finds none sooner.
    (times, cum, the reservation's start; NaN: none)."""
    cap = nodes[1]
    cols, walltime, p_off, p_nodes = jobs[0], jobs[1], jobs[5], jobs[6]
    o_off, o_nodes, counters = out[2], out[3], out[7]
    rules, now, grain = how[0], how[3], how[4]
    t, chosen = _earliest(j, times, cum, nodes, sets, jobs, counters, how)
    if not np.isnan(promised) and (np.isnan(t) or t > promised):  # the search's bounds missed it
        t, chosen = promised, np.sort(p_nodes[p_off[j] : p_off[j + 1]])
    if np.isnan(t):
        return times, cum, t
    end = np.ceil((t + walltime[j]) / grain) * grain
    hold_from = now if rules[FROM_NOW] else t
    times, cum = _book(times, cum, nodes, chosen, hold_from, end, _need(cols, j, chosen, cap, 1),
                       cols[WHOLE, j] == 1, counters, now)
    o_nodes[o_off[j] : o_off[j] + len(chosen)] = chosen
    return times, cum, t


# --- the pass ------------------------------------------------------------------------------------

@njit(cache=True, nogil=True)
def hold_promises(order: np.ndarray, times: np.ndarray, cum: np.ndarray, nodes: tuple, jobs: tuple,
                  counters: np.ndarray, now: float, grain: int) -> tuple[np.ndarray, np.ndarray]:
    """Conservative's promises: in the pass's order, each job's promised slot (from max(promise,
    now) to its grain-aligned end, on its promised nodes) booked for it if it still holds with those
    before it booked; `promise[j]` becomes that start. (NaN promise: none, or not usable.)"""
    cap = nodes[1]
    cols, walltime, _, _, promise, p_off, p_nodes, held = jobs
    for j in order:
        if np.isnan(promise[j]):
            continue
        start = max(promise[j], now)
        end = np.ceil((start + walltime[j]) / grain) * grain
        chosen = p_nodes[p_off[j] : p_off[j + 1]]
        whole = cols[WHOLE, j] == 1
        ok = True
        for x in chosen:
            counters[WORK] += 1
            need = (cap[0, x], cap[1, x], cap[2, x]) if whole else (cols[CPU, j], cols[MEM, j], cols[GPU, j])
            ok = kernels.holds(times, cum, x, need, whole or need[1] > 0, whole or need[2] > 0, start, end,
                               counters[WIDTH])
            if not ok:
                break
        if not ok:
            continue  # the slot is gone (a node down, a job overran): planned afresh
        times, cum = _book(times, cum, nodes, chosen, start, end, _need(cols, j, chosen, cap, 1), whole,
                           counters, now)
        promise[j] = start
        held[j] = True
    return times, cum


@njit(cache=True, nogil=True)
def run(order: np.ndarray, pos: int, looks: int, defer: bool, evaluate: bool, times: np.ndarray,
        cum: np.ndarray, nodes: tuple, sets: tuple, jobs: tuple, queues: tuple, out: tuple,
        how: tuple) -> tuple[np.ndarray, np.ndarray, int, int]:
    """The jobs of `order` from `pos` on, until `looks` jobs were looked at (`evaluate` False: every
    job left is not evaluated, past the decision's budget). `defer` (a backfill order): a job of a
    queue that made its reservations, or had a job deferred, goes to `left` instead (looked at
    after, in that order). Each job's outcome, nodes (`o_nodes[o_off[j]:]`) and reservation start
    are written, and the jobs in the order they were answered (`seq`). (times, cum, position, jobs
    looked at).

    §1 for each job: its promised slot given back; never fits, node down, behind a blocked job
    (fcfs); else start, reserve or wait. The bundles are unpacked here once, not in a helper per
    job: a compiled call counts every array it is handed (each tuple's members) up and down, and
    that counting was most of a job's cost where the job starts at once."""
    cap, room, bounds = nodes[1], nodes[5], nodes[6]
    cols, walltime, may, never, promise, p_off, p_nodes, held = jobs
    fr, fr_n, bl, bl_n = sets[9], sets[10], sets[11], sets[12]
    reserved_in, stopped_by, deferred = queues
    outcome, aux, start_at, seq, left, counters = out[0], out[1], out[4], out[5], out[6], out[7]
    rules, now, grain = how[0], how[3], how[4]
    depth, stop_at_block = rules[DEPTH], rules[STOP_AT_BLOCK]
    done = 0
    while pos < len(order) and (done < looks or not evaluate):
        j = order[pos]
        q = cols[QUEUE, j]
        pos += 1
        if defer and (deferred[q] or reserved_in[q] >= depth):
            deferred[q] = True
            outcome[j] = DEFERRED
            left[counters[N_LEFT]] = j
            counters[N_LEFT] += 1
            continue
        seq[counters[N_SEQ]] = j
        counters[N_SEQ] += 1
        if not evaluate:
            outcome[j] = NOT_EVALUATED
            continue
        done += 1
        if (cols[WHOLE, j] == 0 and never[j] == 0 and not held[j] and stopped_by[q] < 0
                and (reserved_in[q] >= depth or not may[j])):
            # a job that cannot reserve, known short or blocked: its answer told without a search
            known = _known(j, cols, walltime, fr, fr_n, bl, bl_n, counters[STARTS], now, grain)
            if known != LOOKING:
                outcome[j] = known
                if stop_at_block:
                    stopped_by[q] = j
                continue
        promised = np.nan
        if held[j]:  # its promised slot is its own again: it finds that slot free (or better)
            held[j] = False
            promised = promise[j]
            chosen = p_nodes[p_off[j] : p_off[j + 1]]
            end = np.ceil((promised + walltime[j]) / grain) * grain
            times, cum = _fold(times, cum, counters, chosen, promised, end, _need(cols, j, chosen, cap, -1),
                               cols[WHOLE, j] == 1, now, bounds)
            for x in chosen:  # (the room its slot left is no longer sure)
                for r in range(3):
                    room[r, x] = cap[r, x]
            bl_n[:] = 0  # (nor what found too few nodes clear)
        if never[j] != 0:
            outcome[j] = NEVER_FITS if never[j] == 1 else NODE_DOWN
            continue
        if stopped_by[q] >= 0:
            outcome[j], aux[j] = BEHIND, stopped_by[q]
            continue
        times, cum, started, fits = _start(j, times, cum, nodes, sets, jobs, out, how)
        if started:
            outcome[j] = BACKFILL if reserved_in[q] > 0 else START
            continue
        outcome[j] = BLOCKED if fits else SHORT
        if reserved_in[q] < depth and may[j]:
            times, cum, t = _reserve(j, promised, times, cum, nodes, sets, jobs, out, how)
            if not np.isnan(t):
                outcome[j], start_at[j] = RESERVED, t
                reserved_in[q] += 1
        if stop_at_block:
            stopped_by[q] = j
    return times, cum, pos, done


def warm() -> None:
    """Compile (or load from numba's cache) the pass's loops: a small pass through each entry, made
    by the pass's driver (`core.warm`, which builds the arrays they take)."""
    from app.sched import core  # (core imports this module: imported at the call)

    core.warm()

"""HEFT's placement as one compiled loop: the list planners (HEFT, PEFT, `best`'s other priorities)
without a Python call per task and lane.

The loop is `heft.list_schedule` step for step: the ready task of highest priority (ties: topological
position) goes to the lane (a slot of a group) where it finishes first — or, for PEFT, where its
finish plus a per-group `bias` is least — in an idle gap when one is long enough; lanes run group by
group, slot by slot, and ties go to the lower. Each lane is kept as `state.Lane` keeps it (its idle
gaps, sorted, the last open-ended, and the longest task a closed gap may hold), and a lane's gaps
are searched only where `heft.Lanes.earliest_finish` searches them, in the same order, so the plans
are the same to the last bit. Compiled too, as the same sums in the same order: PEFT's optimistic
cost table (`optimistic_costs`), the upward rank with any task cost (`upward`), and the lower bound's
path bound (`path_bound`), each a Python loop over tasks or edges before. `COMPILED` switches between
these and the Python references (tests/dag/test_list_kernel.py holds one to the other).

The graph comes as CSR arrays: task v's inputs are `pred_idx[pred_ptr[v]:pred_ptr[v + 1]]` (bytes in
`pred_data`), its outputs `succ_idx[succ_ptr[v]:succ_ptr[v + 1]]`, each in the order of
`Compiled.preds` and `Compiled.succs`.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from app.sched import profile_kernels  # noqa: F401  (where numba caches the compiled loops)
from app.sched.dag.graph import Compiled, compile_problem
from app.sched.dag.model import Placement, TaskStatus
from app.sched.dag.state import PlanState

INF = np.inf
COMPILED = True  # False: the Python references (`explain` always takes HEFT's and PEFT's)


@njit(cache=True, inline="always")
def _reach(a: float, b: float) -> float:
    """`state.reach`: b − a plus two units in the last place of b (`math.ulp(b)`, negated below 0)."""
    ulp = np.spacing(abs(b))
    return b - a + 2.0 * (ulp if b >= 0 else -ulp)


@njit(cache=True, inline="always")
def _bisect_right(xs: np.ndarray, n: int, x: float) -> int:
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi) // 2
        if x < xs[mid]:
            hi = mid
        else:
            lo = mid + 1
    return lo


@njit(cache=True)
def _earliest(starts: np.ndarray, ends: np.ndarray, n: int, max_gap: float, ready: float,
              duration: float) -> float:
    """`state.Lane.earliest`: the earliest start >= ready of an idle stretch of `duration`."""
    tail = starts[n - 1]
    if duration > max_gap or ready >= tail:
        return tail if tail > ready else ready
    i = _bisect_right(ends, n, ready)
    t = starts[i] if starts[i] > ready else ready
    if t + duration <= ends[i]:
        return t
    for j in range(i + 1, n):
        if starts[j] + duration <= ends[j]:
            return starts[j]
    return tail  # (not reached: the open-ended gap always fits)


@njit(cache=True)
def _book(starts: np.ndarray, ends: np.ndarray, n: int, max_gap: float, start: float,
          finish: float) -> tuple[np.ndarray, np.ndarray, int, float]:
    """`state.Lane.book`: the lane's gaps (grown when full), their count and its new `max_gap`."""
    if finish <= start:
        return starts, ends, n, max_gap
    i = _bisect_right(starts, n, start) - 1
    g0, g1 = starts[i], ends[i]
    keep_before, keep_after = start > g0, g1 > finish or g1 == INF
    pieces = int(keep_before) + int(keep_after)
    if n + 1 > starts.size:
        starts, ends = _grown(starts, n), _grown(ends, n)
    shift = pieces - 1
    if shift == 1:
        for j in range(n - 1, i, -1):
            starts[j + 1], ends[j + 1] = starts[j], ends[j]
    elif shift == -1:
        for j in range(i + 1, n):
            starts[j - 1], ends[j - 1] = starts[j], ends[j]
    k = i
    if keep_before:
        starts[k], ends[k] = g0, start
        k += 1
    if keep_after:
        starts[k], ends[k] = finish, g1
    n += shift
    if g1 != INF and _reach(g0, g1) >= max_gap:
        max_gap = 0.0
        for j in range(n - 1):
            max_gap = max(max_gap, _reach(starts[j], ends[j]))
    elif g1 == INF and start > g0:
        max_gap = max(max_gap, _reach(g0, start))
    return starts, ends, n, max_gap


@njit(cache=True)
def _grown(xs: np.ndarray, n: int) -> np.ndarray:
    out = np.empty(2 * xs.size)
    out[:n] = xs[:n]
    return out


@njit(cache=True, inline="always")
def _before(pa: float, qa: int, pb: float, qb: int) -> bool:
    """Heap order: higher priority first, then the earlier topological position."""
    return -pa < -pb or (-pa == -pb and qa < qb)


@njit(cache=True)
def _push(heap: np.ndarray, size: int, v: int, priority: np.ndarray, position: np.ndarray) -> int:
    i = size
    heap[i] = v
    while i > 0:
        parent = (i - 1) // 2
        a, b = heap[i], heap[parent]
        if not _before(priority[a], position[a], priority[b], position[b]):
            break
        heap[i], heap[parent] = b, a
        i = parent
    return size + 1


@njit(cache=True)
def _pop(heap: np.ndarray, size: int, priority: np.ndarray, position: np.ndarray) -> tuple[int, int]:
    top = heap[0]
    size -= 1
    heap[0] = heap[size]
    i = 0
    while True:
        left, best = 2 * i + 1, i
        for child in (left, left + 1):
            if child < size:
                a, b = heap[child], heap[best]
                if _before(priority[a], position[a], priority[b], position[b]):
                    best = child
        if best == i:
            return top, size
        heap[i], heap[best] = heap[best], heap[i]
        i = best


@njit(cache=True)
def _arrival(v: int, now: float, pred_ptr: np.ndarray, pred_idx: np.ndarray, pred_data: np.ndarray,
             finish: np.ndarray, group: np.ndarray, lat: np.ndarray, inv_bw: np.ndarray,
             out: np.ndarray) -> None:
    """`PlanState.arrival`: when all of v's inputs can be at each group (never before now)."""
    out[:] = now
    for e in range(pred_ptr[v], pred_ptr[v + 1]):
        u, data = pred_idx[e], pred_data[e]
        g, f = group[u], finish[u]
        for r in range(out.size):
            a = f + lat[g, r] + data * inv_bw[g, r]
            if a > out[r]:
                out[r] = a


@njit(cache=True)
def list_schedule(cost: np.ndarray, lat: np.ndarray, inv_bw: np.ndarray, pred_ptr: np.ndarray,
                  pred_idx: np.ndarray, pred_data: np.ndarray, succ_ptr: np.ndarray, succ_idx: np.ndarray,
                  lane_group: np.ndarray, lane_free: np.ndarray, finish: np.ndarray, group: np.ndarray,
                  waiting: np.ndarray, ready: np.ndarray, priority: np.ndarray, position: np.ndarray,
                  bias: np.ndarray, now: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Place every task of `ready` and those it makes ready. `finish` and `group` hold the fixed
    tasks' (NaN and -1 for the others) and are filled in; `waiting` counts each task's inputs not
    placed; `lane_free` is when each lane is free from. `bias` is (tasks, groups) for PEFT, else
    (0, 0). Returns (lane, start, finish) per task (-1 and NaN for the tasks not placed here)."""
    n_lanes, n_groups = lane_group.size, lat.shape[0]
    lanes_starts = [np.empty(8) for _ in range(n_lanes)]
    lanes_ends = [np.empty(8) for _ in range(n_lanes)]
    n_gaps = np.ones(n_lanes, dtype=np.int64)
    tail, max_gap, gap_end = lane_free.copy(), np.zeros(n_lanes), np.full(n_lanes, -INF)
    for i in range(n_lanes):
        lanes_starts[i][0], lanes_ends[i][0] = lane_free[i], INF
    lane_of, start_of = np.full(finish.size, -1, dtype=np.int64), np.full(finish.size, np.nan)
    heap, size = np.empty(finish.size, dtype=np.int64), 0
    for v in ready:
        size = _push(heap, size, v, priority, position)
    arrive = np.empty(n_groups)
    start, fin, bound = np.empty(n_lanes), np.empty(n_lanes), np.empty(n_lanes)
    use_bias = bias.shape[0] > 0
    maybe = np.empty(n_lanes, dtype=np.int64)
    while size:
        v, size = _pop(heap, size, priority, position)
        _arrival(v, now, pred_ptr, pred_idx, pred_data, finish, group, lat, inv_bw, arrive)
        best = INF
        n_maybe = 0
        for i in range(n_lanes):
            r = lane_group[i]
            rd, d = arrive[r], cost[v, r]
            e = bias[v, r] if use_bias else 0.0
            start[i] = rd if rd >= tail[i] else tail[i]
            fin[i] = start[i] + d
            best = min(best, fin[i] + e)
            if max_gap[i] >= d and rd + d <= gap_end[i]:
                maybe[n_maybe] = i
                bound[n_maybe] = rd + d + e
                n_maybe += 1
        if n_maybe:
            order = np.argsort(bound[:n_maybe], kind="mergesort")
            for k in order:
                if bound[k] > best:
                    break
                i = maybe[k]
                r = lane_group[i]
                d = cost[v, r]
                s = _earliest(lanes_starts[i], lanes_ends[i], n_gaps[i], max_gap[i], arrive[r], d)
                start[i], fin[i] = s, s + d
                best = min(best, s + d + (bias[v, r] if use_bias else 0.0))
        i = _first_least(fin, lane_group, bias, v, use_bias)
        r = lane_group[i]
        s = start[i]
        f = s + cost[v, r]
        lanes_starts[i], lanes_ends[i], n_gaps[i], max_gap[i] = _book(
            lanes_starts[i], lanes_ends[i], n_gaps[i], max_gap[i], s, f)
        tail[i] = lanes_starts[i][n_gaps[i] - 1]
        gap_end[i] = lanes_ends[i][n_gaps[i] - 2] if n_gaps[i] > 1 else -INF
        lane_of[v], start_of[v], finish[v], group[v] = i, s, f, r
        for e in range(succ_ptr[v], succ_ptr[v + 1]):
            w = succ_idx[e]
            waiting[w] -= 1
            if waiting[w] == 0 and group[w] < 0:
                size = _push(heap, size, w, priority, position)
    return lane_of, start_of, finish


@njit(cache=True)
def _first_least(fin: np.ndarray, lane_group: np.ndarray, bias: np.ndarray, v: int, use_bias: bool) -> int:
    """The lane of least finish (plus the bias of its group), the first among equals."""
    best, at = INF, 0
    for i in range(fin.size):
        score = fin[i] + bias[v, lane_group[i]] if use_bias else fin[i]
        if score < best:
            best, at = score, i
    return at


@njit(cache=True)
def optimistic_costs(cost: np.ndarray, lat: float, per_byte: float, topo: np.ndarray, succ_ptr: np.ndarray,
                     succ_idx: np.ndarray, succ_data: np.ndarray) -> np.ndarray:
    """`peft.optimistic_costs`, the same sums in the same order: OCT as a (T, G) matrix."""
    n_tasks, n_groups = cost.shape
    oct_ = np.zeros((n_tasks, n_groups))
    ahead = np.empty(n_groups)
    for k in range(topo.size - 1, -1, -1):
        v = topo[k]
        for e in range(succ_ptr[v], succ_ptr[v + 1]):
            s = succ_idx[e]
            least = INF
            for r in range(n_groups):
                ahead[r] = oct_[s, r] + cost[s, r]
                least = min(least, ahead[r])
            moved = least + lat + succ_data[e] * per_byte
            for r in range(n_groups):
                oct_[v, r] = max(oct_[v, r], min(ahead[r], moved))
    return oct_


@njit(cache=True)
def upward(work: np.ndarray, lat: float, per_byte: float, topo: np.ndarray, succ_ptr: np.ndarray,
           succ_idx: np.ndarray, succ_data: np.ndarray) -> np.ndarray:
    """`restarts.rank_with` (and `heft.upward_rank`): work[u] + the largest of (lat + bytes ×
    per_byte) + rank[v] over u's successors v."""
    rank = work.copy()
    for k in range(topo.size - 1, -1, -1):
        u = topo[k]
        if succ_ptr[u] == succ_ptr[u + 1]:
            continue
        most = -INF
        for e in range(succ_ptr[u], succ_ptr[u + 1]):
            most = max(most, lat + succ_data[e] * per_byte + rank[succ_idx[e]])
        rank[u] = work[u] + most
    return rank


@njit(cache=True)
def path_bound(topo: np.ndarray, fixed: np.ndarray, pred_ptr: np.ndarray, pred_idx: np.ndarray,
               pred_data: np.ndarray, finish: np.ndarray, group: np.ndarray, lat: np.ndarray,
               inv_bw: np.ndarray, lat_in: np.ndarray, per_byte_in: np.ndarray, free: np.ndarray,
               cost: np.ndarray, now: float, latest: float) -> float:
    """`bound._path_bound`'s loop: each pending task with inputs, in topological order, finishes at
    the least over groups of max(its inputs there, a slot free) + its cost; the latest finish
    (from `latest` on). `finish` holds the fixed tasks' and the input-less ones' and is filled in."""
    n_groups = lat.shape[0]
    arrive = np.empty(n_groups)
    for v in topo:
        if fixed[v] or pred_ptr[v] == pred_ptr[v + 1]:
            continue
        arrive[:] = now
        for e in range(pred_ptr[v], pred_ptr[v + 1]):
            u, data = pred_idx[e], pred_data[e]
            for r in range(n_groups):
                if fixed[u]:
                    a = finish[u] + lat[group[u], r] + data * inv_bw[group[u], r]
                else:
                    a = finish[u] + lat_in[r] + data * per_byte_in[r]
                if a > arrive[r]:
                    arrive[r] = a
        least = INF
        for r in range(n_groups):
            least = min(least, (arrive[r] if arrive[r] >= free[r] else free[r]) + cost[v, r])
        finish[v] = least
        latest = max(latest, least)
    return latest


def graph_arrays(c: Compiled) -> tuple[np.ndarray, ...]:
    """(pred_ptr, pred_idx, pred_data, succ_ptr, succ_idx, succ_data) of `c`, made once and kept on it."""
    if c.csr is None:
        c.csr = (*_csr(c.preds), *_csr(c.succs))
    return c.csr


def topo_succs(c: Compiled) -> tuple[np.ndarray, ...]:
    """(topological order, succ_ptr, succ_idx, succ_data) as arrays, for the compiled loops."""
    return (np.array(c.topo, dtype=np.int64), *graph_arrays(c)[3:])


def _csr(lists: list[list[tuple[int, float]]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    ptr = np.zeros(len(lists) + 1, dtype=np.int64)
    np.cumsum([len(x) for x in lists], out=ptr[1:])
    flat = [e for x in lists for e in x]
    idx = np.array([u for u, _ in flat], dtype=np.int64)
    data = np.array([d for _, d in flat], dtype=float)
    return ptr, idx, data


def place_all(c: Compiled, priority: np.ndarray, bias: np.ndarray | None = None) -> list[Placement]:
    """Every task placed by `list_schedule` in priority order (see the module): the fixed ones
    where `PlanState` puts them, the pending ones where the compiled loop does."""
    state = PlanState(c)
    lanes = [(r, k, lane.tail) for r, group in enumerate(state.lanes) for k, lane in enumerate(group)]
    lane_group = np.array([r for r, _, _ in lanes], dtype=np.int64)
    position = np.empty(c.n_tasks, dtype=np.int64)
    position[c.topo] = np.arange(c.n_tasks)
    no_bias = np.empty((0, 0))
    lane, start, finish = list_schedule(
        c.cost, c.lat, c.inv_bw, *graph_arrays(c)[:5], lane_group, np.array([t for _, _, t in lanes]),
        state.finish.copy(), state.group_of.copy(), np.array(state.waiting, dtype=np.int64),
        np.array(state.ready, dtype=np.int64), np.asarray(priority, dtype=float), position,
        no_bias if bias is None else np.ascontiguousarray(bias, dtype=float), float(state.now))
    out = list(state.placements)
    for v, i, s, f in zip(np.flatnonzero(lane >= 0).tolist(), lane[lane >= 0].tolist(),
                          start[lane >= 0].tolist(), finish[lane >= 0].tolist(), strict=True):
        r, k, _ = lanes[i]
        out[v] = Placement(v, r, k, s, f, TaskStatus.PENDING)
    return out  # type: ignore[return-value]


def warm() -> None:
    """Compile (or load from numba's cache) the loop for the argument types `place_all` passes,
    without and with a bias, so that no plan pays for it."""
    from app.sched.dag.model import DagProblem, Edge, Group, Task

    p = DagProblem((Task("a", work=1.0), Task("b", work=1.0)), (Edge("a", "b", 1.0),), (Group("g"),))
    c = compile_problem(p)
    place_all(c, np.ones(2))
    place_all(c, np.ones(2), np.zeros((2, 1)))
    pred_ptr, pred_idx, pred_data, succ_ptr, succ_idx, succ_data = graph_arrays(c)
    topo = np.array(c.topo, dtype=np.int64)
    optimistic_costs(c.cost, 0.0, 0.0, topo, succ_ptr, succ_idx, succ_data)
    upward(c.mean_cost, 0.0, 0.0, topo, succ_ptr, succ_idx, succ_data)
    path_bound(topo, np.zeros(2, dtype=np.bool_), pred_ptr, pred_idx, pred_data, np.zeros(2),
               np.full(2, -1, dtype=np.int64), c.lat, c.inv_bw, np.zeros(1), np.zeros(1), np.zeros(1),
               c.cost, 0.0, 0.0)

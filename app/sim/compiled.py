"""The replay's compiled twin, for the settings a tuning sweep replays most: every job in one partition
of alike nodes (up to `MAX_CORES` cores each), nodes taken in node order (first_fit; least_load and
evaluation where they rank every node alike: `_in_node_order`), an order in which a job's rank never
moves (`easy`, `fcfs`, `conservative`, `firstfit`, `priority` with order fcfs, sjf, f1 or fitted, or with
its weighted order, first come, first served for a trace's jobs: `_weighted_is_fcfs`), or such an
order with `priority`'s wait cap (the aging term: each pass puts the jobs that waited the cap
first, `_aged_first`), at any reservation depth.

`app.sim.replay` asks `decide` (the function behind POST /schedule) at every instant; its Python
set-up, answer and bookkeeping cost ~200 µs a decision, ten times what the pass itself needs on a
machine of a few hundred nodes. Here the whole replay is one compiled loop, and the pass in it makes
the decisions the pass in `app.sched.core` makes for these settings, step for step:

- jobs are met in the policy's order, which a job's arrival fixes (`order.rank_key` of its score:
  fcfs by submit time, sjf by the time it is told, f1 by its F1 score, fitted by its fitted score;
  then submit time and number),
  except that under a wait cap each pass first puts the jobs that have waited the cap, by submit
  time and number (`order.aged`);
  under `backfill_order=sjf` the jobs met once the reservations are made go shortest first;
- a job is told its request, or its predicted run time (`replay.Predictor`, the same arithmetic), and
  is told its request from its predicted end on if it is still running;
- a job starts on the first nodes, in node order, that have its demand free now and keep it until
  its (grain-aligned) release without running into a reservation;
- under `conservative`, each job's last reservation (its promise) is booked for it before the pass
  where it still holds, and given back at its turn;
- a job that cannot start takes a reservation while the depth allows (`fcfs` stops there; under
  `firstfit` only a job waiting past `starvation_s` does, and its nodes are withheld from now on; under
  the weighted order only a starving one, `_may_reserve`): the same
  compiled search as the pass's (`profile_kernels.earliest_slot`, then the pass's fall-backs) on
  the same availability matrices, built by the same kernel from the same releases, with every start
  and booking folded in by the same kernel;
- the replay's own rules are kept: an instant where no pending job finds enough free nodes is not
  asked, nor one `app.sim.settled` knows the answer of (so `decisions` counts the same), and a
  job's first reservation is recorded (unless the caller reads none: `schedule`'s `reservations`);
- outside `conservative`, the pass stops after the last job whose turn can be seen (`_seen`,
  `_last_to_see`): later jobs could only take reservations nobody reads. Where first reservations
  are recorded, a job making its first is seen; where they are not, only the jobs that may start
  are, and under `firstfit` or the weighted order, whose starving jobs all reserve at every
  decision, the pass then stops after a few of them instead of all.

`tests/sim/test_compiled.py` holds it to `replay`, record for record, on real trace slices and on
random workloads (hypothesis), and the reference digests run through it. `replay` uses it where
`applies` says so; `compiled=False` there runs the Python replay instead.
"""

from __future__ import annotations

import heapq
import itertools
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numba
import numpy as np
from numba import njit
from numba.core.errors import NumbaWarning

from app.sched import core_kernel
from app.sched import profile_kernels as kernels
from app.sched.core import MAX_INSTANTS_TRIED
from app.sched.params import CommonParams, FirstfitParams, PriorityParams
from app.sched.timeline import HEAD_COLUMNS
from app.sim.correction import STEPS_S
from app.sim.stop import ReplayStopped, StopFlag
from app.sim.workload import Machine, SimJob, Workload

# The loops release the GIL (nogil: /simulate's replay thread must not freeze the event loop beside
# it); the progress callback inside the replay's loop runs in object mode, which takes the GIL back
# for its call, as it should: numba's warning that such code does not run in parallel is expected.
warnings.filterwarnings("ignore", message=".*Code running in object mode won't allow parallel execution",
                        category=NumbaWarning)

INF = math.inf
# False and 0 as the kernels are compiled for them (a plain bool, an int64), not as literals: numba
# compiles a kernel apart for a literal argument, a copy the service never warms, and the copies
# for a literal False ran the searches 1.7x slower (5,504 nodes)
NO, NONE = np.bool_(False), np.int64(0)
STANDING_ORDERS = ("fcfs", "sjf", "f1", "fitted")  # priority orders whose ranks never move (see shortlist)
# the loop counts the nodes with at least v cores free for every v up to a node's cores (`cnt_ge`),
# and a start or an end updates the counts core by core: past this many cores a node, the Python
# replay (whose cost does not grow with the cores) takes over
MAX_CORES = 1024
STEPS = np.array(STEPS_S)  # the stepwise correction's ladder (`correction.corrected`)
PREDICTIONS = {False: 0, True: 1}  # rules[7]: no prediction, predicted (request correction), STEPWISE
STEPWISE = 2


def applies(w: Workload, policy: str, params: CommonParams | None) -> bool:
    """Whether the compiled replay makes this replay's decisions: see the module's docstring."""
    if w.machine.queues or w.machine.cores_per_node > MAX_CORES:
        return False
    if params is None or params.migration is not None or not _in_node_order(w, params.selector):
        return False
    if policy in ("easy", "fcfs", "conservative", "firstfit"):
        return True
    return (policy == "priority" and isinstance(params, PriorityParams)
            and (params.order in STANDING_ORDERS or _weighted_is_fcfs(params))
            and params.backfill_order in ("priority", "sjf"))


def _in_node_order(w: Workload, selector: str) -> bool:
    """Whether the selector takes a replay's candidate nodes in node order, as first_fit does. The
    others rank by a key and break ties in node order: least_load by each node's reported cpu
    load, which a replay leaves at 0 on every node; evaluation by E, whose memory part reads the
    free memory, alike on every node when no memory is modelled (and its cpu part the load and
    clock, alike on every node)."""
    no_memory = not w.machine.mem_mib_per_node
    return selector in ("first_fit", "least_load") or (selector == "evaluation" and no_memory)


def _weighted_is_fcfs(p: PriorityParams) -> bool:
    """Whether the weighted order ranks a replay's jobs first come, first served. They carry no
    preset, user or queue priority and none is VIP, so P = min(k3·t_wait·E, P_max): with k3, E
    >= 0 it never falls as a job waits longer, so an older job never ranks below a younger one,
    and equal P goes to submit time. (E given, not the best node's: `resource_evaluation`.)"""
    e = p.resource_evaluation
    weights = (p.preset_weight, p.user_weight, p.queue_weight, p.age_weight, p.max_priority,
               p.reserve_after_wait_s)
    return (p.order == "weighted" and e is not None and math.isfinite(e) and e >= 0 and p.age_weight >= 0
            and all(math.isfinite(v) for v in weights))


# --- the profile: `app.sched.timeline.Profile`'s matrices, built and folded by the same kernels -------

@njit(cache=True, nogil=True)
def _build(now: float, grain: int, free: np.ndarray, running: np.ndarray, n_run: int,
           expect: np.ndarray, node_off: np.ndarray, assigned: np.ndarray, cpu: np.ndarray,
           mem: np.ndarray, times: np.ndarray, cum: np.ndarray,
           stale: int) -> tuple[np.ndarray, np.ndarray, int]:
    """The matrices of `Profile._build` (what is free now, and each running job's holding released
    at its grain-aligned expected end) written into the replay's buffers, grown if short; their
    width. `stale`: the rows the last pass used, set back to padding past the new width."""
    n_events = 0
    for i in range(n_run):
        j = running[i]
        n_events += node_off[j + 1] - node_off[j]
    xs = np.empty(n_events, dtype=np.int64)
    ts = np.empty(n_events)
    amounts = np.zeros((3, n_events), dtype=np.int64)
    e = 0
    for i in range(n_run):
        j = running[i]
        t = core_kernel.release(expect[j], now, grain)
        for p in range(node_off[j], node_off[j + 1]):
            xs[e], ts[e], amounts[0, e], amounts[1, e] = assigned[p], t, cpu[j], mem[j]
            e += 1
    n = free.shape[1]
    base = np.zeros((3, n), dtype=np.int64)
    for x in range(n):
        base[0, x], base[1, x] = free[0, x], free[1, x]
    offsets, by_node, most = kernels.step_groups(xs, ts, n)
    width = most + 2
    times, cum = core_kernel.room(times, cum, width)
    kernels.step_fill(times, cum, width, base, ts, amounts, offsets, by_node, now)
    for row in range(width, min(stale, times.shape[0])):
        for x in range(n):
            times[row, x] = INF
    return times, cum, width


@njit(cache=True, nogil=True)
def _when_quiet(times: np.ndarray, node_times: np.ndarray, n: int, grain: int) -> tuple[float, np.ndarray]:
    """`core_kernel._when_quiet` over every node: the n nodes whose profile is flat earliest (ties
    in node order), from then on; (NaN, none) when it finds nothing."""
    none = np.empty(0, dtype=np.int64)
    if n == 1 or np.count_nonzero(np.isfinite(node_times)) < n:
        return np.nan, none
    quiet = np.empty(len(node_times))
    for x in range(len(node_times)):
        last = 0
        while last + 1 < times.shape[0] and times[last + 1, x] < INF:
            last += 1
        quiet[x] = max(times[last, x], node_times[x])
    best = core_kernel._least(quiet, n)  # every node below the cut, and the first ones at it
    cut = quiet[best].max()
    if cut == INF:
        return np.nan, none
    return np.ceil(cut / grain) * grain, best


# --- the pass ------------------------------------------------------------------------------------

@njit(cache=True, nogil=True)
def _fits(free: np.ndarray, cnt_ge: np.ndarray, c: int, m: int, n: int) -> bool:
    """Whether at least n nodes have c cores (and m MiB, when asked) free now."""
    if cnt_ge[c] < n:
        return False
    if m == 0:
        return True
    k = 0
    for x in range(free.shape[1]):
        if free[0, x] >= c and free[1, x] >= m:
            k += 1
            if k == n:
                return True
    return False


@njit(cache=True, nogil=True)
def _take(free: np.ndarray, cnt_ge: np.ndarray, nodes: np.ndarray, c: int, m: int, sign: int) -> None:
    """Job's share of each of `nodes` taken (sign -1) or given back (+1); `cnt_ge[v]` counts the
    nodes with at least v cores free."""
    for x in nodes:
        before = free[0, x]
        free[0, x] += sign * c
        free[1, x] += sign * m
        lo, hi = (free[0, x], before) if sign < 0 else (before, free[0, x])
        for v in range(lo + 1, hi + 1):
            cnt_ge[v] += sign


@njit(cache=True, nogil=True)
def _first_clear(free: np.ndarray, c: int, m: int, n: int, now: float, release: float, times: np.ndarray,
                 cum: np.ndarray, width: int, first_booking: np.ndarray, room: np.ndarray,
                 holds_promises: bool, ready: bool, out: np.ndarray) -> int:
    """The first n nodes in node order with c, m free now that hold them until `release` without
    delaying a booking (`core_kernel._start` with first_fit), into `out`; how many found
    (fewer than n: every node was looked at). A node whose first booking starts before `release`
    is doubtful; it surely fails when that booking leaves it less than c, m (`room`: its capacity
    less the booking's demand; not while promises are held, one given back may free room), else its
    instants are walked: -1 if that is needed while changes wait to be folded (not `ready`)."""
    k = 0
    for x in range(free.shape[1]):
        if free[0, x] < c or free[1, x] < m:
            continue
        if first_booking[x] < release:
            if not holds_promises and (room[0, x] < c or room[1, x] < m):
                continue
            if not ready:
                return -1
            if not kernels.holds(times, cum, x, (c, m, NONE), m > 0, NO, now, release, width):
                continue
        out[k] = x
        k += 1
        if k == n:
            break
    return k


@njit(cache=True, nogil=True)
def _surely_blocked(blocked: np.ndarray, n_blocked: int, c: int, m: int, n: int, release: float) -> bool:
    """A job of this demand with an earlier or equal release found
    fewer than n nodes clear (rows of `blocked`: c, m, release, nodes clear). Bookings only grow and
    free room only shrinks during the pass, so this job would find no more."""
    for i in range(n_blocked):
        if blocked[0, i] == c and blocked[1, i] == m and release >= blocked[2, i] and n > blocked[3, i]:
            return True
    return False


@njit(cache=True, nogil=True)
def _search(times: np.ndarray, cum: np.ndarray, width: int, d: np.ndarray, check: np.ndarray, n: int,
            walltime: float, grain: int, first_booking: np.ndarray, any_booking: bool, head: int,
            tries: int) -> tuple[float, np.ndarray]:
    """`core_kernel._earliest` for a job that may use every node: when and where it starts
    earliest; (NaN, none) if nowhere."""
    nodes = np.arange(times.shape[1])
    per_node = NO  # (d holds one column)
    # the first candidate only: the nodes left INF past the n-th best may be free by a later one
    node_times, t, chosen = kernels.earliest_slot(times, cum, nodes, d, per_node, check, n, walltime, grain,
                                                  width, head, first_booking, any_booking, min(1, tries))
    if np.isnan(t) and n > 1:  # the later candidates, and the sure start, on every node's start
        node_times = kernels.earliest(times, cum, nodes, d, per_node, check, walltime, grain, width)
        t, chosen = kernels.common_start(times, cum, nodes, node_times, d, per_node, check, n, walltime,
                                         grain, width, first_booking, any_booking, tries, NO)
        if np.isnan(t):
            t, chosen = _when_quiet(times, node_times, n, grain)
    return t, chosen


# rows of the jobs' arrays, in the workload's order
SUBMIT, RUN, ESTIMATE, TOLD, KEY, START, END, RESERVED, PROMISE = range(9)  # `real` (float64; NaN: none)
NODES, CPU, MEM, USER = range(4)  # `ints`
FCFS, SJF, F1, FITTED = range(4)  # the orders


# progress callbacks of the replays under way, by the token their loop carries (`_tell`)
_LISTENERS: dict[int, Callable[[int], None]] = {}
_TOKENS = itertools.count(1)


def _tell(token: int, n: int) -> None:
    """Called from the compiled loop (in object mode): n more jobs of replay `token` started."""
    _LISTENERS[token](n)


@njit(cache=True, nogil=True)
def _replay(real: np.ndarray, ints: np.ndarray, n_users: int, machine: tuple[int, int, int],
            rules: tuple[int, int, int, int, int, int, int, int, int, int, int, int], may: np.ndarray,
            cap: float, fit: np.ndarray, token: int, every: int,
            stop: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """`replay._run`'s loop: (backfilled per job, the jobs in start order, node_off, assigned, the
    decisions asked); starts, ends, told times and first reservations are written into `real`.
    `fit`: the fitted order's weights (fit_r, fit_n, fit_rn, fit_s; read under that order only).
    Each time `every` more jobs have started (0: never), `_tell(token, how many)`. It stops before
    the next decision once another thread sets `stop[0]` (`app.sim.stop.StopFlag`), and then sets
    `stop[1]` (a flag set after the last decision leaves the replay whole, and `stop[1]` at 0).

    It keeps: `free` (2, N), cores and MiB free now per node; `cnt_ge[v]`, the nodes with at least
    v cores free; `expect[j]`, a running job's expected end; `assigned[node_off[j]:node_off[j + 1]]`,
    job j's nodes; `running[:counts[1]]` (`run_at[j]`: where job j is listed), the jobs running;
    `pending[:n_pend]`, the jobs waiting, in the policy's order; `fresh[:n_fresh]`, the jobs that
    arrived since the last decision (`Settled`); `ratios`, each user's last two run/request ratios."""
    n_nodes, cores, mem_cap = machine
    order, settled_on, predict = rules[3], rules[6], rules[7]
    jobs = real.shape[1]
    node_off = np.zeros(jobs + 1, dtype=np.int64)
    for j in range(jobs):
        node_off[j + 1] = node_off[j] + ints[NODES, j]
    assigned = np.empty(node_off[-1], dtype=np.int64)
    promised = np.empty(node_off[-1], dtype=np.int64)  # job j's last reservation's nodes (`PROMISE`)
    held = np.zeros(jobs, dtype=np.bool_)  # a promised slot booked for it in this pass
    backfilled = np.zeros(jobs, dtype=np.bool_)
    started = np.empty(jobs, dtype=np.int64)
    counts = np.zeros(2, dtype=np.int64)  # jobs started so far, jobs running now
    expect = np.zeros(jobs)
    free = np.empty((2, n_nodes), dtype=np.int64)
    for x in range(n_nodes):
        free[0, x], free[1, x] = cores, mem_cap
    cnt_ge = np.full(cores + 1, n_nodes, dtype=np.int64)
    running = np.empty(jobs, dtype=np.int64)
    run_at = np.full(jobs, -1, dtype=np.int64)
    pending = np.empty(jobs, dtype=np.int64)
    fresh = np.empty(jobs, dtype=np.int64)
    times = np.full((4, n_nodes), INF)  # the profile's buffers (`_pass`), and the rows last used
    cum = np.zeros((3, 4, n_nodes), dtype=np.int64)
    stale = 0
    first_booking = np.full(n_nodes, INF)
    room = np.empty((2, n_nodes), dtype=np.int64)
    out = np.empty(n_nodes, dtype=np.int64)
    ratios = np.zeros((3, n_users))  # per user: how many (up to 2), the older, the newer
    steps = np.zeros(jobs, dtype=np.int64)  # an overdue job's stepwise corrections so far
    ends = [(0.0, 0)]  # (real end, job)
    overdue = [(0.0, 0)]  # (told end, job) of the jobs that run past it
    ends.pop()
    overdue.pop()
    nxt, decisions, settled, n_pend, n_fresh, reported = 0, 0, False, 0, 0, 0
    while nxt < jobs or len(ends):
        now = min(real[SUBMIT, nxt] if nxt < jobs else INF, ends[0][0] if len(ends) else INF)
        while len(ends) and ends[0][0] <= now:
            t, j = heapq.heappop(ends)
            settled = False
            _take(free, cnt_ge, assigned[node_off[j] : node_off[j + 1]], ints[CPU, j], ints[MEM, j], 1)
            last = running[counts[1] - 1]
            running[run_at[j]], run_at[last] = last, run_at[j]
            counts[1] -= 1
            if predict:
                _ended(ratios, ints[USER, j], (t - real[START, j]) / max(real[ESTIMATE, j], 1.0))
        while len(overdue) and overdue[0][0] <= now:  # still running past its told time
            _, j = heapq.heappop(overdue)
            settled = False
            if real[END, j] > now:  # (an ended job was taken off at its end, above)
                _tell_overdue(j, real, expect, steps, overdue, predict == STEPWISE)
        while nxt < jobs and real[SUBMIT, nxt] <= now:
            told = real[ESTIMATE, nxt]
            if predict:
                told = _told(ratios, ints[USER, nxt], told)
            real[TOLD, nxt] = told
            real[KEY, nxt] = _key(order, told, ints[NODES, nxt] * ints[CPU, nxt], real[SUBMIT, nxt], fit)
            _queue(pending, n_pend, nxt, real)
            n_pend += 1
            if settled_on:
                fresh[n_fresh] = nxt
                n_fresh += 1
            nxt += 1
        if n_pend == 0 or not _any_fits(free, cnt_ge, pending[:n_pend], ints):
            continue
        if settled_on and settled and n_pend > n_fresh and _all_short(fresh[:n_fresh], ints, cnt_ge[1]):
            continue
        if stop[0]:
            stop[1] = 1  # obeyed: the replay is cut short
            break
        decisions += 1
        settled, n_fresh = True, 0
        before = counts[0]
        times, cum, stale = _pass(now, pending[:n_pend], real, ints, mem_cap, rules, may, cap, free, cnt_ge,
                                  expect,
                                  node_off, assigned, running, run_at, counts, backfilled, started, ends,
                                  overdue, times, cum, stale, first_booking, room, out, promised, held, stop)
        if counts[0] > before:
            n_pend = _drop_started(pending, n_pend, real)
            if every and counts[0] - reported >= every:
                more = counts[0] - reported
                with numba.objmode():
                    _tell(token, more)
                reported = counts[0]
    return backfilled, started[: counts[0]], node_off, assigned, decisions


@njit(cache=True, nogil=True)
def _tell_overdue(j: int, real: np.ndarray, expect: np.ndarray, steps: np.ndarray,
                  overdue: list[tuple[float, int]], stepwise: bool) -> None:
    """`_Replay.tell_overdue`: running job j's told time is up; it is told its request, or (stepwise)
    `correction.corrected`'s one step more, and is overdue again if it still runs past that. The told
    time of a running job lives in `real[TOLD, j]` (read again only while it waits)."""
    told = real[ESTIMATE, j]
    if stepwise:
        told = min(real[ESTIMATE, j], real[TOLD, j] + STEPS[steps[j]]) if steps[j] < STEPS.size else told
    real[TOLD, j] = told
    expect[j] = real[START, j] + told
    if told < real[ESTIMATE, j] and real[END, j] > real[START, j] + told:
        steps[j] += 1
        heapq.heappush(overdue, (real[START, j] + told, j))


@njit(cache=True, nogil=True)
def _told(ratios: np.ndarray, user: int, estimate: float) -> float:
    """`Predictor.told`."""
    if ratios[0, user] == 0:
        return estimate
    total = ratios[1, user] + ratios[2, user] if ratios[0, user] == 2 else ratios[1, user]
    return min(estimate, max(1.0, estimate * total / ratios[0, user]))


@njit(cache=True, nogil=True)
def _ended(ratios: np.ndarray, user: int, ratio: float) -> None:
    """`Predictor.ended`: the user's last two ratios, the older first."""
    if ratios[0, user] < 2:
        ratios[0, user] += 1
        ratios[int(ratios[0, user]), user] = ratio
    else:
        ratios[1, user], ratios[2, user] = ratios[2, user], ratio


@njit(cache=True, nogil=True)
def _key(order: int, told: float, cores: int, submit: float, fit: np.ndarray) -> float:
    """A job's place in the order before its submit time and number (`order.rank_key` of the
    policy's score: fcfs none, sjf its told time, f1 its F1 score, fitted `order.fitted_score`'s
    S, computed operation for operation)."""
    if order == SJF:
        return told
    if order == F1:
        return math.log10(max(told, 1.0)) * cores + 870.0 * math.log10(max(submit, 1.0))
    if order == FITTED:
        lr = math.log10(max(told, 1.0))
        ln = math.log10(float(max(cores, 1)))
        return fit[0] * lr + fit[1] * ln + fit[2] * lr * ln + fit[3] * (submit / 3600.0)
    return 0.0


@njit(cache=True, nogil=True)
def _queue(pending: np.ndarray, n_pend: int, j: int, real: np.ndarray) -> None:
    """Insert job j into `pending[:n_pend]`, kept in order of (key, submit time, number)."""
    at = n_pend
    while at > 0 and _after(real, pending[at - 1], j):
        pending[at] = pending[at - 1]
        at -= 1
    pending[at] = j


@njit(cache=True, nogil=True)
def _after(real: np.ndarray, p: int, j: int) -> bool:
    """Whether job p comes after job j in the order."""
    if real[KEY, p] != real[KEY, j]:
        return real[KEY, p] > real[KEY, j]
    if real[SUBMIT, p] != real[SUBMIT, j]:
        return real[SUBMIT, p] > real[SUBMIT, j]
    return p > j


@njit(cache=True, nogil=True)
def _drop_started(pending: np.ndarray, n_pend: int, real: np.ndarray) -> int:
    keep = 0
    for i in range(n_pend):
        if np.isnan(real[START, pending[i]]):
            pending[keep] = pending[i]
            keep += 1
    return keep


@njit(cache=True, nogil=True)
def _any_fits(free: np.ndarray, cnt_ge: np.ndarray, pending: np.ndarray, ints: np.ndarray) -> bool:
    """`Shapes.any_fits`: some pending job finds enough nodes with its demand free now."""
    for j in pending:
        n, c = ints[NODES, j], ints[CPU, j]
        if n <= free.shape[1] and c < len(cnt_ge) and _fits(free, cnt_ge, c, ints[MEM, j], n):
            return True
    return False


@njit(cache=True, nogil=True)
def _all_short(fresh: np.ndarray, ints: np.ndarray, idle: int) -> bool:
    """`Settled.unchanged`'s condition on the jobs that arrived since the last decision."""
    for j in fresh:
        if ints[NODES, j] <= idle:
            return False
    return True


# `may`, who may take a reservation: [WAITED, w] a job that has waited more than w seconds (-INF:
# every job; firstfit: `starvation_s`); [WEIGHTED, k3, E, P_max, t] the weighted order's starving
# job (`PriorityPolicy.rules`), whose P = k3·t_wait(min)·E has reached P_max or that has waited t;
# and under `priority`'s reserve_xfactor (selective reservation), only once (wait + told) / told
# has reached it
WAITED, WEIGHTED = 0, 1
XFACTOR = 5  # selective reservation: a job may reserve only once its expansion factor reaches may[5]


def _reserve_rule(params: CommonParams) -> np.ndarray:
    """`may`, six numbers: the rule's kind and its four parameters, then `XFACTOR`'s threshold."""
    xfactor = getattr(params, "reserve_xfactor", None)
    xfactor = -INF if xfactor is None else float(xfactor)
    if isinstance(params, FirstfitParams):
        return np.array([WAITED, params.starvation_s, 0.0, 0.0, 0.0, xfactor])
    if isinstance(params, PriorityParams) and params.order == "weighted":
        return np.array([WEIGHTED, params.age_weight, params.resource_evaluation, params.max_priority,
                         params.reserve_after_wait_s, xfactor])
    return np.array([WAITED, -INF, 0.0, 0.0, 0.0, xfactor])


@njit(cache=True, nogil=True)
def _may_reserve(may: np.ndarray, now: float, submit: float, told: float) -> bool:
    """Whether a blocked job submitted at `submit`, told `told`, may take a reservation now (`may`:
    see above; `order.expansion_factor` computed operation for operation, then compared with the
    threshold at `may[XFACTOR]`); P is computed as `order.weighted_score` computes it."""
    if may[XFACTOR] > -INF and (now - submit + told) / max(told, 1.0) < may[XFACTOR]:
        return False
    if may[0] == WAITED:
        return now - submit > may[1]
    raw = may[1] * max(0.0, now - submit) / 60.0 * may[2]
    return raw >= may[3] or now - submit >= may[4]


@njit(cache=True, nogil=True)
def _seen(order: np.ndarray, now: float, real: np.ndarray, ints: np.ndarray, mem_cap: int, may: np.ndarray,
          free: np.ndarray, cnt_ge: np.ndarray) -> tuple[np.ndarray, int]:
    """The jobs of `order` whose turn in the pass can be seen: the last position of one that may
    reserve and has not yet (its first reservation is recorded; -1: none), and the positions past
    it of those with their demand free on enough nodes now (they may start), ascending; found from
    the end. A job past all of them cannot start (free room only shrinks in the pass), and a
    reservation it takes is neither recorded nor kept (promises are kept only under `conservative`)
    nor seen by a job that may start: its bookings and the depth it uses change nothing, and the
    pass may stop before it. (Under `backfill_order=sjf`, once a job is left to the second round
    every later one is: the jobs left are all before the stop.)"""
    fitting = np.empty(len(order), dtype=np.int64)  # filled from its end
    k = len(order)
    for i in range(len(order) - 1, -1, -1):
        j = order[i]
        n, c, m = ints[NODES, j], ints[CPU, j], ints[MEM, j]
        if n > free.shape[1] or c >= len(cnt_ge) or m > mem_cap:
            continue  # it never fits
        if np.isnan(real[RESERVED, j]) and _may_reserve(may, now, real[SUBMIT, j], real[TOLD, j]):
            return fitting[k:], i  # the pass reaches it: jobs before it need no listing
        if _fits(free, cnt_ge, c, m, n):
            k -= 1
            fitting[k] = i
    return fitting[k:], -1


@njit(cache=True, nogil=True)
def _surely_stuck(free: np.ndarray, first_booking: np.ndarray, room: np.ndarray, c: int, m: int, n: int,
                  release: float) -> bool:
    """Whether fewer than n nodes pass `_first_clear`'s first tests for this demand (free now, and
    clear of bookings until `release` or with room beside the first): then the job cannot start in
    this pass (bookings only grow and free room only shrinks). Not while promises are held."""
    k = 0
    for x in range(free.shape[1]):
        if free[0, x] >= c and free[1, x] >= m and (
                first_booking[x] >= release or (room[0, x] >= c and room[1, x] >= m)):
            k += 1
            if k == n:
                return False
    return True


@njit(cache=True, nogil=True)
def _last_to_see(at: int, order: np.ndarray, fitting: np.ndarray, n_fit: int, last_first: int, now: float,
                 real: np.ndarray, ints: np.ndarray, grain: int, free: np.ndarray, first_booking: np.ndarray,
                 room: np.ndarray) -> tuple[int, int]:
    """After a booking at position `at`: the fitting jobs past it that can still start (`fitting`
    trimmed from the end while its last surely cannot: `_surely_stuck`), and the last position the
    pass must still reach (see `_seen`)."""
    while n_fit > 0 and fitting[n_fit - 1] > at:
        j = order[fitting[n_fit - 1]]
        release = core_kernel.release(now + real[TOLD, j], now, grain)
        if not _surely_stuck(free, first_booking, room, ints[CPU, j], ints[MEM, j], ints[NODES, j], release):
            break
        n_fit -= 1
    return n_fit, max(last_first, fitting[n_fit - 1] if n_fit else -1)


@njit(cache=True, nogil=True)
def _pass(now: float, pending: np.ndarray, real: np.ndarray, ints: np.ndarray, mem_cap: int,
          rules: tuple[int, int, int, int, int, int, int, int, int, int, int, int], may: np.ndarray,
          cap: float, free: np.ndarray, cnt_ge: np.ndarray, expect: np.ndarray, node_off: np.ndarray,
          assigned: np.ndarray, running: np.ndarray, run_at: np.ndarray, counts: np.ndarray,
          backfilled: np.ndarray, started: np.ndarray, ends: list[tuple[float, int]],
          overdue: list[tuple[float, int]], times: np.ndarray, cum: np.ndarray, stale: int,
          first_booking: np.ndarray, room: np.ndarray, out: np.ndarray, promised: np.ndarray,
          held: np.ndarray, stop: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """One decision at `now`: the pass over the pending jobs (in order), each start applied at once
    (free room, running jobs, their ends), each first reservation recorded. The profile is built,
    when a job reserves, into the buffers `times`, `cum` (returned, grown if they had to; and the
    rows used); `first_booking` (all INF between passes), per node, its earliest booking's start,
    `room` what that booking leaves of its capacity; `out`, room for a job's nodes. Under
    `conservative` (`keep_promises`), each job's last reservation (`PROMISE`, `promised`) is booked
    for it first, where it still holds (`held`), and given back at its turn
    (`core_kernel.hold_promises`). `cap`: the wait cap (INF: none), whose aged jobs go first
    (`_aged_first`). Once `stop[0]` is set (by another thread) it looks at no further job: the replay
    is being stopped, and its result thrown away."""
    grain, depth, queue_depth, _, stop_at_block, bf_sjf, _, _, head, tries, keep_promises, from_now = rules
    n_nodes, cores = free.shape[1], len(cnt_ge) - 1
    width, built, n_reserved = 0, False, 0  # (bookings are the reservations made)
    waiting = np.empty(len(pending) + 1, dtype=np.int64)  # starts (j + 1), bookings -(j + 1) not folded yet
    n_waiting = 0
    d = np.zeros((3, 1), dtype=np.int64)
    check = np.zeros(3, dtype=np.bool_)
    check[0] = True
    blocked = np.empty((4, 16))  # jobs found blocked by a booking (`_surely_blocked`)
    n_blocked = 0
    limit = min(len(pending), queue_depth)
    left = np.empty(limit, dtype=np.int64)
    n_left = 0
    order = (pending if cap == INF else _aged_first(pending, real, now, cap))[:limit]
    fitting, last_first = np.empty(0, dtype=np.int64), -1
    if not keep_promises:  # nothing after the last job whose turn can be seen changes the answer
        fitting, last_first = _seen(order, now, real, ints, mem_cap, may, free, cnt_ge)
        order = order[: max(last_first, fitting[-1] if len(fitting) else -1) + 1]
    n_fit = len(fitting)
    holds_promises = False  # (then room given back may undo what the shortcuts assume)
    if keep_promises:
        times, cum, width = _build(now, grain, free, running, counts[1], expect, node_off, assigned,
                                   ints[CPU], ints[MEM], times, cum, stale)
        built = True
        times, cum, width, holds_promises = _hold_promises(now, order, real, ints, node_off, promised, held,
                                                           times, cum, width, first_booking, grain)
    for rnd in range(2):
        for at in range(len(order)):
            if stop[0]:
                stop[1] = 1  # obeyed: this decision is cut short
                break
            j = order[at]
            if rnd == 0 and bf_sjf and (n_left > 0 or n_reserved >= depth):
                left[n_left] = j
                n_left += 1
                continue
            n, c, m, told = ints[NODES, j], ints[CPU, j], ints[MEM, j], real[TOLD, j]
            promise = np.nan
            if held[j]:  # its promised slot, given back: it finds that slot free (or better)
                held[j] = False
                promise = max(real[PROMISE, j], now)
                times, cum = core_kernel.room(times, cum, width)
                width = _book(times, cum, width, promised[node_off[j] : node_off[j + 1]], promise,
                              np.ceil((promise + told) / grain) * grain, -c, -m, now)
            if n > n_nodes or c > cores or m > mem_cap:
                continue  # never fits
            fits = _fits(free, cnt_ge, c, m, n)
            if not fits and n_reserved >= depth and not stop_at_block:
                continue  # it could only start, and lacks room: it waits
            d[0, 0], d[1, 0] = c, m
            check[1] = m > 0
            release = core_kernel.release(now + told, now, grain)
            k = 0
            if fits and (holds_promises or not _surely_blocked(blocked, n_blocked, c, m, n, release)):
                k = _first_clear(free, c, m, n, now, release, times, cum, width, first_booking, room,
                                 holds_promises, n_waiting == 0, out)
                if k < 0:
                    times, cum, width = _fold_waiting(waiting[:n_waiting], now, grain, from_now, real,
                                                      node_off, assigned, promised, ints, times, cum, width)
                    n_waiting = 0
                    k = _first_clear(free, c, m, n, now, release, times, cum, width, first_booking, room,
                                     holds_promises, True, out)
                if k < n and n_blocked < blocked.shape[1]:
                    blocked[0, n_blocked], blocked[1, n_blocked] = c, m
                    blocked[2, n_blocked], blocked[3, n_blocked] = release, k
                    n_blocked += 1
            if k == n:
                nodes = out[:n].copy()
                _take(free, cnt_ge, nodes, c, m, -1)
                for i in range(n):
                    assigned[node_off[j] + i] = nodes[i]
                real[START, j], real[END, j] = now, now + real[RUN, j]
                backfilled[j], expect[j] = n_reserved > 0, now + told
                started[counts[0]] = j
                running[counts[1]], run_at[j] = j, counts[1]
                counts += 1
                heapq.heappush(ends, (real[END, j], j))
                if real[END, j] > now + told:
                    heapq.heappush(overdue, (now + told, j))
                if built:  # folded when a question needs it
                    waiting[n_waiting] = j + 1
                    n_waiting += 1
                continue
            if n_reserved < depth and _may_reserve(may, now, real[SUBMIT, j], real[TOLD, j]):
                if not built:
                    times, cum, width = _build(now, grain, free, running, counts[1], expect, node_off,
                                               assigned, ints[CPU], ints[MEM], times, cum, stale)
                    built = True
                times, cum, width = _fold_waiting(waiting[:n_waiting], now, grain, from_now, real, node_off,
                                                  assigned, promised, ints, times, cum, width)
                n_waiting = 0
                t, chosen = _search(times, cum, width, d, check, n, told, grain, first_booking,
                                    n_reserved > 0 or holds_promises, head, tries)
                if not np.isnan(promise) and (np.isnan(t) or t > promise):  # the search's bounds missed it
                    t, chosen = promise, np.sort(promised[node_off[j] : node_off[j + 1]])
                if not np.isnan(t):
                    hold_from = now if from_now else t  # firstfit withholds the nodes from now on
                    waiting[n_waiting] = -(j + 1)  # folded when a question needs it
                    n_waiting += 1
                    for x in chosen:
                        if first_booking[x] > hold_from:
                            first_booking[x] = hold_from
                            room[0, x], room[1, x] = cores - c, mem_cap - m
                    n_reserved += 1
                    if np.isnan(real[RESERVED, j]):
                        real[RESERVED, j] = t
                    real[PROMISE, j] = t  # what the resource manager sends back next time
                    for i in range(n):
                        promised[node_off[j] + i] = chosen[i]
                    if rnd == 0 and not keep_promises:
                        n_fit, last = _last_to_see(at, order, fitting, n_fit, last_first, now, real, ints,
                                                   grain, free, first_booking, room)
                        if last <= at:
                            break
            if stop_at_block:  # fcfs: the queue stops at its first job that cannot start
                break
        if n_left == 0:
            break
        order = left[:n_left][np.argsort(real[TOLD][left[:n_left]], kind="mergesort")]  # stable
    if n_reserved or holds_promises:
        first_booking[:] = INF
        held[order] = False
    return times, cum, width if built else stale


@njit(cache=True, nogil=True)
def _aged_first(pending: np.ndarray, real: np.ndarray, now: float, cap: float) -> np.ndarray:
    """`order.aged`'s ranking: the jobs that have waited at least `cap` first, by submit time then
    number, then the others in their order."""
    aged = np.empty(len(pending), dtype=np.int64)
    rest = np.empty(len(pending), dtype=np.int64)
    n_aged, n_rest = 0, 0
    for j in pending:
        if max(0.0, now - real[SUBMIT, j]) >= cap:
            aged[n_aged] = j
            n_aged += 1
        else:
            rest[n_rest] = j
            n_rest += 1
    if n_aged == 0:
        return pending
    first = np.sort(aged[:n_aged])
    first = first[np.argsort(real[SUBMIT][first], kind="mergesort")]  # stable: ties by number
    return np.concatenate((first, rest[:n_rest]))


@njit(cache=True, nogil=True)
def _fold_waiting(waiting: np.ndarray, now: float, grain: int, from_now: int, real: np.ndarray,
                  node_off: np.ndarray, assigned: np.ndarray, promised: np.ndarray, ints: np.ndarray,
                  times: np.ndarray, cum: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Fold the starts (j + 1: its nodes from now to its release) and bookings (-(j + 1): its
    reservation's nodes from its start, or now under firstfit, to its end) made since the last
    question about later times, as `Profile` folds its waiting changes; the buffers and width."""
    for e in waiting:
        j = abs(e) - 1
        told = real[TOLD, j]
        if e > 0:
            t1 = core_kernel.release(now + told, now, grain)
            nodes, t0 = assigned[node_off[j] : node_off[j + 1]], now
        else:
            t = real[PROMISE, j]
            nodes, t0, t1 = promised[node_off[j] : node_off[j + 1]], now if from_now else t, \
                np.ceil((t + told) / grain) * grain
        times, cum = core_kernel.room(times, cum, width)
        width = _book(times, cum, width, nodes, t0, t1, ints[CPU, j], ints[MEM, j], now)
    return times, cum, width


@njit(cache=True, nogil=True)
def _book(times: np.ndarray, cum: np.ndarray, width: int, nodes: np.ndarray, t0: float, t1: float, c: int,
          m: int, now: float) -> int:
    """Take c cores and m MiB from each of `nodes` over [t0, t1) (give them back: negative); the
    width after. The buffers must have room for two more instants (`_room`)."""
    d = np.zeros((3, 1), dtype=np.int64)
    d[0, 0], d[1, 0] = c, m
    return kernels.fold(times, cum, nodes, t0, t1, d, NO, now, width)


@njit(cache=True, nogil=True)
def _hold_promises(now: float, order: np.ndarray, real: np.ndarray, ints: np.ndarray, node_off: np.ndarray,
                   promised: np.ndarray, held: np.ndarray, times: np.ndarray, cum: np.ndarray, width: int,
                   first_booking: np.ndarray, grain: int) -> tuple[np.ndarray, np.ndarray, int, bool]:
    """`core_kernel.hold_promises`: in order, each job's promised slot (from `max(promise, now)`
    to its grain-aligned end, on its promised nodes) booked for it if it still holds with the slots
    before it booked; the buffers, the width, and whether any was held."""
    any_held = False
    for j in order:
        if np.isnan(real[PROMISE, j]):
            continue
        start = max(real[PROMISE, j], now)
        end = np.ceil((start + real[TOLD, j]) / grain) * grain
        nodes = promised[node_off[j] : node_off[j + 1]]
        c, m = ints[CPU, j], ints[MEM, j]
        if not _all_hold(times, cum, width, nodes, c, m, start, end):
            continue  # the slot is gone (a job overran its told time): planned afresh
        times, cum = core_kernel.room(times, cum, width)
        width = _book(times, cum, width, nodes, start, end, c, m, now)
        for x in nodes:
            first_booking[x] = min(first_booking[x], start)
        held[j] = any_held = True
    return times, cum, width, any_held


@njit(cache=True, nogil=True)
def _all_hold(times: np.ndarray, cum: np.ndarray, width: int, nodes: np.ndarray, c: int, m: int, t: float,
              end: float) -> bool:
    for x in nodes:
        if not kernels.holds(times, cum, x, (c, m, NONE), m > 0, NO, t, end, width):
            return False
    return True


@dataclass(frozen=True, slots=True)
class Schedule:
    """What the compiled replay did, per job of the workload (in its order): start and end (NaN:
    never started), whether it was backfilled, its first reservation's start (NaN: none), its nodes
    (`assigned[node_off[j]:node_off[j + 1]]`, node positions); and the jobs in the order they started."""

    start: np.ndarray
    end: np.ndarray
    backfilled: np.ndarray
    reserved: np.ndarray
    order: np.ndarray
    node_off: np.ndarray
    assigned: np.ndarray
    decisions: int


def schedule(w: Workload, policy: str, params: CommonParams, predict: bool, settled_on: bool,
             reservations: bool = True, progress: Callable[[int], None] | None = None,
             stop: StopFlag | None = None, correction: str = "request") -> Schedule:
    """Replay `w` under a policy that `applies` admits (see the module's docstring). `reservations`
    False: no first reservation is recorded (`reserved` all NaN). The loop is told every job already
    has one, so no job's first reservation is one the pass must still reach: outside `conservative`
    it stops after the last job that may start (`_seen`), with the same starts. `progress(n)` is
    told as the replay goes (every hundredth of the jobs started, and the rest at the end). `stop`
    set by another thread: the loop stops before its next decision, and this raises `ReplayStopped`.
    `correction` (with `predict`): `replay.CORRECTIONS`."""
    jobs, m = w.jobs, w.machine
    users = {u: k for k, u in enumerate(dict.fromkeys(j.user for j in jobs))}
    real = np.full((9, len(jobs)), np.nan)
    if not reservations:
        real[RESERVED] = -INF  # "recorded already": nothing is written over it
    for row, values in ((SUBMIT, [j.submit for j in jobs]), (RUN, [j.run for j in jobs]),
                        (ESTIMATE, [j.estimate for j in jobs])):
        real[row] = values
    ints = np.array([[j.nodes, j.cpu, j.mem_mib, users[j.user]] for j in jobs], dtype=np.int64)
    ints = ints.reshape(-1, 4).T
    order = params.order if isinstance(params, PriorityParams) and params.order in STANDING_ORDERS else "fcfs"
    rules = (params.time_grain_s, params.reservation_depth, params.queue_depth, STANDING_ORDERS.index(order),
             int(policy == "fcfs"), int(getattr(params, "backfill_order", "") == "sjf"), int(settled_on),
             _prediction(predict, correction), HEAD_COLUMNS, MAX_INSTANTS_TRIED,
             int(policy == "conservative"), int(policy == "firstfit"))
    may = _reserve_rule(params)
    cap = getattr(params, "wait_cap_s", None)
    cap = INF if cap is None else float(cap)
    fit = np.array([getattr(params, k, 0.0) for k in ("fit_r", "fit_n", "fit_rn", "fit_s")], dtype=np.float64)
    token, heard = next(_TOKENS), [0]

    def listen(n: int) -> None:
        heard[0] += n
        if progress:
            progress(n)

    _LISTENERS[token] = listen
    try:
        backfilled, started, node_off, assigned, decisions = _replay(
            real, np.ascontiguousarray(ints), len(users), (m.nodes, m.cores_per_node, m.mem_mib_per_node),
            rules, may, cap, fit, token, max(1, len(jobs) // 100) if progress else 0,
            (stop or StopFlag()).cell)
    finally:
        del _LISTENERS[token]
    if stop is not None and stop.obeyed():
        raise ReplayStopped(stop.reason, len(started), len(jobs))
    if progress and len(started) > heard[0]:
        progress(len(started) - heard[0])
    reserved = real[RESERVED] if reservations else np.full(len(jobs), np.nan)
    return Schedule(real[START], real[END], backfilled, reserved, started, node_off, assigned, decisions)


def _prediction(predict: bool, correction: str) -> int:
    """rules[7]: 0 told the requests, 1 predictions corrected to the request, STEPWISE stepwise."""
    return STEPWISE if predict and correction == "stepwise" else PREDICTIONS[bool(predict)]


def warm() -> None:
    """Compile (or load from numba's cache) the replay's loops: a tiny replay through each path."""
    w = Workload(Machine(2), [SimJob(str(k), float(k), 10.0, 20.0, n, n, 1, 0)
                              for k, n in enumerate((2, 1, 2, 1))])
    schedule(w, "fcfs", CommonParams(time_grain_s=1, reservation_depth=2), False, True)
    f1_sjf = PriorityParams(order="f1", backfill_order="sjf", reservation_depth=2)
    schedule(w, "priority", f1_sjf, True, False)
    schedule(w, "priority", PriorityParams(order="fitted", fit_n=0.5, reservation_depth=1), False, False)
    schedule(w, "conservative", CommonParams(time_grain_s=1, reservation_depth=10**6), False, False)
    schedule(w, "firstfit", FirstfitParams(time_grain_s=1, starvation_s=1.0), False, False)

"""One scheduling pass over jobs in priority order: start, backfill, reserve or explain (docs/methods.md §1).

For each job, in order:
1. a job no node of its queue could ever hold is `never_fits` (or `node_down`);
2. it *starts* on nodes that hold it now without delaying any reservation on them (a *backfill*
   when a job ahead of it in its queue holds a reservation);
3. otherwise, if the policy lets it reserve and its queue's reservation depth allows, it books the
   nodes that can hold it earliest, from that (grain-aligned) time on;
4. otherwise it waits, with the reason.
Every policy is a configuration of this pass (`PassRules`) plus an order and a node selector.

`CorePass` hands the pass to the compiled loop of `app.sched.core_kernel` as arrays (the nodes of
each eligible set, each job's demand, queue and promise) and reads its answer back as records. The
decision's budget is granted in growing chunks of jobs (1, 2, 4, ... up to `CHUNK`): the loop runs a
chunk, and the clock and the stop flag are read between chunks.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from operator import itemgetter

import numpy as np

from app.sched import core_kernel as k
from app.sched import profile_kernels
from app.sched.budget import Budget
from app.sched.cluster import ClusterIndex, Eligible
from app.sched.model import Job, Node, Pending, Reason, Reservation, Snapshot, Start, StartKind, never_detail
from app.sched.params import EvaluationParams
from app.sched.timeline import HEAD_COLUMNS, Profile, align_up, release_times

MAX_INSTANTS_TRIED = 16  # candidate common starts tried for a multi-node job before the sure one
CHUNK = 256  # most jobs the loop looks at between two readings of a budget's clock
_START, _BACKFILL, _RESERVED, _NOT_EVALUATED = k.START, k.BACKFILL, k.RESERVED, k.NOT_EVALUATED
SELECTOR_CODES = {"first_fit": k.FIRST_FIT, "least_load": k.LEAST_LOAD, "evaluation": k.EVALUATION,
                  "fragment": k.FRAGMENT}


def _always(job: Job) -> bool:
    return True


@dataclass(frozen=True, slots=True)
class PassRules:
    reservation_depth: int  # reservations per queue in this pass
    one_reservation_per_node: bool = False  # seed 000: a node holds at most one reservation
    stop_at_block: bool = False  # fcfs: a queue stops at its first job that cannot start
    reserve_from_now: bool = False  # firstfit: reserved resources are withheld from now on
    keep_promises: bool = False  # conservative: a job is never planned later than its promise
    may_reserve: Callable[[Job], bool] = _always
    # once a queue has made its reservations, its remaining jobs (who can only start or wait) are
    # tried in this order instead of the priority order (None: priority order)
    backfill_key: Callable[[Job], tuple[object, ...]] | None = None


@dataclass(slots=True)
class PassResult:
    starts: list[Start] = field(default_factory=list)
    reservations: list[Reservation] = field(default_factory=list)
    pending: list[Pending] = field(default_factory=list)
    examined: set[tuple[str, frozenset[str]]] = field(default_factory=set)
    rows: int = 0  # node rows the pass's walks touched: its work (tests/sched/test_work_bound.py)
    searched: int = 0  # nodes handed to its reservation searches


class CorePass:
    """One decision's pass: its inputs as arrays, the compiled loop, the answer as records."""

    def __init__(self, cluster: ClusterIndex, profile: Profile, selector: str, evaluation: EvaluationParams,
                 rules: PassRules, overloaded: frozenset[str] = frozenset(),
                 budget: Budget | None = None) -> None:
        self.cluster, self.profile, self.rules, self.overloaded = cluster, profile, rules, overloaded
        self.budget = budget if budget is not None else Budget()
        self.selector, self.evaluation = SELECTOR_CODES[selector], evaluation
        self.now, self.grain = profile.now, profile.grain

    def run(self, jobs: Sequence[Job]) -> PassResult:
        self.jobs = jobs
        self._arrays(jobs)
        order = np.arange(len(jobs), dtype=np.int64)
        if self.rules.keep_promises:
            self.times, self.cum = k.hold_promises(order, self.times, self.cum, self.nodes, self.job_arrays,
                                                   self.counters, float(self.now), self.grain)
        key = self.rules.backfill_key
        self._loop(order, defer=key is not None)
        if key is not None:  # §3 backfill_order: each deferred queue's jobs, in the order the queues filled
            left = self.left[: self.counters[k.N_LEFT]].tolist()
            by_queue: dict[int, list[int]] = {}
            for j in left:
                by_queue.setdefault(int(self.cols[k.QUEUE, j]), []).append(j)
            again = [j for group in by_queue.values() for j in sorted(group, key=lambda j: key(jobs[j]))]
            self._loop(np.array(again, dtype=np.int64), defer=False)
        return self._result()

    def _loop(self, order: np.ndarray, defer: bool) -> None:
        """The compiled pass over `order`, in chunks the budget grants."""
        pos, chunk, budget = 0, 1, self.budget
        limited = budget.limited()
        while pos < len(order):
            evaluate = True
            granted = len(order) - pos if not limited else budget.grant(chunk)
            if granted == 0 and budget.hit is None and budget.check() is None:
                granted = 1  # `grant` hit the job cap exactly; `check` says so (and counted one)
            if budget.hit is not None and granted == 0:
                evaluate = False
            self.times, self.cum, pos, done = k.run(
                order, pos, granted, defer, evaluate, self.times, self.cum, self.nodes, self.sets,
                self.job_arrays, self.queues, self.out, self.how)
            if not limited:
                budget.considered += done
            elif evaluate and done < granted:  # the order ended first: give the rest back
                budget.considered -= granted - done
            chunk = min(2 * chunk, CHUNK)

    # --- the inputs -----------------------------------------------------------------------------
    def _arrays(self, jobs: Sequence[Job]) -> None:
        """The bundles `core_kernel` takes (see its docstring), built from the records once."""
        p, cluster, n_jobs = self.profile, self.cluster, len(jobs)
        self.times, self.cum, width = p.matrices()
        free = np.ascontiguousarray(np.stack(p.free), dtype=np.int64)
        cpu_part = (1.0 - cluster.cpu_load) * cluster.cpu_ghz
        room = cluster.cap.copy()  # (no booking's room known yet: `core_kernel._clear_by_bookings`)
        self._job_columns(jobs)
        levels = profile_kernels.levels_asked(self.cols[k.CPU : k.GPU + 1], self.cols[k.WHOLE] == 1)
        self.nodes = (free, cluster.cap, p.first_booking.copy(), p.booked.copy(), cpu_part, room,
                      profile_kernels.new_bounds(self.times, cluster.cap, levels))
        self.counters = np.zeros(8, dtype=np.int64)
        self.counters[k.WIDTH], self.counters[k.ANY_BOOKING] = width, p.any_booking
        self.counters[k.ANY_WINDOW] = p.any_window
        ev = self.evaluation
        self.coef = np.array([ev.cpu_weight / ev.cpu_ghz_min, ev.ram_weight / ev.ram_min_mib])
        self.sets = self._eligible_sets(free)
        may = self.rules.may_reserve
        may_reserve = np.ones(n_jobs, dtype=np.bool_) if may is _always else np.array(
            [may(job) for job in jobs], dtype=np.bool_)
        walltime = np.array([job.walltime_s for job in jobs], dtype=np.float64)
        self.job_arrays = (self.cols, walltime, may_reserve, self._never(jobs), *self._promises(jobs))
        n_q = len(self.queue_names)
        self.queues = (np.zeros(n_q, dtype=np.int64), np.full(n_q, -1, dtype=np.int64),
                       np.zeros(n_q, dtype=np.bool_))
        o_off = np.zeros(n_jobs + 1, dtype=np.int64)
        np.cumsum(self.cols[k.NODES], out=o_off[1:])
        self.left = np.empty(n_jobs, dtype=np.int64)
        self.out = (np.zeros(n_jobs, dtype=np.int8), np.full(n_jobs, -1, dtype=np.int64), o_off,
                    np.empty(o_off[-1], dtype=np.int64), np.full(n_jobs, np.nan),
                    np.empty(n_jobs, dtype=np.int64), self.left, self.counters)
        r = self.rules
        rules = np.array([min(r.reservation_depth, 1 << 62), r.one_reservation_per_node, r.stop_at_block,
                          r.reserve_from_now, MAX_INSTANTS_TRIED, HEAD_COLUMNS], dtype=np.int64)
        self.how = (rules, self.coef, self.selector, float(self.now), self.grain)

    def _job_columns(self, jobs: Sequence[Job]) -> None:
        """`cols` (7, J): each job's demand, nodes, whole-node, queue and eligible set (their
        numbers: `queue_names`, `keys`)."""
        queues: dict[str, int] = {}
        sets: dict[tuple[str, frozenset[str]], int] = {}
        self.keys: list[Eligible] = []
        flat: list[int] = []
        for job in jobs:
            e = sets.get((job.queue, job.labels))
            if e is None:
                e = sets[job.queue, job.labels] = len(self.keys)
                self.keys.append(self.cluster.eligible(job.queue, job.labels))
            q = queues.get(job.queue)
            if q is None:
                q = queues[job.queue] = len(queues)
            flat += (job.cpu, job.mem_mib, job.gpu, job.nodes, job.exclusive, q, e)
        self.cols = np.array(flat, dtype=np.int64).reshape(-1, 7).T.copy()
        self.queue_names = list(queues)

    def _eligible_sets(self, free: np.ndarray) -> tuple[np.ndarray, ...]:
        """The sets' layout (`_layout`, kept on the cluster's columns: a replay's decisions share
        it; under the evaluation selector its order is made here, by what is free now), each set's
        tree built from what is free now, an empty frontier per set, and an empty list of nodes moved
        out of the evaluation order (`core_kernel.evaluation_order`)."""
        key = (tuple(e.key for e in self.keys), self.selector)
        layout = self.cluster.core_sets.get(key)
        if layout is None:
            layout = self.cluster.core_sets[key] = self._layout()
        e_off, e_nodes, e_rank, t_off, t_size, m_off, m_set, m_pos = layout
        n_sets, evaluation = len(self.keys), self.selector == k.EVALUATION
        m_moved = np.zeros(len(m_set) if evaluation else 0, dtype=np.bool_)
        if evaluation:  # its order is by what is free now: this decision's own
            e_rank, m_pos = np.empty_like(e_nodes), np.empty_like(m_pos)
            k.evaluation_order(free, self.nodes[4], self.coef, e_off, e_nodes, e_rank, m_off, m_set, m_pos,
                               m_moved)
        tree = np.empty((3, int(2 * t_size.sum())), dtype=np.int64)
        k.build_trees(free, e_off, e_rank, t_off, t_size, tree)
        moved = np.zeros((n_sets, k.MOVED if evaluation else 0), dtype=np.int64)
        return (e_off, e_nodes, e_rank, t_off, t_size, tree, m_off, m_set, m_pos,
                np.zeros((n_sets, k.FRONTIER, 4), dtype=np.int64), np.zeros(n_sets, dtype=np.int64),
                np.zeros((n_sets, k.FRONTIER, 7)), np.zeros(n_sets, dtype=np.int64),
                moved, np.zeros(n_sets, dtype=np.int64), m_moved)

    def _layout(self) -> tuple[np.ndarray, ...]:
        """Each eligible set's nodes in node order (`e_nodes`) and in the selector's fixed order
        (`e_rank`: least_load by load, ties in node order; else node order), one after another; where
        each set's tree sits (`t_off`, and its leaves, `t_size`: a power of two), and where each node
        sits in the trees (`m_off`, `m_set`, `m_pos`)."""
        members = [self.cluster.nodes_of(e) for e in self.keys]
        sizes = np.array([len(x) for x in members], dtype=np.int64)
        e_off = np.zeros(len(members) + 1, dtype=np.int64)
        np.cumsum(sizes, out=e_off[1:])
        e_nodes = _joined(members)
        e_rank = e_nodes
        if self.selector == k.LEAST_LOAD:
            load = self.cluster.cpu_load
            e_rank = _joined([x[np.argsort(load[x], kind="stable")] for x in members])
        t_size = np.array([1 << max(int(s) - 1, 0).bit_length() for s in sizes], dtype=np.int64)
        t_off = np.zeros(len(members), dtype=np.int64)
        if len(members):
            t_off[1:] = np.cumsum(2 * t_size)[:-1]
        by_node = np.argsort(e_rank, kind="stable")  # each node's places, node by node
        m_off = np.zeros(len(self.cluster) + 1, dtype=np.int64)
        np.cumsum(np.bincount(e_rank, minlength=len(self.cluster)), out=m_off[1:])
        m_set = (np.searchsorted(e_off, by_node, side="right") - 1).astype(np.int64)
        m_pos = (by_node - e_off[m_set]).astype(np.int64)
        return e_off, e_nodes, e_rank, t_off, t_size, m_off, m_set, m_pos

    def _never(self, jobs: Sequence[Job]) -> np.ndarray:
        """Per job, 1 when no eligible node could ever hold it (never_fits), 2 when only nodes down
        or draining could (node_down), else 0. A job within the least capacity of its eligible
        nodes, wanting no more of them than are up, is 0 (most jobs: one test for all); the rest
        are counted against their set's node types, a set at a time."""
        cols = self.cols
        out = np.zeros(len(jobs), dtype=np.int8)
        # per set, what each of the rows CPU, MEM, GPU, NODES of `cols` may be at most: the least
        # capacity, and the nodes up
        most = np.array([(c, m, g, up) for c, m, g, _, up in map(self.cluster.least_capacity, self.keys)],
                        dtype=np.int64).reshape(-1, 4).T
        fits = (cols[: k.NODES + 1] <= (most if len(self.keys) == 1 else most[:, cols[k.ELIG]])).all(axis=0)
        if fits.all():
            return out
        rest = np.flatnonzero(~fits)
        for e in np.unique(cols[k.ELIG, rest]).tolist():
            mine = rest[cols[k.ELIG, rest] == e]
            holds_any, holds_up = self.cluster.capacity_counts_of(self.keys[e], cols[k.CPU : k.GPU + 1, mine])
            n = cols[k.NODES, mine]
            out[mine] = np.where(holds_any < n, 1, np.where(holds_up < n, 2, 0))
        return out

    def _promises(self, jobs: Sequence[Job]) -> tuple[np.ndarray, ...]:
        """(promise, p_off, p_nodes, held): each job's promised slot, start and nodes, where it names
        as many nodes as the job wants, all in the snapshot, up and eligible for it (else NaN:
        planned afresh); and whether it is held (the kernel says)."""
        n_jobs = len(jobs)
        promise = np.full(n_jobs, np.nan)
        p_off = np.zeros(n_jobs + 1, dtype=np.int64)
        picked: list[np.ndarray] = []
        if self.rules.keep_promises:
            for i, job in enumerate(jobs):
                nodes = self._promised_nodes(job, i)
                if nodes is not None:
                    promise[i] = job.promise_start
                    picked.append(nodes)
                p_off[i + 1] = p_off[i] + (len(nodes) if nodes is not None else 0)
        return promise, p_off, _joined(picked), np.zeros(n_jobs, dtype=np.bool_)

    def _promised_nodes(self, job: Job, i: int) -> np.ndarray | None:
        if job.promise_start is None or len(job.promise_nodes) != job.nodes:
            return None
        nodes = self.cluster.positions(job.promise_nodes)
        if nodes is None or not self.cluster.may_use(self.keys[self.cols[k.ELIG, i]], nodes):
            return None
        return nodes

    # --- the answer -----------------------------------------------------------------------------
    def _result(self) -> PassResult:
        """The loop's answer as records, each kind in the order the pass looked at the jobs (one plain
        loop over lists: it runs at every decision, of five jobs or of thousands)."""
        out = PassResult(rows=int(self.counters[k.WORK]), searched=int(self.counters[k.SEARCHED]))
        outcome, self.aux, o_off, o_nodes, self.start_at, seq = self.out[:6]
        jobs, now, grain = self.jobs, self.now, self.grain
        seq, outcome = seq[: self.counters[k.N_SEQ]].tolist(), outcome.tolist()
        elig = self.cols[k.ELIG].tolist()
        spans = _spans(o_off, o_nodes, self.cluster.ids)
        blocked = (Reason.blocked_by_reservation, _blocked_detail(self.profile.any_window))
        looked: set[int] = set()
        for j in seq:
            job, code = jobs[j], outcome[j]
            if code != _NOT_EVALUATED:
                looked.add(elig[j])
            if code == _START or code == _BACKFILL:
                kind = StartKind.BACKFILL if code == _BACKFILL else StartKind.START
                out.starts.append(Start(job.id, spans(j), kind, job.queue, now + job.walltime_s))
            elif code == _RESERVED:
                start = float(self.start_at[j])
                out.reservations.append(Reservation(job.id, spans(j), job.queue, start,
                                                    align_up(start + job.walltime_s, grain)))
            else:
                reason, detail = self._why(job, code, j, blocked)
                out.pending.append(Pending(job.id, job.queue, reason, None, detail))
        out.examined = {self.keys[e].key for e in looked}
        return out

    def _why(self, job: Job, code: int, j: int, blocked: tuple[Reason, str]) -> tuple[Reason, str]:
        if code == k.BLOCKED:
            return blocked
        if code == k.SHORT:
            if job.queue in self.overloaded:
                return Reason.queue_overloaded, f"queue {job.queue} is over its load threshold"
            return Reason.resources, "waiting for resources"
        if code == k.BEHIND:
            return Reason.priority, f"behind job {self.jobs[int(self.aux[j])].id} in its queue"
        if code == k.NOT_EVALUATED:
            return Reason.not_evaluated, self.budget.detail()
        reason = Reason.never_fits if code == k.NEVER_FITS else Reason.node_down
        return reason, never_detail(job, reason)


def _joined(parts: list[np.ndarray]) -> np.ndarray:
    """Index arrays one after another, as one int64 array."""
    return np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, dtype=np.int64)


def _spans(o_off: np.ndarray, o_nodes: np.ndarray, ids: list[str]) -> Callable[[int], tuple[str, ...]]:
    """Job j's nodes, as ids: o_nodes[o_off[j]:o_off[j + 1]] (places the loop filled for j only)."""
    off, item = o_off.tolist(), o_nodes.item

    def span(j: int) -> tuple[str, ...]:
        a, b = off[j], off[j + 1]
        if b - a <= 1:  # most jobs want one node
            return (ids[item(a)],) if b > a else ()
        return itemgetter(*o_nodes[a:b].tolist())(ids)  # one C call: a job may hold thousands of nodes
    return span


def _blocked_detail(any_window: bool) -> str:
    if any_window:
        return "fits now, but would delay a reservation or run into a maintenance window"
    return "fits now, but would delay a reservation"


def warm() -> None:
    """Compile (or load from numba's cache) the pass's loops and the profile's, before a decision
    needs them: one small pass through every entry of the loop (numba compiles a loop whole, every
    branch, for the argument types it meets; the pass always passes the same types)."""
    profile_kernels.warm()
    snap = Snapshot(0.0, (Node("a", "q", (2, 1024, 0), (1, 0, 0)), Node("b", "q", (2, 1024, 0), (0, 0, 0))))
    jobs = [Job("x", "q", 0.0, 60.0, nodes=2, cpu=2, promise_start=60.0, promise_nodes=("a", "b")),
            Job("y", "q", 0.0, 60.0, cpu=1, exclusive=True)]
    cluster = ClusterIndex(snap)
    for name in SELECTOR_CODES:
        xs, ends, amounts = cluster.held
        profile = Profile(cluster.free_now(), (xs, release_times(ends, 0.0, 60), amounts), 0.0, 60)
        profile.block(np.array([1]), 600.0, 1200.0, (2, 1024, 0))
        rules = PassRules(reservation_depth=1, keep_promises=True, backfill_key=lambda job: (job.walltime_s,))
        CorePass(cluster, profile, name, EvaluationParams(), rules).run(jobs)

"""One scheduling pass over jobs in priority order: start, backfill, reserve or explain (docs/methods.md §1).

For each job, in order:
1. a job no node of its queue could ever hold is `never_fits` (or `node_down`);
2. it *starts* on nodes that hold it now without delaying any reservation on them (a *backfill*
   when a job ahead of it in its queue holds a reservation);
3. otherwise, if the policy lets it reserve and its queue's reservation depth allows, it books the
   nodes that can hold it earliest, from that (grain-aligned) time on;
4. otherwise it waits, with the reason.
Every policy is a configuration of this pass (`PassRules`) plus an order and a node selector.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from operator import itemgetter

import numpy as np

from app.sched import profile_kernels as kernels
from app.sched.budget import Budget
from app.sched.cluster import ClusterIndex, Eligible
from app.sched.model import Job, Pending, Reason, Reservation, Start, StartKind, never_detail
from app.sched.selectors import NodeView, Selector
from app.sched.sure_waits import SureWaits
from app.sched.timeline import INF, Demand, Profile, align_up, kernel_args, release_time

MAX_INSTANTS_TRIED = 16  # candidate common starts tried for a multi-node job before the sure one
HOLD_ALL_AT_ONCE = True  # book the promised slots in one step when they fit together; False for checks
# answer the jobs that surely wait at once (`app.sched.sure_waits`) in a pass over at least this many
# jobs (below, its fixed cost per pass outweighs what it saves); a huge value turns it off, for checks
BULK_WAITS_FROM = 64
# a run of fewer sure waits than this between two jobs looked at is looked at job by job (the same
# answers): bringing the counts up to date for it costs more than `_one` on each
SHORTEST_RUN = 8
# the counts are made only once this many jobs in a row, looked at one by one, waited in full queues
# (0: as soon as a queue is full). Making them costs about as much as looking at a thousand jobs (a
# pass over the queue and a member table per eligible set): where starts and waits alternate (a
# start-heavy queue: runs of at most ~9 waits at 10k x 5k and 50k x 20k in bench/workload.py) they
# would answer next to nothing in bulk; a saturated queue, whose waits come in long runs, gets them
# after a few looks
WAITS_BEFORE_BULK = 2 * SHORTEST_RUN
# a maintenance window ahead counts as its nodes' earliest booking where it starts first (see
# `take_start`): a job that would still run when it begins surely fails there, so no look at its
# bookings (nor the availability matrices they need) is made for it; False: only reservations count
WINDOWS_AS_TAKES = True
# a start ranks its candidates once, deep enough for the doubtful ones (a selector's best k extend
# its best n: `Selector.order`), instead of the best n and then, if one is booked, again deeper;
# False: twice, the reference of the tests
ONE_RANKING = True


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


class BackfillPass:
    """Pass-local state: the profile, the caches, the reservations made so far."""

    def __init__(
        self, cluster: ClusterIndex, profile: Profile, view: NodeView, selector: Selector,
        rules: PassRules, overloaded: frozenset[str] = frozenset(), budget: Budget | None = None,
    ) -> None:
        self.cluster, self.profile, self.view = cluster, profile, view
        self.budget = budget if budget is not None else Budget()
        self.selector, self.rules, self.overloaded = selector, rules, overloaded
        self.now, self.grain = profile.now, profile.grain
        self.never: dict[tuple[object, ...], Reason | None] = {}
        # per eligibility key, a demand every eligible node holds, and their counts (see least_capacity)
        self.least: dict[tuple[str, frozenset[str]], tuple[int, int, int, int, int]] = {}
        # per (eligibility key, demand), how many nodes had it free at the last look: free only
        # shrinks during a pass, so a job wanting more nodes than that cannot start now
        self.fitting: dict[tuple[tuple[str, frozenset[str]], tuple[int, int, int]], int] = {}
        # per eligibility key, minimal single-node demands that found no node: free only shrinks
        # during a pass, so any demand at least as large on every resource fails too
        self.failed_frontier: dict[tuple[str, frozenset[str]], list[tuple[int, int, int]]] = {}
        self.reserved_in: dict[str, int] = {}  # only grows: a queue out of depth stays out
        self.filled = 0  # queues that made every reservation their depth allows
        self.depth = rules.reservation_depth
        self.short_reasons: dict[str, tuple[Reason, str]] = {}  # per queue, why a job lacking room waits
        # per (queue, labels, cpu, mem, gpu): (nodes with it free at most, nodes up that can hold
        # it, reason, detail) once its queue reserves no more (see _note_stuck)
        self.stuck: dict[tuple[object, ...], tuple[int, int, Reason, str]] = {}
        self.stopped: dict[str, str] = {}  # queue -> id of the job that stopped it (fcfs)
        self.promised: dict[str, tuple[np.ndarray, float, float]] = {}  # job -> nodes, start, end
        self.holds_promises = False  # whether the pass started by holding some promised slots
        # per (eligibility key, demand), (release, nodes clear until then) of each job that found
        # too few: free only shrinks and bookings only grow during a pass (promises aside), so a
        # later job with a release as late and more nodes than that is blocked too
        self.clear_counts: dict[tuple[tuple[str, frozenset[str]], tuple[int, int, int]],
                                list[tuple[float, int]]] = {}
        # per node, the start of its earliest booking by `_reserve` or a maintenance window ahead
        # (made at the first), and its capacity less that booking's demand: bookings only take, so
        # while no promise is given back a node has at most that room free while that booking holds
        self.take_start: np.ndarray | None = None
        self.room = np.zeros((3, 0), dtype=np.int64)
        if WINDOWS_AS_TAKES:
            for nodes, start, end, d in profile.blocks:
                self._note_take(nodes, start, end, d)
        self.out = PassResult()

    def run(self, jobs: Sequence[Job]) -> PassResult:
        if self.rules.keep_promises:
            self._hold_promises(jobs)
        self.holds_promises = bool(self.promised)
        key = self.rules.backfill_key
        if key is None:
            self._each(jobs)
            return self.out
        left: dict[str, list[Job]] = {}  # per queue, the jobs met once its reservations were made
        for job in jobs:
            if job.queue in left or self.reserved_in.get(job.queue, 0) >= self.depth:
                left.setdefault(job.queue, []).append(job)
            else:
                self._one(job)
        for queue_jobs in left.values():  # a queue's nodes are its own: queues do not interact
            self._each(sorted(queue_jobs, key=key))  # stable: ties keep the priority order
        return self.out

    def _each(self, jobs: Sequence[Job]) -> None:
        """`_one` for each job in order, except that the jobs that surely wait (`SureWaits`) are
        answered at once, as `_one` would answer each. Until a queue is full no job surely waits."""
        if not self._bulk_waits(jobs):
            for job in jobs:
                self._one(job)
            return
        jobs = jobs[self._until_waits_run(jobs):]
        if not jobs:
            return
        waits = SureWaits.of(jobs, self.cluster, self.profile, self._holds_up)
        # as `_one` would: every job adds its key, or follows a job that added it (`stuck`)
        self.out.examined |= waits.keys()
        pos, counted = 0, -1
        while pos < len(jobs):
            waits.update(self.profile, pos)  # the jobs started since: free shrank on their nodes
            full = waits.full(self._full)
            if counted != self.filled:  # a queue became full: count the clear nodes again
                waits.count_clear(self, full, pos)
                counted = self.filled
            pos = self._until_changed(jobs, pos, waits, full)

    def _until_waits_run(self, jobs: Sequence[Job]) -> int:
        """Look at jobs one by one until a queue is full and the last `WAITS_BEFORE_BULK` of them
        all waited in full queues (a run of waits the counts may pay for); the position reached."""
        pending, run = self.out.pending, 0
        for pos, job in enumerate(jobs):
            if run >= WAITS_BEFORE_BULK and (self.filled or self.depth == 0):
                return pos
            before = len(pending)
            self._one(job)
            waited = len(pending) > before and self.budget.hit is None and self._full(job.queue)
            run = run + 1 if waited else 0
        return len(jobs)

    def _until_changed(self, jobs: Sequence[Job], pos: int, waits: SureWaits, full: np.ndarray) -> int:
        """From `pos` on, answer the sure waits at once and look at the other jobs, until the end
        or one more full queue; the position reached. A job only becomes surely waiting as the
        pass goes on (free room shrinks, clear counts fall, queues fill), never the other way: the
        jobs between two listed to look at stay sure, and the list is made again only when a queue
        becomes full. The free counts are brought up to date only before a run of sure waits is
        answered (their reasons read them), not after every start."""
        filled = self.filled
        for nxt in waits.to_look_at(full, pos):
            if nxt - pos >= SHORTEST_RUN:
                waits.update(self.profile, pos)
                self._wait_surely(jobs, pos, nxt, waits)
            else:  # a few: looking at each costs less than bringing the counts up to date
                for job in jobs[pos:nxt]:
                    self._one(job)
            self._one(jobs[nxt])
            pos = nxt + 1
            if self.filled != filled:
                return pos
        waits.update(self.profile, pos)
        self._wait_surely(jobs, pos, len(jobs), waits)
        return len(jobs)

    def _bulk_waits(self, jobs: Sequence[Job]) -> bool:
        """Whether `SureWaits`'s answers are `_one`'s: no promise can give room back and no job
        stops its queue (fcfs)."""
        return len(jobs) >= BULK_WAITS_FROM and not self.holds_promises and not self.rules.stop_at_block

    def _full(self, queue: str) -> bool:
        return self.reserved_in.get(queue, 0) >= self.depth

    def _wait_surely(self, jobs: Sequence[Job], lo: int, hi: int, waits: SureWaits) -> None:
        """Jobs lo..hi-1, all surely waiting, wait: for room, or blocked by a reservation."""
        if hi <= lo:
            return
        past = lo + self.budget.grant(hi - lo)
        blocked = Reason.blocked_by_reservation, _blocked_detail(self.profile)
        short_of = {q: self.short_reasons.get(q) or self._short_reason(q) for q in waits.queues}
        pending = self.out.pending
        for job, short in zip(jobs[lo:past], waits.short_of_free(lo, past), strict=True):
            reason, detail = short_of[job.queue] if short else blocked
            pending.append(Pending(job.id, job.queue, reason, None, detail))
        for job in jobs[past:hi]:  # past the budget: `_one` says so
            self._one(job)

    def _hold_promises(self, jobs: Sequence[Job]) -> None:
        """Book every job's promised slot before the pass: no job planned ahead of it, and no
        backfill, can take it. Each job gives its own slot back when its turn comes, so it finds
        that slot free (or better): re-planning from scratch never pushes a promised job later.

        Usually the slots fit together as they did last time: then they are booked in one step
        (`Profile.book_all`), which is what checking and booking them one by one comes to."""
        slots = [slot for job in jobs if (slot := self._promised_slot(job)) is not None]
        if HOLD_ALL_AT_ONCE and self.profile.book_all([slot[1:] for slot in slots]):
            for job, nodes, start, end, _ in slots:
                self.promised[job.id] = (nodes, start, end)
            return
        for job, nodes, start, end, need in slots:
            if not self.profile.holds_over(nodes, need, start, end).all():
                continue  # the slot is gone (a node down, a job overran): plan it afresh
            self.profile.book_many(nodes, start, end, need)
            self.promised[job.id] = (nodes, start, end)

    def _promised_slot(self, job: Job) -> tuple[Job, np.ndarray, float, float, Demand] | None:
        """(job, nodes, start, end, what it takes on each) of a job's promise, if it names nodes
        the job may use; else None."""
        if job.promise_start is None or len(job.promise_nodes) != job.nodes:
            return None
        nodes = self.cluster.positions(job.promise_nodes)
        if nodes is None or not self.cluster.may_use(self.cluster.eligible_for(job), nodes):
            return None
        start = max(job.promise_start, self.now)
        end = align_up(start + job.walltime_s, self.grain)
        return job, nodes, start, end, self._need(job, nodes)

    def _need(self, job: Job, nodes: np.ndarray) -> Demand:
        """What the job takes on each of `nodes`: its demand, or each node's capacity for a
        whole-node job."""
        return self.cluster.cap[:, nodes] if job.exclusive else job.demand

    def _release_promise(self, job: Job) -> tuple[np.ndarray, float, float] | None:
        held = self.promised.pop(job.id, None)
        if held is not None:
            nodes, start, end = held
            need = self._need(job, nodes)
            if isinstance(need, np.ndarray):
                self.profile.book_many(nodes, start, end, -need)
            else:
                c, m, g = need
                self.profile.book_many(nodes, start, end, (-c, -m, -g))
        return held

    def _one(self, job: Job) -> None:
        if self.budget.check() is not None:  # past the decision's budget: looked at next cycle
            self._wait(job, Reason.not_evaluated, self.budget.detail())
            return
        if job.exclusive:
            self._one_whole(job)
            return
        if not self.promised:  # (a promise must be given back first)
            stuck = self.stuck.get((job.queue, job.labels, job.cpu, job.mem_mib, job.gpu))
            if stuck is not None and stuck[0] < job.nodes <= stuck[1]:
                self.out.pending.append(Pending(job.id, job.queue, stuck[2], None, stuck[3]))
                return
        promise = self._release_promise(job) if self.promised else None
        elig = self.cluster.eligible(job.queue, job.labels)
        key, d, n = elig.key, (job.cpu, job.mem_mib, job.gpu), job.nodes
        self.out.examined.add(key)
        never = self._never_reason(elig, d, n)
        if never is not None:
            self._wait(job, never, never_detail(job, never))
        elif job.queue in self.stopped:
            self._wait(job, Reason.priority, f"behind job {self.stopped[job.queue]} in its queue")
        elif self._short_of_free(key, d, n):  # most jobs of a busy machine end here
            self._reserve_or_wait(job, elig, promise, False)
            if not self.rules.stop_at_block and self.reserved_in.get(job.queue, 0) >= self.depth:
                self._note_stuck(job, elig, d)
        else:
            nodes, fits_free = self._try_start(job, elig, key, d, n)
            if nodes is None:
                self._reserve_or_wait(job, elig, promise, fits_free)
            else:
                kind = StartKind.BACKFILL if self.reserved_in.get(job.queue) else StartKind.START
                ids = self._ids(nodes)
                self.out.starts.append(Start(job.id, ids, kind, job.queue, self.now + job.walltime_s))

    def _one_whole(self, job: Job) -> None:
        """`_one` for a job that takes whole nodes: it starts only on nodes idle until it ends.
        None of the shortcuts of `_one` applies (they count nodes with a demand free, not idle)."""
        promise = self._release_promise(job) if self.promised else None
        elig = self.cluster.eligible(job.queue, job.labels)
        self.out.examined.add(elig.key)
        never = self._never_reason(elig, job.demand, job.nodes)
        if never is not None:
            self._wait(job, never, never_detail(job, never))
        elif job.queue in self.stopped:
            self._wait(job, Reason.priority, f"behind job {self.stopped[job.queue]} in its queue")
        else:
            nodes, idle_now = self._start_whole(job, elig)
            if nodes is None:
                self._reserve_or_wait(job, elig, promise, idle_now)
            else:
                kind = StartKind.BACKFILL if self.reserved_in.get(job.queue) else StartKind.START
                self.out.starts.append(Start(job.id, self._ids(nodes), kind, job.queue,
                                             self.now + job.walltime_s))

    def _start_whole(self, job: Job, elig: Eligible) -> tuple[np.ndarray | None, bool]:
        """(the nodes a whole-node job starts on, or None; whether enough nodes are idle now,
        bookings aside): eligible nodes whose capacity holds its demand, idle now and with no
        booking taking anything before it ends, in the selector's order."""
        nodes = self.cluster.nodes_of(elig)
        cap = self.cluster.cap[:, nodes]
        idle = np.ones(len(nodes), dtype=bool)
        for r in range(3):
            idle &= (self.profile.free[r][nodes] >= cap[r]) & (cap[r] >= job.demand[r])
        cand = nodes[idle]
        if len(cand) < job.nodes:
            return None, False
        release = release_time(self.now + job.walltime_s, self.now, self.grain)
        ranked = self.selector.order(self.view, cand, job.demand, len(cand))
        ok = self.profile.holds_over(ranked, self.cluster.cap[:, ranked], self.now, release)
        chosen = ranked[ok][: job.nodes]
        if len(chosen) < job.nodes:
            return None, True
        self.profile.start(chosen, self.cluster.cap[:, chosen], release)
        return chosen, True

    def _reserve_or_wait(self, job: Job, elig: Eligible,
                         promise: tuple[np.ndarray, float, float] | None, fits_free: bool) -> None:
        """A job that cannot start now reserves, if the policy and its queue's depth allow it,
        or waits, with the reason."""
        queue = job.queue
        depth_left = self.reserved_in.get(queue, 0) < self.depth
        if not (depth_left and self.rules.may_reserve(job) and self._reserve(job, elig, promise)):
            if fits_free:
                self._wait(job, Reason.blocked_by_reservation, _blocked_detail(self.profile))
            else:
                self._wait(job, *(self.short_reasons.get(queue) or self._short_reason(queue)))
        if self.rules.stop_at_block:
            self.stopped[queue] = job.id

    def _note_stuck(self, job: Job, elig: Eligible, d: tuple[int, int, int]) -> None:
        """Remember that jobs of this queue, labels and demand wanting more nodes than have it free
        now (and no more than can ever hold it, among those up) wait for room: free only shrinks,
        the queue's depth stays used and no job stops the queue (fcfs) during the pass, so the
        whole of `_one` would find that again."""
        key = elig.key
        free_bound = 0 if self._dominated(key, d) else self.fitting[key, d]
        holds_up = self._holds_up(elig, d)
        reason, detail = self.short_reasons.get(job.queue) or self._short_reason(job.queue)
        self.stuck[job.queue, job.labels, *d] = (free_bound, holds_up, reason, detail)

    def _short_reason(self, queue: str) -> tuple[Reason, str]:
        """Why a job of `queue` that finds too few nodes with its demand free waits."""
        if queue in self.overloaded:
            found = Reason.queue_overloaded, f"queue {queue} is over its load threshold"
        else:
            found = Reason.resources, "waiting for resources"
        self.short_reasons[queue] = found
        return found

    def _ids(self, nodes: np.ndarray) -> tuple[str, ...]:
        ids = self.cluster.ids
        if len(nodes) <= 1:  # most jobs want one node
            return (ids[nodes[0]],) if len(nodes) else ()
        return itemgetter(*nodes.tolist())(ids)  # one C call: a job may hold thousands of nodes

    def _wait(self, job: Job, reason: Reason, detail: str) -> None:
        self.out.pending.append(Pending(job.id, job.queue, reason, None, detail))

    def _never_reason(self, elig: Eligible, d: tuple[int, int, int], n: int) -> Reason | None:
        """Why a job of n nodes with d can never start here (None: it can), remembered per shape."""
        c, m, g, _, up = self.least.get(elig.key) or self._least(elig)
        if n <= up and d[0] <= c and d[1] <= m and d[2] <= g:
            return None  # every eligible node holds d, and n of them are up
        shape = (elig.key, d, n)
        if shape not in self.never:
            holds_any, holds_up = self.cluster.capacity_counts(elig, d)
            reason = None
            if holds_any < n:
                reason = Reason.never_fits
            elif holds_up < n:
                reason = Reason.node_down
            self.never[shape] = reason
        return self.never[shape]

    def _holds_up(self, elig: Eligible, d: tuple[int, int, int]) -> int:
        """How many usable eligible nodes have the capacity to hold d."""
        c, m, g, _, up = self.least.get(elig.key) or self._least(elig)
        if d[0] <= c and d[1] <= m and d[2] <= g:  # every eligible node does
            return up
        return self.cluster.capacity_counts(elig, d)[1]

    def _least(self, elig: Eligible) -> tuple[int, int, int, int, int]:
        found = self.least[elig.key] = self.cluster.least_capacity(elig)
        return found

    def _short_of_free(self, key: tuple[str, frozenset[str]], d: tuple[int, int, int], n: int) -> bool:
        """Whether fewer than n eligible nodes have d free now, as an earlier job of this pass
        found: free only shrinks during a pass, so what lacked room then lacks it now (for one
        node, any demand at least as large on every resource as one that found none)."""
        if self._dominated(key, d):
            return True
        if n > self.fitting.get((key, d), n):
            self._remember_failure(key, d, n)
            return True
        return False

    def _dominated(self, key: tuple[str, frozenset[str]], d: tuple[int, int, int]) -> bool:
        frontier = self.failed_frontier.get(key)
        if frontier:
            c, m, g = d
            for fc, fm, fg in frontier:
                if c >= fc and m >= fm and g >= fg:
                    return True
        return False

    def _try_start(self, job: Job, elig: Eligible, key: tuple[str, frozenset[str]],
                   d: tuple[int, int, int], n: int) -> tuple[np.ndarray | None, bool]:
        """(nodes it started on, or None; whether it fits in free resources ignoring bookings)."""
        fits = self.profile.fits_now(elig, d)
        count = int(np.count_nonzero(fits))
        self.fitting[key, d] = count
        if count < n:
            self._remember_failure(key, d, n)
            return None, False
        release = release_time(self.now + job.walltime_s, self.now, self.grain)
        if self._surely_blocked(key, d, n, release):
            return None, True
        if ONE_RANKING and not (n == 1 and self.selector.IN_ORDER):
            return self._start_ranked(elig, fits, key, d, n, release)
        ranked, cand = self._rank_fitting(elig, fits, d, n)
        # a node is surely fine when its first booking starts after the job ends (seed 000 (a))
        if self._any_booked_before(ranked, release):
            if cand is None:  # one node, taken in order
                ranked = self._first_clear_in_order(elig, fits, d, release)
            else:
                n_doubtful = int(np.count_nonzero(self.profile.first_booking[cand] < release))
                ranked = self.selector.order(self.view, cand, d, min(len(cand), n + n_doubtful))
                ranked = self._first_clear(ranked, d, release, n)
            if len(ranked) < n:  # then every candidate was looked at: len(ranked) are clear
                self.clear_counts.setdefault((key, d), []).append((release, len(ranked)))
                return None, True
        self.profile.start(ranked, d, release)
        return ranked, True

    def _start_ranked(self, elig: Eligible, fits: np.ndarray, key: tuple[str, frozenset[str]],
                      d: tuple[int, int, int], n: int, release: float) -> tuple[np.ndarray | None, bool]:
        """The rest of `_try_start` with the candidates ranked once: as deep as n plus the doubtful
        ones (booked before `release`), whose first n are the best n (`Selector.order`); if none of
        those is booked before then they are the answer, else the first n clear of the ranking."""
        cand = elig.nodes(fits.nonzero()[0])
        doubtful = 0
        if self.profile.any_booking:  # (else every first booking is INF)
            doubtful = int(np.count_nonzero(self.profile.first_booking[cand] < release))
        ranked = self.selector.order(self.view, cand, d, min(len(cand), n + doubtful))
        if doubtful and self._any_booked_before(ranked[:n], release):
            ranked = self._first_clear(ranked, d, release, n)
            if len(ranked) < n:  # then every candidate was looked at: len(ranked) are clear
                self.clear_counts.setdefault((key, d), []).append((release, len(ranked)))
                return None, True
        else:
            ranked = ranked[:n]
        self.profile.start(ranked, d, release)
        return ranked, True

    def _rank_fitting(self, elig: Eligible, fits: np.ndarray, d: tuple[int, int, int],
                      n: int) -> tuple[np.ndarray, np.ndarray | None]:
        """(the best n nodes where d is free now, every such node or None if not listed); `fits`
        says which eligible nodes have d free."""
        if n == 1 and self.selector.IN_ORDER:  # it ranks the first such node first: list no other
            return self.cluster.nodes_of(elig)[fits.argmax(keepdims=True)], None
        cand = elig.nodes(fits.nonzero()[0])
        return self.selector.order(self.view, cand, d, n), cand

    def _surely_blocked(self, key: tuple[str, frozenset[str]], d: tuple[int, int, int], n: int,
                        release: float) -> bool:
        """Whether fewer than n nodes can take d until `release` without delaying a booking, as
        a job with the same demand and an earlier or equal release found."""
        found = self.clear_counts.get((key, d))
        if found is None or self.holds_promises:  # a promise given back frees room again
            return False
        return any(n > count and release >= before for before, count in found)

    def _any_booked_before(self, nodes: np.ndarray, t: float) -> bool:
        if len(nodes) == 1:  # most jobs want one node: a scalar read beats a gather
            return bool(self.profile.first_booking[nodes[0]] < t)
        return bool((self.profile.first_booking[nodes] < t).any())

    def _remember_failure(self, key: tuple[str, frozenset[str]], d: tuple[int, int, int], n: int) -> None:
        if n == 1:
            c, m, g = d
            kept = [f for f in self.failed_frontier.get(key, [])
                    if not (f[0] >= c and f[1] >= m and f[2] >= g)]
            kept.append(d)
            self.failed_frontier[key] = kept

    def _first_clear(self, ranked: np.ndarray, d: tuple[int, int, int], release: float,
                     n: int) -> np.ndarray:
        """The first n of `ranked` where d until `release` delays no booking (seed 000 (b)).

        Doubtful nodes are checked in rank order, in growing chunks, until n are known to be clear.
        """
        doubtful = np.flatnonzero(self.profile.first_booking[ranked] < release)
        ok = np.ones(len(ranked), dtype=bool)
        doubtful = self._drop_sure_failures(ranked, doubtful, d, release, ok)
        done, chunk = 0, max(16, 2 * n)
        while done < len(doubtful):
            part = doubtful[done : done + chunk]
            ok[part] = self.profile.holds_over(ranked[part], d, self.now, release)
            done, chunk = done + chunk, 2 * chunk
            settled = doubtful[done] if done < len(doubtful) else len(ranked)
            if np.count_nonzero(ok[:settled]) >= n:
                break
        return ranked[ok][:n]

    def _drop_sure_failures(self, ranked: np.ndarray, doubtful: np.ndarray, d: tuple[int, int, int],
                            release: float, ok: np.ndarray) -> np.ndarray:
        """Mark not ok the doubtful nodes whose earliest booking starts before `release` and leaves
        less than d of their capacity (so d cannot be free there while it holds, within the job's
        window); the doubtful nodes left."""
        short = self._sure_failures(ranked[doubtful], d, release)
        ok[doubtful[short]] = False
        return doubtful[~short]

    def _sure_failures(self, x: np.ndarray, d: tuple[int, int, int], release: float) -> np.ndarray:
        """Whether the earliest booking of each of nodes x starts before `release` and leaves less
        than d of its capacity (none is known to while nothing is booked, or while a promise given
        back may free room again)."""
        if not len(x) or self.take_start is None or self.holds_promises:
            return np.zeros(len(x), dtype=bool)
        short = (self.room[:, x] < np.array(d)[:, None]).any(axis=0)
        short &= self.take_start[x] < release
        return short

    def _first_clear_in_order(self, elig: Eligible, fits: np.ndarray, d: tuple[int, int, int],
                              release: float) -> np.ndarray:
        """`_first_clear` for one node of a selector that takes nodes in order, without listing
        every node where d is free now: the first of them that is surely clear (booked from
        `release` on, or never) ends the candidates `_first_clear` would look at, so only those
        before it, all doubtful, are checked, in order; if none holds, it is the answer. Empty if
        no node qualifies."""
        clear = fits & (elig.take(self.profile.first_booking) >= release)
        p = int(clear.argmax())
        found = bool(clear[p])
        doubtful = elig.nodes(fits[: p if found else len(fits)].nonzero()[0])
        doubtful = doubtful[~self._sure_failures(doubtful, d, release)]
        done, chunk = 0, 16
        while done < len(doubtful):
            part = doubtful[done : done + chunk]
            ok = self.profile.holds_over(part, d, self.now, release)
            if ok.any():
                return part[ok.argmax(keepdims=True)]
            done, chunk = done + chunk, 2 * chunk
        return elig.nodes(np.array([p])) if found else doubtful[:0]

    def _note_take(self, nodes: np.ndarray, start: float, end: float, d: Demand) -> None:
        """Remember the booking of d on `nodes` over [start, end) where it starts earliest (a
        compiled loop: a reservation's numpy calls here cost more than its search)."""
        if end <= max(start, self.now):  # an empty booking takes nothing
            return
        if self.take_start is None:
            self.take_start = np.full(len(self.cluster), INF)
            self.room = self.cluster.cap.copy()
        nodes, columns, per_node, _ = kernel_args(nodes, d)
        kernels.note_first(self.take_start, self.room, self.cluster.cap, nodes, float(start), columns,
                           per_node)

    def _reserve(self, job: Job, elig: Eligible,
                 promise: tuple[np.ndarray, float, float] | None = None) -> bool:
        found = self._earliest_nodes(job, elig)
        if promise is not None and (found is None or found[0] > promise[1]):
            found = (promise[1], np.sort(promise[0]))  # the search's bounds missed it; the slot is free
        if found is None:
            return False
        start, nodes = found
        end = align_up(start + job.walltime_s, self.grain)
        hold_from = self.now if self.rules.reserve_from_now else start
        need = self._need(job, nodes)
        self.profile.book_many(nodes, hold_from, end, need)
        self._note_take(nodes, hold_from, end, need)
        ids = self._ids(nodes)
        self.out.reservations.append(Reservation(job.id, ids, job.queue, start, end))
        self.reserved_in[job.queue] = self.reserved_in.get(job.queue, 0) + 1
        if self.reserved_in[job.queue] == self.depth:
            self.filled += 1
        return True

    def _earliest_nodes(self, job: Job, elig: Eligible) -> tuple[float, np.ndarray] | None:
        """The earliest time `job.nodes` eligible nodes hold the job, and those nodes."""
        if job.exclusive:
            return self._earliest_whole(job, elig)
        if self.rules.one_reservation_per_node:  # booked nodes are out; the rest only grow
            times = self.profile.first_cover(elig, job.demand)
            nodes = self.cluster.nodes_of(elig)
            times[self.profile.booked[nodes]] = INF
            self._exact_where_blocked(job, nodes, times)
            found = self._common_start(job, nodes, times)
        else:
            # the first candidate only: `earliest_starts` leaves INF the nodes whose start is past
            # the n-th best, so a later candidate would miss those that are free by then
            nodes = self.cluster.nodes_of(elig)
            times, found = self.profile.earliest_slot(elig, nodes, job.demand, job.nodes, job.walltime_s,
                                                      min(1, MAX_INSTANTS_TRIED))
        if found is None and not self.rules.one_reservation_per_node and job.nodes > 1:
            # the later candidates, and the sure start, on every node's earliest start
            times = self.profile.earliest(elig, job.demand, job.walltime_s)
            found = self._common_start(job, nodes, times)
        return found

    def _exact_where_blocked(self, job: Job, nodes: np.ndarray, times: np.ndarray) -> None:
        """Exact earliest starts, in place, for the unreserved nodes a maintenance window blocks
        (their free resources do not only grow: the first instant covered may not last)."""
        if self.profile.any_window:
            doubt = np.flatnonzero(np.isfinite(times) & (self.profile.first_booking[nodes] < INF))
            if len(doubt):
                times[doubt] = self.profile.earliest_of(nodes[doubt], job.demand, job.walltime_s)

    def _earliest_whole(self, job: Job, elig: Eligible) -> tuple[float, np.ndarray] | None:
        """`_earliest_nodes` for a whole-node job: when each eligible node able to hold its demand
        is idle for its whole run."""
        nodes = self.cluster.nodes_of(elig)
        cap = self.cluster.cap[:, nodes]
        times = self.profile.earliest(elig, cap, job.walltime_s)
        times[(cap < np.array(job.demand, dtype=np.int64)[:, None]).any(axis=0)] = INF
        if self.rules.one_reservation_per_node:
            times[self.profile.booked[nodes]] = INF
        return self._common_start(job, nodes, times)

    def _common_start(
        self, job: Job, nodes: np.ndarray, times: np.ndarray
    ) -> tuple[float, np.ndarray] | None:
        """The earliest instant at which `job.nodes` of `nodes` all hold the job, and those."""
        need = self.cluster.cap[:, nodes] if job.exclusive else job.demand
        found = self.profile.slot(nodes, times, need, job.nodes, job.walltime_s, MAX_INSTANTS_TRIED)
        return found if found is not None else self._when_quiet(job, nodes, times)

    def _when_quiet(
        self, job: Job, nodes: np.ndarray, times: np.ndarray
    ) -> tuple[float, np.ndarray] | None:
        """When no candidate common start holds: the instant by which n nodes that can hold the
        job have no change left ahead of them (past its last step a node's profile is flat, so it
        surely holds the job from then on). None for one node, or fewer than n free ever."""
        if job.nodes == 1 or np.count_nonzero(np.isfinite(times)) < job.nodes:
            return None
        quiet = np.maximum(self.profile.last_step(nodes), times)
        finite = np.flatnonzero(np.isfinite(quiet))
        if len(finite) < job.nodes:
            return None
        best = finite[np.lexsort((finite, quiet[finite]))][: job.nodes]
        start = float(align_up(float(quiet[best].max()), self.grain))
        return start, np.sort(nodes[best])


def _blocked_detail(profile: Profile) -> str:
    if profile.any_window:
        return "fits now, but would delay a reservation or run into a maintenance window"
    return "fits now, but would delay a reservation"


"""The scheduling pass written to be read, not to be fast: the reference the core is held to.

`app.sched.core` runs the pass of docs/methods.md §1 as one compiled loop, with shortcuts. This
module takes the same pass plainly: job by job in the policy's order, node by node, asking a list
of changes per node what it has free and when. It runs only in tests
(`tests/sched/test_reference.py` holds the core's whole decisions to its own).

It reuses what *defines* a decision: the policy's order and rules (`scorer`, `rules`: §3), queue
balancing (§2), node order and eligibility (`ClusterIndex`: nodes by weight, then id), the
selectors' ranking (§4, §5), the grain (`align_up`, `release_time`), and the bound on candidate
instants (`MAX_INSTANTS_TRIED`, which changes answers: part of the definition, §1.3). It keeps none
of the pass's shortcuts: no frontier of demands that found too few nodes, no `low` place in a
selector's order, no first bookings, no profile matrices. No decision budget: every job up to the queue
depth is looked at. The snapshot must hold the whole cluster (`Snapshot.whole` None).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import numpy as np

from app.sched import core
from app.sched.cluster import ClusterIndex
from app.sched.core import PassResult, PassRules
from app.sched.migration import balance
from app.sched.model import (
    Job,
    Pending,
    Reason,
    Reservation,
    Snapshot,
    Start,
    StartKind,
    Triple,
    never_detail,
)
from app.sched.order import rank
from app.sched.params import CommonParams
from app.sched.registry import POLICIES
from app.sched.selectors import NodeView, Selector
from app.sched.timeline import INF, Profile, align_up, release_time

Slot = tuple[list[int], float, float]  # nodes, start, end


def decide(snapshot: Snapshot, pending: Sequence[Job], policy: str,
           params: CommonParams | None = None) -> PassResult:
    """What `app.sched.registry.decide` answers without a budget: its starts, reservations and
    pending jobs (those past the queue depth last, as the core lists them)."""
    params_type, policy_type = POLICIES[policy]
    pol = policy_type(params if params is not None else params_type())
    p, now = pol.params, snapshot.now
    cluster = ClusterIndex(snapshot)
    jobs, overloaded = list(pending), frozenset[str]()
    if p.migration is not None:  # §2: some jobs move to another queue first
        moved = balance(cluster, pending, snapshot.running, now, p.time_grain_s, p.migration)
        jobs, overloaded = moved.jobs, moved.overloaded
    nodes = Availability(snapshot, cluster, p.time_grain_s)
    view = NodeView(cluster, cast(Profile, nodes), p.evaluation)  # the selectors read `free` only
    ranked = rank(pol.scorer(cluster, view)(jobs, now))  # §3: the policy's order
    plain = PlainPass(cluster, nodes, view, pol.selector, pol.rules(now, ranked), overloaded)
    out = plain.run([s.job for s in ranked[: p.queue_depth]])
    for i, s in enumerate(ranked[p.queue_depth :]):
        out.pending.append(Pending(s.job.id, s.job.queue, Reason.not_evaluated, None,
                                   f"rank {p.queue_depth + i + 1} is past the queue depth "
                                   f"{p.queue_depth} of this pass"))
    return out


def covers(free: Triple, need: Triple, whole: bool) -> bool:
    """Whether `free` holds `need`: cpu always compared, memory and gpus where asked for; a whole
    node needs every amount of the node free (§1, whole-node jobs)."""
    return all(free[r] >= need[r] for r in range(3) if whole or r == 0 or need[r] > 0)


class Availability:
    """The availability profile of §1, kept plainly. Per node: what it has free with every running
    job still running (`base`), when each running job gives its part back (`gives`, at its
    grain-aligned expected end), and what is taken over an interval (`takes`: maintenance windows,
    the jobs started in this pass, reservations, promised slots). What a node has free at t is the
    sum of those in force at t."""

    def __init__(self, snapshot: Snapshot, cluster: ClusterIndex, grain: int) -> None:
        self.now, self.grain = snapshot.now, grain
        n = len(cluster)
        self.cap = [(int(c), int(m), int(g)) for c, m, g in cluster.cap.T.tolist()]
        self.usable = [bool(u) for u in cluster.usable]  # a node down or draining holds nothing
        self.base = [(int(c), int(m), int(g)) for c, m, g in (cluster.cap - cluster.alloc).T.tolist()]
        self.gives: list[list[tuple[float, Triple]]] = [[] for _ in range(n)]
        self.takes: list[list[tuple[float, float, Triple]]] = [[] for _ in range(n)]
        self.booked = [False] * n  # holds a reservation or a promised slot (memory_backfill: one)
        # free now, bookings aside: what a start looks at first, and what the selectors rank by
        self.free = [np.array([b[r] for b in self.base], dtype=np.int64) for r in range(3)]
        for job in snapshot.running:
            back = release_time(job.end_time, self.now, grain)  # an overrun: the next grain step
            for node_id, amounts in job.alloc:
                if node_id in cluster.pos:
                    self.gives[cluster.pos[node_id]].append((back, amounts))
        self.any_window = False  # a window ahead: a blocked job's detail says it may be the cause
        for w in snapshot.windows:  # a window takes its whole nodes, grain-aligned outwards
            xs = sorted({cluster.pos[i] for i in w.node_ids if i in cluster.pos})
            if w.end <= self.now or not xs:
                continue
            under_way = w.start <= self.now  # held like a running job, until its end
            if under_way:
                t0, t1 = self.now, release_time(w.end, self.now, grain)
            else:
                t0, t1 = max(self.now, w.start // grain * grain), align_up(w.end, grain)
                self.any_window = True
            for x in xs:
                self.take(x, t0, t1, self.cap[x], now_too=under_way)

    def at(self, x: int, t: float) -> Triple:
        """What node x has free at t."""
        c, m, g = self.base[x]
        for back, (dc, dm, dg) in self.gives[x]:
            if back <= t:
                c, m, g = c + dc, m + dm, g + dg
        for t0, t1, (dc, dm, dg) in self.takes[x]:
            if t0 <= t < t1:
                c, m, g = c - dc, m - dm, g - dg
        return c, m, g

    def instants(self, x: int) -> list[float]:
        """Node x's instants from now on, now first: where what it has free may change."""
        found = {self.now} | {t for t, _ in self.gives[x]}
        found |= {t for t0, t1, _ in self.takes[x] for t in (t0, t1)}
        return sorted(t for t in found if t >= self.now)

    def holds(self, x: int, need: Triple, whole: bool, t: float, end: float) -> bool:
        """Whether node x has `need` free over all of [t, end): at t and at each change before end."""
        changes = [u for u in self.instants(x) if t < u < end]
        return self.usable[x] and all(covers(self.at(x, u), need, whole) for u in [t, *changes])

    def earliest(self, x: int, need: Triple, whole: bool, walltime: float) -> float:
        """The first of node x's instants from which it holds `need` until the grain-aligned end
        (INF: never). Free changes only at its instants, so no start between them is earlier."""
        for t in self.instants(x):
            if self.holds(x, need, whole, t, align_up(t + walltime, self.grain)):
                return t
        return INF

    def take(self, x: int, t0: float, t1: float, need: Triple, now_too: bool = False) -> None:
        """Take `need` from node x over [t0, t1) (a negative `need` gives back). `now_too`: a start
        or a window under way, which free now counts too; a booking does not, even one from now:
        a start looks past bookings second (§1.1)."""
        self.takes[x].append((t0, t1, need))
        if now_too:
            for r in range(3):
                self.free[r][x] -= need[r]


class PlainPass:
    """§1, job by job: never fits, stopped queue (fcfs), start, reserve, or wait with the reason."""

    def __init__(self, cluster: ClusterIndex, nodes: Availability, view: NodeView, selector: Selector,
                 rules: PassRules, overloaded: frozenset[str]) -> None:
        self.cluster, self.nodes, self.view, self.selector = cluster, nodes, view, selector
        self.rules, self.overloaded = rules, overloaded
        self.now, self.grain = nodes.now, nodes.grain
        self.reserved_in: dict[str, int] = {}  # reservations made per queue in this pass
        self.stopped: dict[str, str] = {}  # fcfs: a queue stops at its first blocked job
        self.promised: dict[str, Slot] = {}  # the promised slots held, per job
        self.out = PassResult()

    def run(self, jobs: Sequence[Job]) -> PassResult:
        if self.rules.keep_promises:
            self.hold_promises(jobs)
        key = self.rules.backfill_key
        if key is None:
            for job in jobs:
                self.one(job)
            return self.out
        # §1 and §3, backfill_order: the jobs a queue meets once it has made its reservations are
        # tried after the others, queue by queue in the order the queues filled, in that order
        left: dict[str, list[Job]] = {}
        for job in jobs:
            if job.queue in left or self.reserved_in.get(job.queue, 0) >= self.rules.reservation_depth:
                left.setdefault(job.queue, []).append(job)
            else:
                self.one(job)
        for queue_jobs in left.values():
            for job in sorted(queue_jobs, key=key):
                self.one(job)
        return self.out

    def one(self, job: Job) -> None:
        q = job.queue
        promise = self.give_back(job)  # conservative: its promised slot is its own again
        elig = self.cluster.nodes_of(self.cluster.eligible(q, job.labels)).tolist()  # in node order
        never = self.never_reason(job, elig)
        if never is not None:  # §1.4: never_fits, node_down
            self.wait(job, never, never_detail(job, never))
        elif q in self.stopped:  # §3 fcfs: nothing behind a blocked job starts
            self.wait(job, Reason.priority, f"behind job {self.stopped[q]} in its queue")
        else:
            started, fits_now = self.start(job, elig)  # §1.1
            if started is not None:  # §1.2: a backfill once its queue holds a reservation
                kind = StartKind.BACKFILL if self.reserved_in.get(q) else StartKind.START
                ids = tuple(self.cluster.ids[x] for x in started)
                self.out.starts.append(Start(job.id, ids, kind, q, self.now + job.walltime_s))
                return
            depth_left = self.reserved_in.get(q, 0) < self.rules.reservation_depth  # §1.3
            if not (depth_left and self.rules.may_reserve(job) and self.reserve(job, elig, promise)):
                self.wait_for_room(job, fits_now)  # §1.4
            if self.rules.stop_at_block:
                self.stopped[q] = job.id

    def need(self, job: Job, x: int) -> Triple:
        """What the job takes of node x: its demand, or the whole node."""
        return self.nodes.cap[x] if job.exclusive else job.demand

    def holds(self, job: Job, x: int, t: float, end: float) -> bool:
        return self.nodes.holds(x, self.need(job, x), job.exclusive, t, end)

    def never_reason(self, job: Job, elig: list[int]) -> Reason | None:
        """never_fits: fewer than n eligible nodes have the capacity; node_down: fewer are up."""
        able = [x for x in elig if covers(self.nodes.cap[x], job.demand, True)]
        if len(able) < job.nodes:
            return Reason.never_fits
        if sum(self.nodes.usable[x] for x in able) < job.nodes:
            return Reason.node_down
        return None

    def start(self, job: Job, elig: list[int]) -> tuple[list[int] | None, bool]:
        """§1.1: the nodes it starts on (None: it does not), and whether n nodes have its demand
        free now, bookings aside (a whole-node job: n big enough nodes idle now). Of those, the
        selector's best n that keep it free until its grain-aligned end, clear of every booking."""
        free = [(int(c), int(m), int(g)) for c, m, g in np.array(self.nodes.free).T.tolist()]
        if job.exclusive:
            fit = [x for x in elig if self.nodes.usable[x] and covers(self.nodes.cap[x], job.demand, True)
                   and covers(free[x], self.nodes.cap[x], True)]
        else:
            fit = [x for x in elig if self.nodes.usable[x] and covers(free[x], job.demand, False)]
        if len(fit) < job.nodes:
            return None, False
        ranked = self.selector.order(self.view, np.array(fit, dtype=np.int64), job.demand, len(fit))
        end = release_time(self.now + job.walltime_s, self.now, self.grain)
        clear = [x for x in ranked.tolist() if self.holds(job, x, self.now, end)]
        if len(clear) < job.nodes:
            return None, True
        for x in clear[: job.nodes]:
            self.nodes.take(x, self.now, end, self.need(job, x), now_too=True)
        return clear[: job.nodes], True

    def reserve(self, job: Job, elig: list[int], promise: Slot | None) -> bool:
        """§1.3: book the earliest slot (from now under firstfit, which withholds the nodes at
        once); a promised job keeps its promised slot if the search finds none sooner."""
        found = self.earliest_slot(job, elig)
        if promise is not None and (found is None or found[0] > promise[1]):
            found = promise[1], sorted(promise[0])
        if found is None:
            return False
        start, nodes = found
        end = align_up(start + job.walltime_s, self.grain)
        for x in nodes:
            self.nodes.take(x, self.now if self.rules.reserve_from_now else start, end, self.need(job, x))
            self.nodes.booked[x] = True
        ids = tuple(self.cluster.ids[x] for x in nodes)
        self.out.reservations.append(Reservation(job.id, ids, job.queue, start, end))
        self.reserved_in[job.queue] = self.reserved_in.get(job.queue, 0) + 1
        return True

    def earliest_slot(self, job: Job, elig: list[int]) -> tuple[float, list[int]] | None:
        """§1.3, which instant and which nodes: each candidate node's earliest start (memory_backfill:
        unreserved nodes only); one node: the first free earliest; n nodes: the first of up to
        MAX_INSTANTS_TRIED distinct earliest starts, from the n-th smallest up, at which n nodes
        free by then hold the job over its window, those free last (node order on ties); failing
        that, the sure start once n nodes have no change left, those quiet first."""
        n, walltime = job.nodes, job.walltime_s
        cand = [x for x in elig if covers(self.nodes.cap[x], job.demand, True)
                and not (self.rules.one_reservation_per_node and self.nodes.booked[x])]
        when = {x: self.nodes.earliest(x, self.need(job, x), job.exclusive, walltime) for x in cand}
        free_ever = [x for x in cand if when[x] < INF]  # in node order
        if len(free_ever) < n:
            return None
        if n == 1:
            first = min(free_ever, key=lambda x: when[x])  # min keeps the first of equals
            return when[first], [first]
        nth = sorted(when[x] for x in free_ever)[n - 1]
        candidates = sorted({when[x] for x in free_ever if when[x] >= nth})
        for t in candidates[: core.MAX_INSTANTS_TRIED]:  # read at the call: tests vary it
            end = align_up(t + walltime, self.grain)
            ok = [x for x in free_ever if when[x] <= t and self.holds(job, x, t, end)]
            if len(ok) >= n:
                return t, sorted(sorted(ok, key=lambda x: -when[x])[:n])  # sorted() is stable
        quiet = {x: max(self.nodes.instants(x)[-1], when[x]) for x in free_ever}
        best = sorted(free_ever, key=lambda x: quiet[x])[:n]
        return align_up(max(quiet[x] for x in best), self.grain), sorted(best)

    def hold_promises(self, jobs: Sequence[Job]) -> None:
        """§1, promises kept: in the pass's order, each job's promised slot is booked, if it names
        n nodes that are up and eligible for the job and it still holds with those before it."""
        pos = self.cluster.pos
        for job in jobs:
            names = job.promise_nodes
            if job.promise_start is None or len(names) != job.nodes or not all(i in pos for i in names):
                continue
            xs = [pos[i] for i in names]
            elig = set(self.cluster.nodes_of(self.cluster.eligible(job.queue, job.labels)).tolist())
            if not all(self.nodes.usable[x] and x in elig for x in xs):
                continue
            start = max(job.promise_start, self.now)
            end = align_up(start + job.walltime_s, self.grain)
            if all(self.holds(job, x, start, end) for x in xs):
                for x in xs:
                    self.nodes.take(x, start, end, self.need(job, x))
                    self.nodes.booked[x] = True
                self.promised[job.id] = (xs, start, end)

    def give_back(self, job: Job) -> Slot | None:
        """At its turn a job's promised slot is given back (booked negative, as the core does)."""
        held = self.promised.pop(job.id, None)
        if held is not None:
            xs, start, end = held
            for x in xs:
                c, m, g = self.need(job, x)
                self.nodes.take(x, start, end, (-c, -m, -g))
        return held

    def wait_for_room(self, job: Job, fits_now: bool) -> None:
        if fits_now:
            window = " or run into a maintenance window" if self.nodes.any_window else ""
            self.wait(job, Reason.blocked_by_reservation, f"fits now, but would delay a reservation{window}")
        elif job.queue in self.overloaded:
            self.wait(job, Reason.queue_overloaded, f"queue {job.queue} is over its load threshold")
        else:
            self.wait(job, Reason.resources, "waiting for resources")

    def wait(self, job: Job, reason: Reason, detail: str) -> None:
        self.out.pending.append(Pending(job.id, job.queue, reason, None, detail))


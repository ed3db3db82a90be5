"""Event-driven replay of a workload through the scheduling core's `decide` (the function behind
POST /schedule), or, for the common settings, its compiled twin (below).

At every instant where jobs arrive or end, the replay hands `decide` the snapshot (the nodes'
allocations and the running jobs' holdings as arrays it keeps current in place, rather than records
rebuilt at every instant; the running jobs with their estimates), starts what it says to start, and
moves to the next instant. It skips the question when no pending job finds enough free nodes: no
policy can start anything then, so the answer is known. Where it is proven for the policy, it hands
`decide` only the pending jobs that can change the answer (`app.sim.shortlist`). A job ends at
start + its run time (`SimJob.run`: the reading has already cut it at the request where the log is
read with `kill_at_request`). A job told less than it runs (its request, in the default reading of a
log) overruns it: the scheduler keeps its told end, and the core counts an overrunning job's nodes
as freed at the next instant of its time grain, as it would for a real one. All jobs
share one partition, "default", unless the machine is split among the trace's queues
(`Machine.queues`): then a job waits in its trace queue and, when the policy migrates it, the replay
moves it to the new queue for good, as a resource manager would (it is sent as migrated from then on).

For the settings `app.sim.compiled.applies` admits, the same replay runs as one compiled loop whose
pass takes `decide`'s decisions (`app.sim.compiled`; tests/sim/test_compiled.py holds it to this
one, record for record); `compiled=False` runs this one.
"""

from __future__ import annotations

import heapq
import math
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from app.sched.cluster import NodeColumns
from app.sched.collector import rare_collections
from app.sched.model import Decision, Job, Node, RunningJob, Snapshot, Start, StartKind
from app.sched.params import CommonParams
from app.sched.registry import POLICIES, decide
from app.sim import compiled as fast
from app.sim.correction import checked, corrected
from app.sim.settled import Settled, applies
from app.sim.shortlist import Shortlist, standing_key
from app.sim.stop import ReplayStopped, StopFlag
from app.sim.workload import SimJob, Workload

QUEUE = "default"


@dataclass(frozen=True, slots=True)
class JobRecord:
    job: SimJob
    start: float
    end: float
    nodes: tuple[str, ...]
    backfilled: bool
    reserved_start: float | None  # the start its first reservation promised, if it ever had one
    # (None too when the replay recorded no reservations: `ReplayResult.reservations`)
    queue: str = QUEUE  # the queue it ran in
    migrated: bool = False  # it ran in another queue than the one it was submitted to


@dataclass(slots=True)
class ReplayResult:
    records: list[JobRecord]
    unstarted: list[SimJob]
    decisions: int
    notes: list[str] = field(default_factory=list)
    reservations: bool = True  # first reservations recorded (`JobRecord.reserved_start`)


class Cluster:
    """The machine as the core's `NodeColumns`, built once and changed in place as jobs start and
    end, so no decision rebuilds node records or arrays. The running jobs' holdings are rows of
    arrays (node, expected end, amounts); an ended job's rows are reused by the next jobs."""

    def __init__(self, w: Workload) -> None:
        m = w.machine
        cap = (m.cores_per_node, m.mem_mib_per_node, 0)
        queue_of = [q for q, n in m.queues for _ in range(n)] or [QUEUE] * m.nodes
        self.cols = NodeColumns.of([Node(f"n{i}", q, cap, (0, 0, 0)) for i, q in enumerate(queue_of)], ())
        self.limit = (m.cores_per_node, m.mem_mib_per_node or 2**62)  # 0 memory: not modelled
        self.node = np.zeros(m.nodes, dtype=np.int64)
        self.end = np.zeros(m.nodes)
        self.amount = np.zeros((3, m.nodes), dtype=np.int64)
        self.live = np.zeros(m.nodes, dtype=bool)
        self.spare = list(range(m.nodes))
        self.rows: dict[str, np.ndarray] = {}  # job id -> its rows

    def free(self) -> np.ndarray:
        """Free cores and memory now, (2, N)."""
        return self.cols.cap[:2] - self.cols.alloc[:2]

    def start(self, j: SimJob, node_ids: tuple[str, ...], end: float) -> None:
        """Job j holds its share of each of `node_ids` until its expected `end`."""
        k = len(node_ids)
        xs = np.fromiter(map(self.cols.pos.__getitem__, node_ids), dtype=np.int64, count=k)
        self._change(xs, j, +1)
        while len(self.spare) < k:
            self._grow()
        rows = np.array(self.spare[-k:])
        del self.spare[-k:]
        self.rows[j.id] = rows
        self.node[rows] = xs
        self.end[rows] = end
        self.amount[0, rows] = j.cpu  # the gpu row stays 0: the replay models no gpus
        self.amount[1, rows] = j.mem_mib
        self.live[rows] = True

    def extend(self, j: SimJob, end: float) -> None:
        """Job j is now expected to end at `end`."""
        self.end[self.rows[j.id]] = end

    def finish(self, j: SimJob) -> None:
        rows = self.rows.pop(j.id)
        self._change(self.node[rows], j, -1)
        self.live[rows] = False
        self.spare.extend(rows.tolist())

    def snapshot(self, now: float, running: tuple[RunningJob, ...]) -> Snapshot:
        """The snapshot at `now`: the columns, with the holdings of the jobs running now."""
        live = self.live
        self.cols.held = (self.node[live], self.end[live], self.amount[:, live])
        return Snapshot(now, (), running, columns=self.cols)

    def _change(self, xs: np.ndarray, j: SimJob, sign: int) -> None:
        """Add (sign +1) or take back (-1) job j's share on nodes xs; every node is alike.

        Every node's allocation stays within [0, limit] (each change is checked), so an addition
        can only overshoot the limit, and a take-back only undershoot 0."""
        for r, amount in ((0, j.cpu), (1, j.mem_mib)):
            if amount:
                row = self.cols.alloc[r]
                after = row[xs] + sign * amount
                if (after.max() > self.limit[r]) if sign > 0 else (after.min() < 0):
                    raise AssertionError(f"nodes {xs.tolist()} over-committed by job {j.id}")
                row[xs] = after

    def _grow(self) -> None:
        """Twice the rows: a node may hold several jobs when it has several cores."""
        k = len(self.live)
        self.node = np.concatenate([self.node, np.zeros(k, dtype=np.int64)])
        self.end = np.concatenate([self.end, np.zeros(k)])
        self.amount = np.concatenate([self.amount, np.zeros((3, k), dtype=np.int64)], axis=1)
        self.live = np.concatenate([self.live, np.zeros(k, dtype=bool)])
        self.spare.extend(range(k, 2 * k))


class Shapes:
    """The pending jobs' shapes: (cpu, mem) per node -> how many want each node count."""

    def __init__(self) -> None:
        self.counts: dict[tuple[int, int], Counter[int]] = {}

    def add(self, j: SimJob, sign: int) -> None:
        per_node = self.counts.setdefault((j.cpu, j.mem_mib), Counter())
        per_node[j.nodes] += sign
        if not per_node[j.nodes]:
            del per_node[j.nodes]

    def room(self, cluster: Cluster) -> dict[tuple[int, int], int]:
        """Per shape, how many nodes have it free now."""
        free = cluster.free()
        return {(cpu, mem): int(np.count_nonzero((free[0] >= cpu) & (free[1] >= mem)))
                for cpu, mem in self.counts}

    def any_fits(self, room: dict[tuple[int, int], int]) -> bool:
        """Whether some pending job finds enough nodes free now; if none does, no policy starts one."""
        return any(room[shape] >= min(ns) for shape, ns in self.counts.items() if ns)


class Predictor:
    """Run times told to the scheduler instead of the requests, after Tsafrir, Etsion and Feitelson
    (2007, "Backfilling using system-generated predictions"), who tell the mean of the user's last two
    run times. Here it is the request scaled by the mean of the user's last two run/request ratios
    (never above the request; the request while the user has no finished job yet): a user whose
    requests are exact is told them unchanged, and a user's small and large jobs are told different
    times. On the first 10,000 jobs of SDSC-SP2 / HPC2N under F1 + EASY this gives bounded slowdown
    11.0 / 33.6 against 11.8 / 34.9 for the plain mean. A job still running when its told time is up
    is told its request from then on (raised to its run time, unless the workload kills at the request);
    under the `stepwise` correction (`app.sim.correction`), its told time plus the next step instead
    (at most its request), again each time the new told time is up."""

    def __init__(self, correction: str = "request") -> None:
        self.last: dict[str, deque[float]] = {}
        self.correction = checked(correction)

    def overdue(self, told: float, estimate: float, step: int) -> float:
        """What a job told `told` is told when that is up, after `step` earlier corrections."""
        return corrected(told, estimate, step) if self.correction == "stepwise" else estimate

    def told(self, j: SimJob) -> float:
        ratios = self.last.get(j.user)
        if not ratios:
            return j.estimate
        return min(j.estimate, max(1.0, j.estimate * sum(ratios) / len(ratios)))

    def ended(self, j: SimJob, ran: float) -> None:
        self.last.setdefault(j.user, deque(maxlen=2)).append(ran / max(j.estimate, 1.0))


def _job(j: SimJob, wire_id: str, queue: str, walltime: float) -> Job:
    return Job(id=wire_id, queue=queue, submit_time=j.submit, walltime_s=walltime, nodes=j.nodes, cpu=j.cpu,
               mem_mib=j.mem_mib, user=j.user)


class _Replay:
    """The state of one replay between instants: what runs, what waits, what is promised."""

    def __init__(self, w: Workload, policy: str, params: CommonParams | None, predict: bool,
                 incremental: bool = True, shortlist: bool = True, reservations: bool = True,
                 correction: str = "request") -> None:
        self.w, self.policy, self.reservations = w, policy, reservations
        if params is None and policy in POLICIES:  # the defaults made once, not at every decision
            params = POLICIES[policy][0]()
        self.params = params
        self.settled = Settled(incremental and applies(w, policy, params, predict))
        self.cluster = Cluster(w)
        # the core breaks ties by job id as text: it is told each job's place in the workload's order
        # (submit time, then job number), zero-padded, so its ties follow the trace's numbers
        width = len(str(len(w.jobs)))
        self.wire_id = {j.id: f"{k:0{width}d}" for k, j in enumerate(w.jobs)}
        self.by_id = {self.wire_id[j.id]: j for j in w.jobs}
        self.ends: list[tuple[float, str]] = []  # real ends
        self.overdue: list[tuple[float, str]] = []  # told ends, when run times are predicted
        self.steps: dict[str, int] = {}  # an overdue job's stepwise corrections so far
        self.running: dict[str, RunningJob] = {}
        self.pending: dict[str, Job] = {}
        self.shapes = Shapes()
        self.promised: dict[str, float] = {}
        self.records: list[JobRecord] = []
        self.decisions = 0
        self.predictor = Predictor(correction) if predict else None
        self.split = bool(w.machine.queues)
        # a migration can happen when nothing starts: with balancing on, every instant is asked
        self.always_ask = self.split and params is not None and params.migration is not None
        key = standing_key(w, policy, params) if shortlist else None
        self.shortlist = None if key is None or params is None else Shortlist(
            key, w.machine, params.reservation_depth, params.queue_depth)

    def home(self, j: SimJob) -> str:
        return j.trace_queue if self.split else QUEUE

    def finish_until(self, now: float) -> None:
        while self.ends and self.ends[0][0] <= now:
            end, jid = heapq.heappop(self.ends)
            self.settled.changed()
            j = self.by_id[jid]
            self.cluster.finish(j)
            rj = self.running.pop(jid)
            if self.predictor:
                self.predictor.ended(j, end - rj.start_time)
        while self.overdue and self.overdue[0][0] <= now:  # still running past its told time
            _, jid = heapq.heappop(self.overdue)
            self.settled.changed()
            if jid in self.running:
                self.tell_overdue(jid)

    def tell_overdue(self, jid: str) -> None:
        """A running job's told time is up: tell it its request, or one step more (`Predictor`)."""
        j, rj = self.by_id[jid], self.running[jid]
        step = self.steps.pop(jid, 0)
        told = self.predictor.overdue(rj.walltime_s, j.estimate, step) if self.predictor else j.estimate
        self.running[jid] = replace(rj, walltime_s=told)
        self.cluster.extend(j, rj.start_time + told)
        if told < j.estimate and rj.start_time + j.run > rj.start_time + told:  # overdue again
            self.steps[jid] = step + 1
            heapq.heappush(self.overdue, (rj.start_time + told, jid))

    def arrive(self, j: SimJob) -> None:
        told = self.predictor.told(j) if self.predictor else j.estimate
        wire = self.wire_id[j.id]
        job = self.pending[wire] = _job(j, wire, self.home(j), told)
        if self.shortlist:
            self.shortlist.add(job)
        self.settled.arrived(j)
        self.shapes.add(j, +1)

    def ask(self, now: float) -> Decision | None:
        if not self.pending:
            return None
        room = self.shapes.room(self.cluster)
        if not (self.always_ask or self.shapes.any_fits(room)):
            return None
        if self.settled.unchanged(self.cluster.free()[0], len(self.pending)):
            return None
        self.decisions += 1
        self.settled.decided()
        jobs = self.shortlist.jobs(self.pending, room) if self.shortlist else tuple(self.pending.values())
        snapshot = self.cluster.snapshot(now, tuple(self.running.values()))
        return decide(snapshot, jobs, self.policy, self.params)

    def apply(self, d: Decision, now: float) -> None:
        pending = self.pending
        for mig in d.migrations:  # moved for good; a promise made in the old queue is void
            pending[mig.job_id] = replace(pending[mig.job_id], queue=mig.to_queue, migrated=True,
                                          promise_start=None, promise_nodes=())
        for r in d.reservations:
            if self.reservations:
                self.promised.setdefault(r.job_id, r.start_time)
            # the resource manager sends the latest promise back next time (most decisions repeat
            # the last one: the job then already carries it)
            job = pending[r.job_id]
            if job.promise_start != r.start_time or job.promise_nodes != r.node_ids:
                pending[r.job_id] = replace(job, promise_start=r.start_time, promise_nodes=r.node_ids)
        for s in d.starts:
            self.start(self.by_id[s.job_id], s, now)

    def start(self, j: SimJob, s: Start, now: float) -> None:
        told = self.pending.pop(s.job_id)
        if self.shortlist:
            self.shortlist.remove(told)
        migrated = told.migrated or s.queue != self.home(j)
        self.shapes.add(j, -1)
        self.cluster.start(j, s.node_ids, now + told.walltime_s)
        share = (j.cpu, j.mem_mib, 0)
        self.running[s.job_id] = RunningJob(s.job_id, s.queue, tuple([(n, share) for n in s.node_ids]),
                                        now, told.walltime_s, migrated)
        end = now + j.run
        heapq.heappush(self.ends, (end, s.job_id))
        if end > now + told.walltime_s:
            heapq.heappush(self.overdue, (now + told.walltime_s, s.job_id))
        self.records.append(JobRecord(j, now, end, s.node_ids, s.kind == StartKind.BACKFILL,
                                      self.promised.pop(s.job_id, None), s.queue, migrated))


def replay(w: Workload, policy: str, params: CommonParams | None = None,
           progress: Callable[[int], None] | None = None, predict: bool = False,
           incremental: bool = True, shortlist: bool = True, compiled: bool = True,
           reservations: bool = True, stop: StopFlag | None = None,
           correction: str = "request") -> ReplayResult:
    """Run the whole workload; `progress(n)` is told each time n more jobs have started (by the
    compiled replay, each time a hundredth of the jobs more have). `predict`:
    the scheduler is told predicted run times (`Predictor`) instead of the requests. `incremental`:
    instants whose answer is known are not asked (`app.sim.settled`; False asks them, for checks).
    `shortlist`: `decide` sees only the pending jobs that can change its answer where that is
    proven (`app.sim.shortlist`; False hands it the whole queue, for checks, and so never takes the
    compiled replay). `compiled`: where
    `app.sim.compiled` makes the same decisions, its compiled loop replays (False: `decide` does).
    `reservations`: record each job's first reservation (False: `reserved_start` stays None, for
    callers that read only the schedule, such as a tuning sweep; the schedule is the same, and the
    compiled replay of a policy whose starving jobs all reserve at every decision, `firstfit` or
    the weighted order, then skips the reservations no start depends on). `stop`: a flag another
    thread may set (`app.sim.stop`); the replay then stops before its next decision and raises
    `ReplayStopped`. `correction`: what a job still running when its predicted time is up is told
    (`app.sim.correction.CORRECTIONS`: its request, or `stepwise` one step more; read only with `predict`)."""
    if params is None and policy in POLICIES:
        params = POLICIES[policy][0]()
    checked(correction)
    if compiled and shortlist and params is not None and fast.applies(w, policy, params):
        return _run_compiled(w, policy, params, predict, incremental, reservations, progress, stop,
                             correction)
    with rare_collections():
        r = _Replay(w, policy, params, predict, incremental, shortlist, reservations, correction)
        return _run(r, w, progress, predict, stop, correction)


@dataclass(frozen=True, slots=True)
class Times:
    """When each job of a replayed workload ran, in the workload's order (NaN: never started), and the
    started jobs' positions in the order they started (`ReplayResult.records`' order)."""

    start: np.ndarray
    end: np.ndarray
    order: np.ndarray


def replay_times(w: Workload, policy: str, params: CommonParams | None = None, predict: bool = False,
                 stop: StopFlag | None = None, correction: str = "request") -> Times:
    """`replay`'s starts and ends without its records, for a caller that reads nothing else (a tuning
    sweep): where the compiled replay applies, its arrays as they come (no job record or node name
    is made: on 15,000 SDSC-SP2 jobs that was a fifth to a third of a replay's time), else `replay`'s
    records read back. Reservations are not recorded (`replay`'s `reservations=False`)."""
    if params is None and policy in POLICIES:
        params = POLICIES[policy][0]()
    checked(correction)
    if params is not None and fast.applies(w, policy, params):
        s = fast.schedule(w, policy, params, predict, applies(w, policy, params, predict), False, None, stop,
                          correction)
        return Times(s.start, s.end, s.order)
    result = replay(w, policy, params, predict=predict, reservations=False, stop=stop, correction=correction)
    position = {id(j): k for k, j in enumerate(w.jobs)}
    start, end = np.full(len(w.jobs), np.nan), np.full(len(w.jobs), np.nan)
    order = np.array([position[id(r.job)] for r in result.records], dtype=np.int64)
    start[order] = [r.start for r in result.records]
    end[order] = [r.end for r in result.records]
    return Times(start, end, order)


def _run_compiled(w: Workload, policy: str, params: CommonParams, predict: bool, incremental: bool,
                  reservations: bool, progress: Callable[[int], None] | None,
                  stop: StopFlag | None, correction: str) -> ReplayResult:
    """`_run`'s result, from the compiled replay."""
    s = fast.schedule(w, policy, params, predict, incremental and applies(w, policy, params, predict),
                      reservations, progress, stop, correction)
    ids = Cluster(w).cols.ids  # node positions as the core orders them (by id)
    records = []
    for j in s.order.tolist():
        job = w.jobs[j]
        nodes = tuple([ids[x] for x in s.assigned[s.node_off[j] : s.node_off[j + 1]].tolist()])
        promised = None if math.isnan(s.reserved[j]) else float(s.reserved[j])
        records.append(JobRecord(job, float(s.start[j]), float(s.end[j]), nodes, bool(s.backfilled[j]),
                                 promised))
    unstarted = [job for job, t in zip(w.jobs, s.start.tolist(), strict=True) if math.isnan(t)]
    notes = _notes(w, predict, unstarted, correction)
    return ReplayResult(records, unstarted, s.decisions, notes, reservations)


def _run(r: _Replay, w: Workload, progress: Callable[[int], None] | None, predict: bool,
         stop: StopFlag | None = None, correction: str = "request") -> ReplayResult:
    arrivals = w.jobs
    nxt = 0
    while nxt < len(arrivals) or r.ends:
        now = min(arrivals[nxt].submit if nxt < len(arrivals) else float("inf"),
                  r.ends[0][0] if r.ends else float("inf"))
        r.finish_until(now)
        while nxt < len(arrivals) and arrivals[nxt].submit <= now:
            r.arrive(arrivals[nxt])
            nxt += 1
        if stop is not None and stop.is_set() and r.pending:  # (none pending: no decision is left)
            raise ReplayStopped(stop.reason, len(r.records), len(arrivals))
        decision = r.ask(now)
        if decision is None:
            continue
        r.apply(decision, now)
        if progress and decision.starts:
            progress(len(decision.starts))
    unstarted = [r.by_id[jid] for jid in r.pending]
    return ReplayResult(r.records, unstarted, r.decisions, _notes(w, predict, unstarted, correction),
                        r.reservations)


def _notes(w: Workload, predict: bool, unstarted: list[SimJob], correction: str = "request") -> list[str]:
    notes = list(w.notes)
    if predict:
        notes.append("run times told to the scheduler: the request scaled by the mean of the user's last two "
                     "run/request ratios, at most the request")
        if correction == "stepwise":
            notes.append("a job running past its told time is told one step more (1 min, 5 min, 15 min, "
                         "30 min, 1 h, ... 100 h; at most its request), each time that is up")
    if unstarted:
        notes.append(f"{len(unstarted)} jobs never started (nothing left running could free room for them)")
    return notes

"""Event-driven replay of a workload through the scheduling core's `decide` (the function behind
POST /schedule; there is no second scheduler here).

At every instant where jobs arrive or end, the replay builds the snapshot (nodes with their
allocations, running jobs with their estimates), asks `decide`, starts what it says to start, and
moves to the next instant. It skips the question when no pending job finds enough free nodes: no
policy can start anything then, so the answer is known. A job ends at start + its real run time, or
is killed at start + its estimate if it runs longer, as a resource manager would. All jobs share one
partition, "default".
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from app.sched.model import Job, Node, RunningJob, Snapshot, StartKind
from app.sched.params import CommonParams
from app.sched.registry import decide
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


@dataclass(slots=True)
class ReplayResult:
    records: list[JobRecord]
    unstarted: list[SimJob]
    decisions: int
    notes: list[str] = field(default_factory=list)


class Cluster:
    """The machine as the core's `Node` records, replaced (they are frozen) when allocations change,
    with free cores and memory as arrays for the quick "can anything start?" test."""

    def __init__(self, w: Workload) -> None:
        m = w.machine
        cap = (m.cores_per_node, m.mem_mib_per_node, 0)
        self.nodes = [Node(f"n{i}", QUEUE, cap, (0, 0, 0)) for i in range(m.nodes)]
        self.index = {n.id: i for i, n in enumerate(self.nodes)}
        self.free_cpu = np.full(m.nodes, m.cores_per_node)
        self.free_mem = np.full(m.nodes, m.mem_mib_per_node if m.mem_mib_per_node else 2**62)

    def nodes_holding(self, cpu: int, mem: int) -> int:
        return int(np.count_nonzero((self.free_cpu >= cpu) & (self.free_mem >= mem)))

    def change(self, node_ids: tuple[str, ...], job: SimJob, sign: int) -> None:
        for nid in node_ids:
            i = self.index[nid]
            n = self.nodes[i]
            cpu, mem, gpu = n.alloc
            alloc = (cpu + sign * job.cpu, mem + sign * job.mem_mib, gpu)
            if min(alloc) < 0 or alloc[0] > n.cap[0] or (n.cap[1] and alloc[1] > n.cap[1]):
                raise AssertionError(f"node {nid} over-committed by job {job.id}")
            self.nodes[i] = Node(n.id, n.queue, n.cap, alloc)
            self.free_cpu[i] -= sign * job.cpu
            self.free_mem[i] -= sign * job.mem_mib


class Shapes:
    """The pending jobs' shapes: (cpu, mem) per node -> how many want each node count."""

    def __init__(self) -> None:
        self.counts: dict[tuple[int, int], Counter[int]] = {}

    def add(self, j: SimJob, sign: int) -> None:
        per_node = self.counts.setdefault((j.cpu, j.mem_mib), Counter())
        per_node[j.nodes] += sign
        if not per_node[j.nodes]:
            del per_node[j.nodes]

    def any_fits(self, cluster: Cluster) -> bool:
        """Whether some pending job finds enough nodes free now; if none does, no policy starts one."""
        return any(cluster.nodes_holding(cpu, mem) >= min(ns)
                   for (cpu, mem), ns in self.counts.items() if ns)


def _job(j: SimJob) -> Job:
    return Job(id=j.id, queue=QUEUE, submit_time=j.submit, walltime_s=j.estimate, nodes=j.nodes, cpu=j.cpu,
               mem_mib=j.mem_mib, user=j.user)


def replay(w: Workload, policy: str, params: CommonParams | None = None,
           progress: Callable[[int], None] | None = None) -> ReplayResult:
    """Run the whole workload; `progress(n)` is told each time n more jobs have started."""
    cluster = Cluster(w)
    arrivals = list(w.jobs)
    by_id = {j.id: j for j in arrivals}
    ends: list[tuple[float, str]] = []
    running: dict[str, RunningJob] = {}
    held: dict[str, tuple[str, ...]] = {}
    pending: dict[str, Job] = {}
    shapes = Shapes()
    promised: dict[str, float] = {}
    records: list[JobRecord] = []
    next_arrival, decisions = 0, 0
    while next_arrival < len(arrivals) or ends:
        now = min(arrivals[next_arrival].submit if next_arrival < len(arrivals) else float("inf"),
                  ends[0][0] if ends else float("inf"))
        while ends and ends[0][0] <= now:
            _, jid = heapq.heappop(ends)
            cluster.change(held.pop(jid), by_id[jid], -1)
            del running[jid]
        while next_arrival < len(arrivals) and arrivals[next_arrival].submit <= now:
            j = arrivals[next_arrival]
            pending[j.id] = _job(j)
            shapes.add(j, +1)
            next_arrival += 1
        if not pending or not shapes.any_fits(cluster):
            continue
        decision = decide(Snapshot(now, tuple(cluster.nodes), tuple(running.values())),
                          tuple(pending.values()), policy, params)
        decisions += 1
        for r in decision.reservations:
            promised.setdefault(r.job_id, r.start_time)
            job = pending[r.job_id]  # the resource manager sends the latest promise back next time
            pending[r.job_id] = replace(job, promise_start=r.start_time, promise_nodes=r.node_ids)
        for s in decision.starts:
            j = by_id[s.job_id]
            del pending[j.id]
            shapes.add(j, -1)
            cluster.change(s.node_ids, j, +1)
            held[j.id] = s.node_ids
            running[j.id] = RunningJob(j.id, QUEUE, tuple((n, (j.cpu, j.mem_mib, 0)) for n in s.node_ids),
                                       now, j.estimate)
            end = now + min(j.run, j.estimate)
            heapq.heappush(ends, (end, j.id))
            records.append(JobRecord(j, now, end, s.node_ids, s.kind == StartKind.BACKFILL,
                                     promised.pop(j.id, None)))
        if progress and decision.starts:
            progress(len(decision.starts))
    unstarted = [by_id[jid] for jid in pending]
    notes = list(w.notes)
    if unstarted:
        notes.append(f"{len(unstarted)} jobs never started (nothing left running could free room for them)")
    return ReplayResult(records, unstarted, decisions, notes)

"""Multi-queue load balancing by job migration (docs/methods.md §2, seed 000 step S2).

Queue load L_k is the dominant share (largest of the cpu, mem and gpu ratios) of what is allocated
on the queue's usable nodes over their capacity. A node serving several queues (overlapping
partitions) counts, capacity and use, in each of them: each queue's load is how busy its own nodes
are, whoever keeps them busy. A job moves only when it does not fit in its own
queue now, and only to a queue that has usable nodes able to run it; migrated jobs rank below the
target queue's own jobs (see order.rank).

- static: a queue over `threshold` sends its waiting jobs to the least loaded queue under the
  threshold; each move adds the job's share to the target's projected load.
- dynamic [reconstructed]: expected waits come from a fluid estimate of each queue (work of the
  running jobs still to do, plus the work of the jobs ahead, at a capacity of one share per second).
  A queue is balanced only when its waiting cost Cw = Σ jtw·jr exceeds its migration cost
  Cm = Σ jt·jr·w; jobs then move largest expected wait reduction first, each only when its own wait
  exceeds w times its run time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from app.sched.cluster import ClusterIndex
from app.sched.model import Job, Migration, RunningJob
from app.sched.params import MigrationParams
from app.sched.running import RunningColumns
from app.sched.timeline import release_time, release_times


@dataclass(frozen=True, slots=True)
class Balanced:
    jobs: list[Job]
    migrations: list[Migration]
    overloaded: frozenset[str]  # queues over the threshold whose jobs could not all move


class QueueFacts:
    """Per-queue capacity, load, free-now checks: what both modes read."""

    def __init__(self, cluster: ClusterIndex) -> None:
        self.cluster = cluster
        self.free = cluster.free_now()
        totals = _queue_totals(cluster)
        self.cap: dict[str, np.ndarray] = {q: cap for q, (cap, _) in totals.items()}
        self.load = {q: _load(cap, used) for q, (cap, used) in totals.items()}

    def share(self, job: Job, queue: str) -> float:
        """The job's dominant share of the queue's capacity; a whole-node job counts each node it
        takes whole (the smallest eligible node that holds its demand)."""
        cap = self.cap[queue]
        demand = job.demand
        if job.exclusive:
            demand = self.cluster.whole_node(self.cluster.eligible(queue, job.labels), demand)
        need = [job.nodes * demand[r] / cap[r] for r in range(3) if cap[r] > 0]
        return float(max(need, default=1.0))

    def can_run(self, job: Job, queue: str) -> bool:
        elig = self.cluster.eligible(queue, job.labels)
        return self.cluster.capacity_counts(elig, job.demand)[1] >= job.nodes

    def fits_now(self, job: Job) -> bool:
        elig = self.cluster.eligible(job.queue, job.labels)
        free = elig.take(self.free.T).T
        ok = (free >= np.asarray(job.demand)[:, None]).all(axis=0)
        if job.exclusive:  # whole nodes: only an idle node holds it
            ok &= (free >= elig.take(self.cluster.cap.T).T).all(axis=0)
        return int(ok.sum()) >= job.nodes


def _load(cap: np.ndarray, used: np.ndarray) -> float:
    """The dominant share; computed on Python floats, as numpy would, without its per-scalar cost."""
    c, u = cap.tolist(), used.tolist()
    shares = [float(u[r]) / float(c[r]) for r in range(3) if c[r] > 0]
    return max(shares) if shares else 1.0


def _queue_totals(cluster: ClusterIndex) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Each queue's (capacity, allocation) over its usable nodes, of the whole cluster."""
    whole = cluster.whole
    if whole is not None:
        return {q: (np.asarray(cap), np.asarray(whole.queue_used.get(q, (0, 0, 0))))
                for q, cap in whole.queue_cap.items()}
    out = {}
    for q, sl in cluster.queues.items():
        cap, alloc, up = cluster.cap[:, sl], cluster.alloc[:, sl], cluster.usable[sl]
        # most queues have every node up: spare the copies a mask makes. The ufuncs are called
        # directly: on a small queue, ndarray.all/sum's Python wrappers cost as much as the work
        if not np.logical_and.reduce(up):
            cap, alloc = cap[:, up], alloc[:, up]
        out[q] = (np.add.reduce(cap, axis=1), np.add.reduce(alloc, axis=1))
    return out


def queue_loads(cluster: ClusterIndex) -> dict[str, float]:
    """Each queue's load (what QueueFacts reads, without the free-now arrays it also builds)."""
    return {q: _load(cap, used) for q, (cap, used) in _queue_totals(cluster).items()}


def balance(
    cluster: ClusterIndex, jobs: Sequence[Job], running: Sequence[RunningJob], now: float,
    grain: int, params: MigrationParams,
) -> Balanced:
    facts = QueueFacts(cluster)
    if params.mode == "dynamic":
        return _dynamic(facts, jobs, running, now, grain, params.weight)
    return _static(facts, jobs, params.threshold)


def _fcfs(jobs: Sequence[Job]) -> list[Job]:
    return sorted(jobs, key=lambda j: (j.submit_time, j.id))


def _static(facts: QueueFacts, jobs: Sequence[Job], threshold: float) -> Balanced:
    over = {q for q, load in facts.load.items() if load > threshold}
    projected = dict(facts.load)
    kept: list[Job] = []
    moves: list[Migration] = []
    stuck: set[str] = set()
    for job in _fcfs(jobs):
        if job.queue not in over or job.migrated or facts.fits_now(job):
            kept.append(job)
            continue
        targets = [(projected[q], q) for q in projected
                   if q != job.queue and projected[q] < threshold and facts.can_run(job, q)]
        if not targets:
            kept.append(job)
            stuck.add(job.queue)
            continue
        load, target = min(targets)
        projected[target] = load + facts.share(job, target)
        kept.append(replace(job, queue=target, migrated=True))
        moves.append(Migration(
            job.id, job.queue, target,
            f"queue {job.queue} load {facts.load[job.queue]:.3f} > threshold {threshold}; "
            f"{target} is the least loaded queue able to run it ({load:.3f})",
            {"from_load": facts.load[job.queue], "to_load": load, "threshold": threshold},
        ))
    return Balanced(kept, moves, frozenset(stuck))


def _remaining_work(
    facts: QueueFacts, running: Sequence[RunningJob], now: float, grain: int
) -> dict[str, float]:
    """Share·seconds the running jobs of each queue's nodes still hold."""
    if isinstance(running, RunningColumns):
        return _remaining_work_held(facts, now, grain)
    work = dict.fromkeys(facts.cap, 0.0)
    for rj in running:
        left = release_time(rj.end_time, now, grain) - now
        for node_id, d in rj.alloc:
            x = facts.cluster.pos.get(node_id)
            if x is None:
                continue
            for q in facts.cluster.serves[x]:  # a node of several queues is busy for each
                cap = facts.cap[q]
                share = max((d[r] / cap[r] for r in range(3) if cap[r] > 0), default=0.0)
                work[q] += share * left
    return work


def _remaining_work_held(facts: QueueFacts, now: float, grain: int) -> dict[str, float]:
    """`_remaining_work` from the pass's holdings, built from running jobs given as columns (in their
    records' order, so each queue's sum adds the same floats in the same order: cumsum is sequential)
    without a record per job."""
    cluster = facts.cluster
    xs, ends, amounts = cluster.held
    left = release_times(ends, now, grain) - now
    work = dict.fromkeys(facts.cap, 0.0)
    for q, cap in facts.cap.items():
        member = np.zeros(len(cluster), dtype=bool)
        member[cluster.queues.get(q, slice(0, 0))] = True
        at = member[xs]
        if not at.any():
            continue
        share = np.zeros(np.count_nonzero(at))
        for r in range(3):
            if cap[r] > 0:
                share = np.maximum(share, amounts[r, at] / cap[r])
        work[q] = float(np.cumsum(share * left[at])[-1])
    return work


def _dynamic(
    facts: QueueFacts, jobs: Sequence[Job], running: Sequence[RunningJob], now: float,
    grain: int, weight: float,
) -> Balanced:
    ahead = _remaining_work(facts, running, now, grain)
    waits: dict[str, float] = {}
    by_queue: dict[str, list[Job]] = {}
    for job in _fcfs(jobs):
        q = job.queue
        if q not in facts.cap:
            continue
        waits[job.id] = 0.0 if facts.fits_now(job) else ahead[q]
        ahead[q] += facts.share(job, q) * job.walltime_s
        by_queue.setdefault(q, []).append(job)
    moved: dict[str, Job] = {}
    moves: list[Migration] = []
    for q in sorted(by_queue):
        _balance_queue(facts, q, by_queue[q], waits, ahead, weight, moved, moves)
    kept = [moved.get(j.id, j) for j in jobs]
    return Balanced(kept, moves, frozenset())


def _balance_queue(
    facts: QueueFacts, q: str, queued: list[Job], waits: dict[str, float],
    ahead: dict[str, float], weight: float, moved: dict[str, Job], moves: list[Migration],
) -> None:
    """Move jobs out of queue q when its waiting cost exceeds its migration cost."""
    movable = [j for j in queued if waits[j.id] > 0 and not j.migrated
               and any(facts.can_run(j, t) for t in facts.cap if t != q)]
    wait_cost = sum(waits[j.id] * facts.share(j, q) for j in movable)
    move_cost = sum(j.walltime_s * facts.share(j, q) * weight for j in movable)
    if wait_cost <= move_cost:
        return

    def best_target(job: Job) -> tuple[float, str]:
        return min((ahead[t], t) for t in facts.cap if t != q and facts.can_run(job, t))

    for job in sorted(movable, key=lambda j: (-(waits[j.id] - best_target(j)[0]), j.id)):
        target_wait, target = best_target(job)
        if waits[job.id] - target_wait <= 0 or waits[job.id] <= weight * job.walltime_s:
            continue
        ahead[target] += facts.share(job, target) * job.walltime_s
        moved[job.id] = replace(job, queue=target, migrated=True)
        moves.append(Migration(
            job.id, q, target,
            f"waiting cost {wait_cost:.0f} > migration cost {move_cost:.0f} in queue {q}; "
            f"expected wait {waits[job.id]:.0f}s here, {target_wait:.0f}s in {target}",
            {"waiting_cost": wait_cost, "migration_cost": move_cost,
             "expected_wait_s": waits[job.id], "expected_wait_target_s": target_wait},
        ))

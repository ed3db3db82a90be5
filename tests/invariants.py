"""check_decision: every rule a decision must keep, as a list of violations (empty = sound).

Independent of the core's data structures: it rebuilds the timeline the decision implies from the
snapshot and the decision alone, and checks it at every instant where something changes.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from app.sched.model import Decision, Job, Node, NodeState, Reason, Snapshot, StartKind
from app.sched.timeline import align_up, release_time

Usage = list[tuple[float, float, tuple[int, int, int], str]]  # [start, end), amount, who


def check_decision(snap: Snapshot, jobs: Sequence[Job], d: Decision, grain: int = 60) -> list[str]:
    queue_of = _effective_queues(jobs, d)
    problems = _bookkeeping(jobs, d)
    problems += _eligibility(snap, jobs, d, queue_of)
    problems += _capacity(snap, jobs, d, grain)
    problems += _never_fits(snap, jobs, d, queue_of)
    problems += _migrated_rank(jobs, d, queue_of)
    problems += _times(snap, jobs, d, grain)
    problems += _windows(snap, jobs, d, grain)
    problems += _exclusive_alone(snap, jobs, d, grain)
    return problems


def _effective_queues(jobs: Sequence[Job], d: Decision) -> dict[str, str]:
    queue_of = {j.id: j.queue for j in jobs}
    for m in d.migrations:
        queue_of[m.job_id] = m.to_queue
    return queue_of


def _bookkeeping(jobs: Sequence[Job], d: Decision) -> list[str]:
    ids = sorted(j.id for j in jobs)
    answered = sorted([s.job_id for s in d.starts] + [r.job_id for r in d.reservations]
                      + [p.job_id for p in d.pending])
    out = []
    if answered != ids:
        out.append(f"answered ids {answered} != pending ids {ids}")
    if sorted(p.job_id for p in d.priorities) != ids:
        out.append("priorities do not cover every pending job exactly once")
    if not {m.job_id for m in d.migrations} <= set(ids):
        out.append("a migration names a job that is not pending")
    return out


def _eligibility(snap: Snapshot, jobs: Sequence[Job], d: Decision,
                 queue_of: dict[str, str]) -> list[str]:
    nodes = {n.id: n for n in snap.nodes}
    by_id = {j.id: j for j in jobs}
    out = []
    placed = [(s.job_id, s.node_ids) for s in d.starts]
    placed += [(r.job_id, r.node_ids) for r in d.reservations]
    for jid, node_ids in placed:
        job = by_id[jid]
        if len(set(node_ids)) != job.nodes or len(node_ids) != job.nodes:
            out.append(f"{jid}: placed on {node_ids}, needs {job.nodes} distinct nodes")
        for nid in node_ids:
            n = nodes[nid]
            if n.state != NodeState.UP:
                out.append(f"{jid}: placed on {nid} which is {n.state}")
            if queue_of[jid] not in n.serves:
                out.append(f"{jid}: placed on {nid} of queue {'/'.join(n.serves)}, not {queue_of[jid]}")
            if not job.labels <= n.labels:
                out.append(f"{jid}: node {nid} lacks labels {set(job.labels - n.labels)}")
    return out


def _usage(snap: Snapshot, jobs: Sequence[Job], d: Decision, grain: int) -> dict[str, Usage]:
    """Every holding the decision implies, per node, over [start, end)."""
    by_id = {j.id: j for j in jobs}
    nodes = {n.id: n for n in snap.nodes}
    use: dict[str, Usage] = defaultdict(list)

    def takes(job: Job, nid: str) -> tuple[int, int, int]:  # a whole-node job takes it all
        return nodes[nid].cap if job.exclusive else job.demand

    for rj in snap.running:
        end = release_time(rj.end_time, snap.now, grain)
        for nid, amount in rj.alloc:
            use[nid].append((snap.now, end, amount, rj.id))
    for s in d.starts:
        job = by_id[s.job_id]
        end = release_time(snap.now + job.walltime_s, snap.now, grain)
        for nid in s.node_ids:
            use[nid].append((snap.now, end, takes(job, nid), s.job_id))
    for r in d.reservations:
        for nid in r.node_ids:
            use[nid].append((r.start_time, r.end_time, takes(by_id[r.job_id], nid), r.job_id))
    return use


def _capacity(snap: Snapshot, jobs: Sequence[Job], d: Decision, grain: int) -> list[str]:
    """At every instant, on every node, what is held fits what the node offers.

    This covers "no node over-committed", "no backfill delays a reservation" and "every
    reservation fits its nodes at its time" at once. In numpy over all holdings at once (each
    holding's start against the holdings of its node), so 10,000 nodes take a moment, not minutes.
    """
    index = {n.id: i for i, n in enumerate(snap.nodes)}
    held = [(index[nid], *h) for nid, hs in _usage(snap, jobs, d, grain).items() if nid in index
            for h in hs]
    if not held:
        return []
    held.sort(key=lambda h: (h[0], h[1]))  # by node, then instant
    node = np.array([h[0] for h in held], dtype=np.int64)
    start = np.array([h[1] for h in held], dtype=float)
    end = np.array([h[2] for h in held], dtype=float)
    amount = np.array([h[3] for h in held], dtype=np.int64).reshape(-1, 3)
    a, b = _same_node_pairs(node)
    active = (start[b] <= start[a]) & (start[a] < end[b])
    a, b = a[active], b[active]
    totals = np.stack([np.bincount(a, weights=amount[b, r], minlength=len(held)) for r in range(3)], axis=1)
    offer = _offers(snap, index)[node]
    over = np.flatnonzero((totals > offer).any(axis=1))
    out, seen = [], set()
    for i in over:
        if (node[i], start[i]) in seen:
            continue  # the same instant on the same node
        seen.add((node[i], start[i]))
        who = sorted(held[j][4] for j in b[a == i])
        out.append(f"node {snap.nodes[node[i]].id} over-committed at {start[i].item()}: "
                   f"{totals[i].astype(np.int64).tolist()} > {offer[i].tolist()} by {who}")
    return out


def _same_node_pairs(node: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every (a, b) of holdings on the same node, `node` sorted."""
    _, first, count = np.unique(node, return_index=True, return_counts=True)
    size, base = np.repeat(count, count), np.repeat(first, count)  # per holding: its node's group
    a = np.repeat(np.arange(len(node)), size)
    offset = np.arange(len(a)) - np.repeat(np.cumsum(size) - size, size)
    return a, np.repeat(base, size) + offset


def _offers(snap: Snapshot, index: dict[str, int]) -> np.ndarray:
    """What each node offers the holdings: capacity less what is allocated outside the running jobs."""
    held = np.array([(index[nid], *amount) for rj in snap.running for nid, amount in rj.alloc
                     if nid in index], dtype=np.int64).reshape(-1, 4)
    running_sum = np.stack([np.bincount(held[:, 0], weights=held[:, r + 1], minlength=len(snap.nodes))
                            for r in range(3)], axis=1).astype(np.int64).reshape(-1, 3)
    cap = np.array([n.cap for n in snap.nodes], dtype=np.int64).reshape(-1, 3)
    alloc = np.array([n.alloc for n in snap.nodes], dtype=np.int64).reshape(-1, 3)
    return cap - (alloc - running_sum)


class _NodeTable:
    """The nodes as arrays: how many could hold a job, counted by masks, not a loop over the nodes."""

    def __init__(self, nodes: Sequence[Node]) -> None:
        self.nodes = nodes
        self.cap = np.array([n.cap for n in nodes], dtype=np.int64).reshape(-1, 3)
        self.up = np.array([n.state == NodeState.UP for n in nodes], dtype=bool)
        self._masks: dict[tuple[str, str], np.ndarray] = {}
        self._counts: dict[tuple[object, ...], int] = {}

    def _mask(self, kind: str, value: str) -> np.ndarray:
        if (kind, value) not in self._masks:
            has = [(value in n.serves) if kind == "queue" else (value in n.labels) for n in self.nodes]
            self._masks[kind, value] = np.array(has, dtype=bool)
        return self._masks[kind, value]

    def fits_somewhere(self, job: Job, queue: str, usable_only: bool) -> bool:
        key = (queue, job.demand, job.labels, usable_only)
        if key not in self._counts:
            ok = self._mask("queue", queue) & (self.cap >= np.array(job.demand, dtype=np.int64)).all(axis=1)
            for label in job.labels:
                ok &= self._mask("label", label)
            self._counts[key] = int((ok & self.up).sum() if usable_only else ok.sum())
        return self._counts[key] >= job.nodes


def _never_fits(snap: Snapshot, jobs: Sequence[Job], d: Decision,
                queue_of: dict[str, str]) -> list[str]:
    by_id = {j.id: j for j in jobs}
    reason = {p.job_id: p.reason for p in d.pending}
    table = _NodeTable(snap.nodes)
    out = []
    for jid, job in by_id.items():
        could = table.fits_somewhere(job, queue_of[jid], usable_only=False)
        could_up = table.fits_somewhere(job, queue_of[jid], usable_only=True)
        r = reason.get(jid)
        if r == Reason.never_fits and could:
            out.append(f"{jid}: reported never_fits but some node of its queue could hold it")
        if r == Reason.node_down and (could_up or not could):
            out.append(f"{jid}: reported node_down wrongly")
        if r not in (Reason.never_fits, Reason.node_down, Reason.not_evaluated) and not could_up:
            out.append(f"{jid}: cannot run on any usable node but was answered {r or 'placed'}")
    return out


def _migrated_rank(jobs: Sequence[Job], d: Decision, queue_of: dict[str, str]) -> list[str]:
    """Within a queue, every native job ranks above every job migrated into it."""
    rank = {p.job_id: p.rank for p in d.priorities}
    moved = {m.job_id for m in d.migrations} | {j.id for j in jobs if j.migrated}
    out = []
    for q in set(queue_of.values()):
        native = [rank[j] for j, qq in queue_of.items() if qq == q and j not in moved]
        migrated = [rank[j] for j, qq in queue_of.items() if qq == q and j in moved]
        if native and migrated and max(native) > min(migrated):
            out.append(f"queue {q}: a migrated job ranks above a native one")
    return out


def _times(snap: Snapshot, jobs: Sequence[Job], d: Decision, grain: int) -> list[str]:
    by_id = {j.id: j for j in jobs}
    out = []
    for r in d.reservations:
        if r.start_time < snap.now:
            out.append(f"{r.job_id}: reserved at {r.start_time}, before now {snap.now}")
        if r.start_time > snap.now and r.start_time % grain:
            out.append(f"{r.job_id}: reserved start {r.start_time} is off the grain {grain}")
        if r.end_time < align_up(r.start_time + by_id[r.job_id].walltime_s, grain):
            out.append(f"{r.job_id}: reservation ends before its walltime is over")
    reserved_queues = {r.queue for r in d.reservations}
    for s in d.starts:
        if s.kind == StartKind.BACKFILL and s.queue not in reserved_queues:
            out.append(f"{s.job_id}: a backfill in queue {s.queue}, which holds no reservation")
    return out
def _placements(snap: Snapshot, jobs: Sequence[Job], d: Decision,
                grain: int) -> list[tuple[str, tuple[str, ...], float, float]]:
    """(job, nodes, start, end) of every start and reservation; a start ends when its walltime is
    over (unaligned), a reservation at its end."""
    by_id = {j.id: j for j in jobs}
    out = [(s.job_id, s.node_ids, snap.now, snap.now + by_id[s.job_id].walltime_s) for s in d.starts]
    out += [(r.job_id, r.node_ids, r.start_time, r.end_time) for r in d.reservations]
    return out


def _windows(snap: Snapshot, jobs: Sequence[Job], d: Decision, grain: int) -> list[str]:
    """No start or reservation overlaps a maintenance window on any of its nodes."""
    out = []
    for jid, node_ids, start, end in _placements(snap, jobs, d, grain):
        for w in snap.windows:
            if w.end <= snap.now or not (start < w.end and w.start < end):
                continue
            for nid in set(node_ids) & set(w.node_ids):
                out.append(f"{jid}: on {nid} over [{start}, {end}), into window {w.id} "
                           f"[{w.start}, {w.end})")
    return out


def _exclusive_alone(snap: Snapshot, jobs: Sequence[Job], d: Decision, grain: int) -> list[str]:
    """A whole-node job shares none of its nodes, at any instant of its run, with another job
    (running, started or reserved) or with usage no job explains."""
    by_id = {j.id: j for j in jobs}
    use = _usage(snap, jobs, d, grain)
    nodes = {n.id: n for n in snap.nodes}
    out = []
    for jid, node_ids, start, end in _placements(snap, jobs, d, grain):
        if not by_id[jid].exclusive:
            continue
        for nid in node_ids:
            others = sorted(h[3] for h in use[nid] if h[3] != jid and h[0] < end and start < h[1])
            if others:
                out.append(f"{jid} (whole nodes) shares {nid} with {others}")
            explained = [0, 0, 0]
            for rj in snap.running:
                for rn, amount in rj.alloc:
                    if rn == nid:
                        explained = [a + b for a, b in zip(explained, amount, strict=True)]
            if list(nodes[nid].alloc) != explained:  # that usage lasts: the node is never idle
                out.append(f"{jid} (whole nodes) is placed on {nid}, which has usage no job explains")
    return out

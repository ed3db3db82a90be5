"""Cluster cache use cases' pure parts: applying a PATCH's changes to a stored snapshot, checking the
result like an inline snapshot, and summarising its label partitions."""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from app.convert import check_snapshot, snapshot_from_wire
from app.errors import ErrorDetail, InputError
from app.sched.partitions import offered_labels
from app.sched.selectors.fragment import fragment_scores
from schemas.clusters import (
    ClusterPatch,
    ClusterPut,
    JobEnded,
    JobStarted,
    NodeAdded,
    NodeRemoved,
    NodeStateChanged,
    PartitionOut,
)
from schemas.schedule import ScheduleRequest


def checked(state: ClusterPut, where: tuple[str, ...] = ("body",)) -> ClusterPut:
    """The snapshot, allocations derived from its running jobs, after the checks of POST /schedule."""
    if any(n.allocated is not None for n in state.nodes):
        nodes = [n.model_copy(update={"allocated": None}) if n.allocated is not None else n
                 for n in state.nodes]
        state = ClusterPut(nodes=nodes, running=state.running)
    try:
        check_snapshot(ScheduleRequest(now=0, nodes=state.nodes, running=state.running))
    except InputError as exc:
        raise InputError([ErrorDetail((*where, *e.loc[1:]), e.msg, e.type) for e in exc.errors]) from exc
    return state


def apply_changes(state: ClusterPut, patch: ClusterPatch) -> ClusterPut:
    """A new snapshot with every change applied in order; InputError names the first change that
    cannot apply (and nothing is applied)."""
    nodes = {n.id: n for n in state.nodes}
    running = {r.id: r for r in state.running}
    for i, change in enumerate(patch.changes):
        loc = ("body", "changes", i)
        if isinstance(change, JobStarted):
            if change.job.id in running:
                raise InputError.single((*loc, "job", "id"), f"job {change.job.id!r} is already running")
            running[change.job.id] = change.job
        elif isinstance(change, JobEnded):
            if running.pop(change.job_id, None) is None:
                raise InputError.single((*loc, "job_id"), f"no running job {change.job_id!r}", "unknown")
        elif isinstance(change, NodeAdded):
            if change.node.id in nodes:
                raise InputError.single((*loc, "node", "id"), f"node {change.node.id!r} exists", "duplicate")
            nodes[change.node.id] = change.node
        elif isinstance(change, NodeRemoved | NodeStateChanged):
            if change.node_id not in nodes:
                raise InputError.single((*loc, "node_id"), f"no node {change.node_id!r}", "unknown")
            if isinstance(change, NodeRemoved):
                del nodes[change.node_id]
            else:
                nodes[change.node_id] = nodes[change.node_id].model_copy(update={"state": change.state})
    return checked(ClusterPut(nodes=list(nodes.values()), running=list(running.values())))


def partitions(state: ClusterPut) -> list[PartitionOut]:
    """Each label partition of the cluster now: how many nodes offer it, and their fragment scores."""
    req = ScheduleRequest(now=0, nodes=state.nodes, running=state.running)
    snapshot, _ = snapshot_from_wire(req, check_snapshot(req))
    cap = np.array([n.cap for n in snapshot.nodes], dtype=np.int64).T
    free = cap - np.array([n.alloc for n in snapshot.nodes], dtype=np.int64).T
    scores, _ = fragment_scores(cap, free)
    members: dict[str, list[float]] = defaultdict(list)
    for k, node in enumerate(snapshot.nodes):
        f = (int(free[0, k]), int(free[1, k]), int(free[2, k]))
        for label in offered_labels(node, f):
            members[label].append(float(scores[k]))
    return [PartitionOut(label=label, nodes=len(s), score_min=min(s), score_max=max(s))
            for label, s in sorted(members.items())]

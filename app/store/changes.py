"""A PATCH's changes applied, in order, to the records of a cluster being edited. The first change
that cannot apply raises InputError naming it (the store then writes nothing)."""

from __future__ import annotations

from dataclasses import replace

from app.errors import ErrorDetail, InputError
from app.sched.model import Node, NodeState, RunningJob, Window
from app.store.index import Edit, NodeRec
from schemas.cluster import NodeIn, RunningJobIn, WindowIn
from schemas.clusters import (
    ClusterPatch,
    JobEnded,
    JobStarted,
    NodeAdded,
    NodeRemoved,
    WindowAdded,
    WindowRemoved,
)

RES = ("cpu", "mem_mib", "gpu")
Loc = tuple[str | int, ...]


def node_from_wire(n: NodeIn) -> Node:
    """A node as cached: nothing allocated until its running jobs say so (`allocated` is not kept)."""
    queue, queues = n.queue_names()
    return Node(n.id, queue, (n.capacity.cpu, n.capacity.mem_mib, n.capacity.gpu), (0, 0, 0),
                frozenset(n.labels), n.cpu_load, n.cpu_ghz, NodeState(n.state.value), n.weight, queues)


def job_from_wire(r: RunningJobIn) -> RunningJob:
    alloc = tuple((a["node"], (a["cpu"], a["mem_mib"], a["gpu"])) for a in r["allocation"])
    return RunningJob(r["id"], r["queue"], alloc, r["start_time"], r["walltime_s"], r["migrated"])


def apply_patch(edit: Edit, patch: ClusterPatch) -> None:
    for i, change in enumerate(patch.changes):
        loc: Loc = ("body", "changes", i)
        if isinstance(change, JobStarted):
            _start(edit, job_from_wire(change.job), loc)
        elif isinstance(change, JobEnded):
            _end(edit, change.job_id, loc)
        elif isinstance(change, NodeAdded):
            why = change.node.queue_conflict()
            if why is not None:
                raise InputError.single((*loc, "node", "queue"), why, "not_in_queues")
            if edit.node(change.node.id) is not None:
                raise InputError.single((*loc, "node", "id"), f"node {change.node.id!r} exists", "duplicate")
            edit.set_node(change.node.id, NodeRec(node_from_wire(change.node), []))
        elif isinstance(change, WindowAdded):
            _add_window(edit, change.window, loc)
        elif isinstance(change, WindowRemoved):
            if edit.window(change.window_id) is None:
                raise InputError.single((*loc, "window_id"), f"no window {change.window_id!r}", "unknown")
            edit.set_window(change.window_id, None)
        elif isinstance(change, NodeRemoved):
            rec = _existing(edit, change.node_id, loc)
            if rec.jobs:
                raise InputError.single((*loc, "node_id"), f"node {change.node_id!r} still runs "
                                        f"{', '.join(sorted(rec.jobs))}: end them first", "busy")
            edit.set_node(change.node_id, None)
        else:
            rec = _existing(edit, change.node_id, loc)
            edit.set_node(change.node_id, NodeRec(replace(rec.node, state=NodeState(change.state.value)),
                                                  rec.jobs))


def _add_window(edit: Edit, w: WindowIn, loc: Loc) -> None:
    errors: list[ErrorDetail] = []
    if edit.window(w.id) is not None:
        errors.append(ErrorDetail((*loc, "window", "id"), f"window {w.id!r} exists", "duplicate"))
    if w.end <= w.start:
        errors.append(ErrorDetail((*loc, "window", "end"), f"end {w.end} is not after start {w.start}",
                                  "empty_window"))
    seen: set[str] = set()
    for k, nid in enumerate(w.nodes):
        if edit.node(nid) is None or nid in seen:
            what = "unknown node" if nid not in seen else "node listed twice:"
            errors.append(ErrorDetail((*loc, "window", "nodes", k), f"{what} {nid!r}",
                                      "unknown_node" if nid not in seen else "duplicate"))
        seen.add(nid)
    if errors:
        raise InputError(errors)
    edit.set_window(w.id, Window(w.id, tuple(w.nodes), w.start, w.end))


def _existing(edit: Edit, nid: str, loc: Loc) -> NodeRec:
    rec = edit.node(nid)
    if rec is None:
        raise InputError.single((*loc, "node_id"), f"no node {nid!r}", "unknown")
    return rec


def _start(edit: Edit, job: RunningJob, loc: Loc) -> None:
    if edit.job(job.id) is not None:
        raise InputError.single((*loc, "job", "id"), f"job {job.id!r} is already running", "duplicate")
    errors: list[ErrorDetail] = []
    seen: set[str] = set()
    for k, (nid, d) in enumerate(job.alloc):
        where: Loc = (*loc, "job", "allocation", k)
        rec = edit.node(nid)
        if rec is None or nid in seen:
            what = "unknown node" if rec is None else "node listed twice:"
            errors.append(ErrorDetail((*where, "node"), f"{what} {nid!r}",
                                      "unknown_node" if rec is None else "duplicate"))
            continue
        seen.add(nid)
        errors += [ErrorDetail((*where, RES[r]), f"node {nid!r} has {rec.node.cap[r] - rec.node.alloc[r]} "
                               f"{RES[r]} free, the job holds {d[r]}", "over_capacity")
                   for r in range(3) if rec.node.alloc[r] + d[r] > rec.node.cap[r]]
    if errors:
        raise InputError(errors)
    for nid, d in job.alloc:
        _hold(edit, nid, job.id, d, +1)
    edit.set_job(job.id, job)


def _end(edit: Edit, jid: str, loc: Loc) -> None:
    job = edit.job(jid)
    if job is None:
        raise InputError.single((*loc, "job_id"), f"no running job {jid!r}", "unknown")
    for nid, d in job.alloc:
        _hold(edit, nid, jid, d, -1)
    edit.set_job(jid, None)


def _hold(edit: Edit, nid: str, jid: str, d: tuple[int, int, int], sign: int) -> None:
    rec = edit.node(nid)
    assert rec is not None  # a running job's nodes exist: removing a busy node is refused
    n = rec.node
    alloc = (n.alloc[0] + sign * d[0], n.alloc[1] + sign * d[1], n.alloc[2] + sign * d[2])
    jobs = [*rec.jobs, jid] if sign > 0 else [j for j in rec.jobs if j != jid]
    edit.set_node(nid, NodeRec(replace(n, alloc=alloc), jobs))

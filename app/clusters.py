"""Cluster cache use cases' pure parts: checking a snapshot before it is cached, and checking the
pending jobs of a pass against a cached cluster (what `check_snapshot` does for an inline one)."""

from __future__ import annotations

from collections.abc import Callable, Collection

from app.convert import check_snapshot, promise_errors, shape_errors, snapshot_from_wire, window_errors
from app.errors import ErrorDetail, InputError
from app.sched.model import Snapshot
from schemas.cluster import WindowIn
from schemas.clusters import ClusterPut
from schemas.schedule import PendingJobIn, ScheduleRequest


def checked(state: ClusterPut, where: tuple[str, ...] = ("body",)) -> Snapshot:
    """The core snapshot, allocations derived from its running jobs, after the checks of POST /schedule."""
    if any(n.allocated is not None for n in state.nodes):
        nodes = [n.model_copy(update={"allocated": None}) if n.allocated is not None else n
                 for n in state.nodes]
        state = ClusterPut(nodes=nodes, running=state.running, windows=state.windows)
    req = ScheduleRequest(now=0, nodes=state.nodes, running=state.running, windows=state.windows)
    try:
        found = check_snapshot(req)
    except InputError as exc:
        raise InputError([ErrorDetail((*where, *e.loc[1:]), e.msg, e.type) for e in exc.errors]) from exc
    return snapshot_from_wire(req, found)[0]


def check_pending(pending: list[PendingJobIn], total_nodes: int,
                  known_nodes: Callable[[list[str]], Collection[str]],
                  running: Callable[[list[str]], Collection[str]],
                  windows: list[WindowIn] | None = None) -> None:
    """The pending jobs' and the request's windows' cross checks against a cached cluster:
    duplicate ids, a job also running, a promise or a window on an unknown node, more nodes than
    the cluster has, a window ending before it starts. `known_nodes` / `running` say which of the
    ids given exist. Errors come job by job, in the body's order."""
    windows = windows or []
    ids = [p.id for p in pending]
    clashes = _id_errors(ids, set(running(ids)))
    asked = {n for p in pending for n in p.promised_nodes} | {n for w in windows for n in w.nodes}
    nodes = set(known_nodes(sorted(asked)))
    errors = window_errors(windows, ("body", "windows"), nodes)
    for i in sorted(clashes.keys() | _may_be_refused(pending, total_nodes)):
        p = pending[i]
        if i in clashes:
            errors.append(clashes[i])
        if p.nodes > total_nodes:
            errors.append(ErrorDetail(("body", "pending", i, "nodes"), f"asks for {p.nodes} nodes; the "
                                      f"cluster has {total_nodes}", "too_many_nodes"))
        errors += promise_errors(i, p, nodes) + shape_errors(i, p)
    if errors:
        raise InputError(errors)


def _id_errors(ids: list[str], busy: set[str]) -> dict[int, ErrorDetail]:
    """Each pending job whose id came before in the body, or is a running job's."""
    if not busy and len(set(ids)) == len(ids):
        return {}
    seen: set[str] = set()
    out = {}
    for i, jid in enumerate(ids):
        if jid in seen or jid in busy:
            what = "duplicate pending job id" if jid in seen else "already running: job"
            out[i] = ErrorDetail(("body", "pending", i, "id"), f"{what} {jid!r}", "duplicate")
        seen.add(jid)
    return out


def _may_be_refused(pending: list[PendingJobIn], total_nodes: int) -> set[int]:
    """The jobs a per-job check could refuse (too many nodes, a promise, memory per cpu): only
    these are checked one by one (a deep queue is mostly none of them)."""
    return {i for i, p in enumerate(pending) if p.nodes > total_nodes or p.promised_nodes
            or p.promised_start is not None or p.mem_mib_per_cpu is not None}

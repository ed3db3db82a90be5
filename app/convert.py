"""The one adapter between the wire (schemas) and the core (app.sched), and the cross-field checks.

Pydantic checks single fields; what needs two fields or two records (unknown node, duplicate id,
allocation above capacity, more nodes than exist) is checked here, collecting every problem with
its full path, like FastAPI's own 422.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

from app import running_scan
from app.errors import ErrorDetail, InputError
from app.sched import params as core_params
from app.sched.budget import Budget
from app.sched.cluster import NodeColumns, NodeLists
from app.sched.model import (
    Decision,
    Job,
    Node,
    NodeState,
    RunningJob,
    Snapshot,
    Summary,
    Triple,
    Window,
)
from schemas.cluster import NodeIn, RunningJobIn, WindowIn
from schemas.common import MAX_MEM_MIB
from schemas.common import NodeState as WireNodeState
from schemas.schedule import (
    PendingJobIn,
    ScheduleRequest,
    ScheduleResponse,
)

RES = ("cpu", "mem_mib", "gpu")
Loc = tuple[str | int, ...]


def _duplicates(ids: list[str], where: Loc, what: str) -> list[ErrorDetail]:
    if len(set(ids)) == len(ids):  # the usual case, without a loop in Python
        return []
    seen: set[str] = set()
    out = []
    for i, jid in enumerate(ids):
        if jid in seen:
            out.append(ErrorDetail((*where, i, "id"), f"duplicate {what} id {jid!r}", "duplicate"))
        seen.add(jid)
    return out


@dataclass(frozen=True, slots=True)
class Checked:
    """What `check_snapshot` read on its one walk over the running jobs, for `snapshot_from_wire`:
    the sum of what they hold on each node (cpu, mem_mib, gpu) and the core's records of them (or
    their columns, when they were scanned from the body)."""

    held: dict[str, list[int]]
    running: Sequence[RunningJob]


_JOB = itemgetter("id", "queue", "allocation", "start_time", "walltime_s", "migrated")
_ON_NODE = itemgetter("node", "cpu", "mem_mib", "gpu")


def _walk_running(running: list[RunningJobIn], known: set[str],
                  errors: list[ErrorDetail]) -> tuple[dict[str, list[int]], list[RunningJob]]:
    """What the running jobs hold per node, and their records; unknown or repeated nodes become
    errors (not counted in the holdings)."""
    held: dict[str, list[int]] = {}
    records = []
    for i, r in enumerate(running):
        jid, queue, allocation, start, walltime, migrated = _JOB(r)
        if len(allocation) == 1:  # most jobs: one node, so none repeated
            node, cpu, mem, gpu = _ON_NODE(allocation[0])
            pairs: tuple[tuple[str, Triple], ...] = ((node, (cpu, mem, gpu)),)
            acc = held.get(node)
            if acc is not None:
                acc[0] += cpu
                acc[1] += mem
                acc[2] += gpu
            elif node in known:
                held[node] = [cpu, mem, gpu]
            else:
                errors.append(_unknown_node(i, 0, node))
        else:
            pairs = tuple([(a["node"], (a["cpu"], a["mem_mib"], a["gpu"])) for a in allocation])
            _hold(i, pairs, known, held, errors)
        records.append(RunningJob(jid, queue, pairs, start, walltime, migrated))
    return held, records


def _unknown_node(i: int, k: int, node: str) -> ErrorDetail:
    return ErrorDetail(("body", "running", i, "allocation", k, "node"), f"unknown node {node!r}",
                       "unknown_node")


def _hold(i: int, pairs: tuple[tuple[str, Triple], ...], known: set[str],
          held: dict[str, list[int]], errors: list[ErrorDetail]) -> None:
    """Add what a running job holds on each of its nodes; an unknown node, or one listed again, is
    an error and is not counted."""
    seen: set[str] = set()
    for k, (node, amounts) in enumerate(pairs):
        if node not in known:
            errors.append(_unknown_node(i, k, node))
        elif node in seen:
            errors.append(ErrorDetail(("body", "running", i, "allocation", k, "node"),
                                      f"node {node!r} listed twice", "duplicate"))
        else:
            seen.add(node)
            acc = held.setdefault(node, [0, 0, 0])
            for r in range(3):
                acc[r] += amounts[r]


def _node_fits(node: NodeIn, held: list[int] | None) -> bool:
    """No allocation above capacity, none below what the running jobs hold (`_node_errors` says
    which); a cheap test for each node, the messages made only for a node that fails it."""
    c, a = node.capacity, node.allocated
    if a is not None:
        if a.cpu > c.cpu or a.mem_mib > c.mem_mib or a.gpu > c.gpu:
            return False
        return held is None or (held[0] <= a.cpu and held[1] <= a.mem_mib and held[2] <= a.gpu)
    return held is None or (held[0] <= c.cpu and held[1] <= c.mem_mib and held[2] <= c.gpu)


def _node_errors(i: int, node: NodeIn, held: list[int] | None) -> list[ErrorDetail]:
    cap = (node.capacity.cpu, node.capacity.mem_mib, node.capacity.gpu)
    out = []
    for r, name in enumerate(RES):
        loc: Loc = ("body", "nodes", i)
        if node.allocated is not None:
            alloc = (node.allocated.cpu, node.allocated.mem_mib, node.allocated.gpu)[r]
            if alloc > cap[r]:
                out.append(ErrorDetail((*loc, "allocated", name),
                                       f"allocated {alloc} exceeds capacity {cap[r]}",
                                       "over_capacity"))
            elif held is not None and alloc < held[r]:
                out.append(ErrorDetail((*loc, "allocated", name),
                                       f"allocated {alloc} is less than its running jobs hold "
                                       f"({held[r]})", "below_running"))
        if held is not None and held[r] > cap[r]:
            out.append(ErrorDetail((*loc, "capacity", name),
                                   f"running jobs hold {held[r]}, above capacity {cap[r]}",
                                   "over_capacity"))
    return out


def check_snapshot(req: ScheduleRequest, scanned: running_scan.Scanned | None = None) -> Checked:
    """Raise InputError listing every cross-field problem of the request.

    Returns what the running jobs hold on each node and their records, for `snapshot_from_wire`.
    With `scanned` (the running jobs read from the body by `running_scan.split`; `req.running` is
    then empty), it checks their columns instead and raises `running_scan.Fallback` at the first
    problem of any kind: the ordinary parse and checks then name them all.
    """
    nodes, running, pending = req.nodes or [], req.running, req.pending
    node_ids = [n.id for n in nodes]
    known = set(node_ids)
    running_ids = [r["id"] for r in running]
    errors = _duplicates(node_ids, ("body", "nodes"), "node")
    errors += _duplicates(running_ids, ("body", "running"), "running job")
    errors += _duplicates([p.id for p in pending], ("body", "pending"), "pending job")
    also_running = set(running_ids)
    for i, p in enumerate(pending):
        if p.id in also_running:
            errors.append(ErrorDetail(("body", "pending", i, "id"),
                                      f"job {p.id!r} is also listed as running", "duplicate"))
        if p.promised_nodes or p.promised_start is not None:
            errors += promise_errors(i, p, known)
        if p.mem_mib_per_cpu is not None:
            errors += shape_errors(i, p)
        if p.nodes > len(nodes):
            errors.append(ErrorDetail(("body", "pending", i, "nodes"),
                                      f"asks for {p.nodes} nodes; the cluster has "
                                      f"{len(nodes)}", "too_many_nodes"))
    records: Sequence[RunningJob]
    if scanned is None:
        held, records = _walk_running(running, known, errors)
    elif errors or req.cluster_id is not None:
        raise running_scan.Fallback
    else:
        held, records = running_scan.columns(scanned, node_ids, [p.id for p in pending])
    for i, node in enumerate(nodes):
        h = held.get(node.id)
        if not _node_fits(node, h):
            errors += _node_errors(i, node, h)
        if node.queues:
            errors += node_queue_errors(("body", "nodes", i), node)
    errors += window_errors(req.windows, ("body", "windows"), known)
    if errors and scanned is not None:
        raise running_scan.Fallback
    if errors:
        raise InputError(errors)
    return Checked(held, tuple(records) if scanned is None else records)


def promise_errors(i: int, p: PendingJobIn, node_ids: set[str]) -> list[ErrorDetail]:
    loc = ("body", "pending", i)
    if (p.promised_start is None) != (not p.promised_nodes):
        return [ErrorDetail((*loc, "promised_nodes"), "give promised_start and promised_nodes together")]
    if p.promised_nodes and len(p.promised_nodes) != p.nodes:
        return [ErrorDetail((*loc, "promised_nodes"), f"{len(p.promised_nodes)} promised nodes for a job "
                            f"of {p.nodes} nodes")]
    return [ErrorDetail((*loc, "promised_nodes", k), f"unknown node {n!r}", "unknown")
            for k, n in enumerate(p.promised_nodes) if n not in node_ids]


def shape_errors(i: int, p: PendingJobIn) -> list[ErrorDetail]:
    """A pending job's per-node memory given twice, or too large once multiplied out."""
    loc = ("body", "pending", i, "mem_mib_per_cpu")
    if p.mem_mib_per_cpu is None:
        return []
    if "mem_mib" in p.model_fields_set:
        return [ErrorDetail(loc, "give mem_mib (per node) or mem_mib_per_cpu, not both", "conflict")]
    if p.cpu * p.mem_mib_per_cpu > MAX_MEM_MIB:  # the bound of mem_mib
        return [ErrorDetail(loc, f"cpu x mem_mib_per_cpu exceeds {MAX_MEM_MIB} MiB per node",
                            "too_large")]
    return []


def node_queue_errors(loc: Loc, n: NodeIn) -> list[ErrorDetail]:
    """`queue` given beside `queues` must be one of them."""
    why = n.queue_conflict()
    return [] if why is None else [ErrorDetail((*loc, "queue"), why, "not_in_queues")]


def window_errors(windows: list[WindowIn], where: Loc, node_ids: Collection[str]) -> list[ErrorDetail]:
    """Duplicate ids, an end not after its start, unknown or repeated nodes."""
    errors = _duplicates([w.id for w in windows], where, "window")
    for i, w in enumerate(windows):
        loc = (*where, i)
        if w.end <= w.start:
            errors.append(ErrorDetail((*loc, "end"), f"end {w.end} is not after start {w.start}",
                                      "empty_window"))
        seen: set[str] = set()
        for k, nid in enumerate(w.nodes):
            if nid not in node_ids:
                errors.append(ErrorDetail((*loc, "nodes", k), f"unknown node {nid!r}", "unknown_node"))
            elif nid in seen:
                errors.append(ErrorDetail((*loc, "nodes", k), f"node {nid!r} listed twice", "duplicate"))
            seen.add(nid)
    return errors


def window_from_wire(w: WindowIn) -> Window:
    return Window(w.id, tuple(w.nodes), w.start, w.end)


_STATES = {state: NodeState(state.value) for state in WireNodeState}


def _node(n: NodeIn, held: dict[str, list[int]], labels: dict[tuple[str, ...], frozenset[str]]) -> Node:
    return Node(*_node_fields(n, held, labels))


def _node_fields(n: NodeIn, held: dict[str, list[int]],
                 labels: dict[tuple[str, ...], frozenset[str]]) -> tuple[Any, ...]:
    """A wire node's fields, in `Node`'s order: its allocation as sent, or what the running jobs
    hold on it."""
    c, a = n.capacity, n.allocated
    if a is not None:
        alloc = (a.cpu, a.mem_mib, a.gpu)
    else:
        h = held.get(n.id, (0, 0, 0))
        alloc = (h[0], h[1], h[2])
    queue, queues = n.queue_names() if n.queues else (n.queue, ())
    return (n.id, queue, (c.cpu, c.mem_mib, c.gpu), alloc, _shared(labels, n.labels), n.cpu_load, n.cpu_ghz,
            _STATES[n.state], n.weight, queues)


def _shared(sets: dict[tuple[str, ...], frozenset[str]], labels: list[str]) -> frozenset[str]:
    """One frozenset for each list of labels: nodes of a type share theirs."""
    key = tuple(labels)
    found = sets.get(key)
    if found is None:
        found = sets[key] = frozenset(labels)
    return found


def job_from_wire(p: PendingJobIn) -> Job:
    mem = p.mem_mib if p.mem_mib_per_cpu is None else p.cpu * p.mem_mib_per_cpu
    return Job(p.id, p.queue, p.submit_time, p.walltime_s, p.nodes, p.cpu, mem, p.gpu,
               p.user, p.priority, p.user_priority, p.queue_priority, p.vip,
               frozenset(p.labels), promise_start=p.promised_start,
               promise_nodes=tuple(p.promised_nodes), exclusive=p.exclusive)


def snapshot_from_wire(req: ScheduleRequest, checked: Checked,
                       columns: bool = False) -> tuple[Snapshot, list[Job]]:
    """The core's snapshot and jobs; `checked` is what check_snapshot returned. With `columns` (a
    decision over the whole snapshot), its nodes are `NodeLists`, records made only if read, and the
    snapshot carries their columns: the decision reads those, with no record per node."""
    labels: dict[tuple[str, ...], frozenset[str]] = {}
    windows = tuple(window_from_wire(w) for w in req.windows)
    jobs = [job_from_wire(p) for p in req.pending]
    if not columns:
        nodes = tuple([_node(n, checked.held, labels) for n in req.nodes or []])
        return Snapshot(req.now, nodes, checked.running, windows=windows), jobs
    lists = _node_lists(req.nodes or [], checked.held, labels)
    cols = NodeColumns.of_lists(lists, checked.running)
    return Snapshot(req.now, lists, checked.running, windows=windows, columns=cols), jobs


def _node_lists(nodes: list[NodeIn], held: dict[str, list[int]],
                labels: dict[tuple[str, ...], frozenset[str]]) -> NodeLists:
    """`_node`'s fields of every node, one list per field."""
    if not nodes:
        return NodeLists([], [], [], [], [], [], [], [], [], [])
    return NodeLists(*map(list, zip(*(_node_fields(n, held, labels) for n in nodes), strict=True)))


_PARAMS: dict[str, type[core_params.CommonParams]] = {
    "fcfs": core_params.FcfsParams,
    "firstfit": core_params.FirstfitParams,
    "easy": core_params.EasyParams,
    "conservative": core_params.ConservativeParams,
    "memory_backfill": core_params.MemoryBackfillParams,
    "priority": core_params.PriorityParams,
}


def params_from_wire(policy: object) -> tuple[str, core_params.CommonParams]:
    """(policy name, core params) from a wire PolicySpec."""
    name: str = policy.name  # type: ignore[attr-defined]
    fields = policy.params.model_dump()  # type: ignore[attr-defined]
    mig = fields.pop("migration")
    fields["evaluation"] = core_params.EvaluationParams(**fields["evaluation"])
    fields["migration"] = core_params.MigrationParams(**mig) if mig is not None else None
    return name, _PARAMS[name](**fields)


def _with_parts(factors: dict[str, float], parts: dict[str, float] | None) -> dict[str, float]:
    if not parts:
        return factors
    return {**factors, **{f"preset_{k}": v for k, v in parts.items()}}


def decision_to_wire(d: Decision, policy: str, timing_ms: dict[str, float],
                     budget: Budget | None = None) -> ScheduleResponse:
    """The wire answer, validated: `decision_dict` checked against ScheduleResponse."""
    return ScheduleResponse.model_validate(decision_dict(d, policy, timing_ms, budget))


def decision_dict(d: Decision, policy: str, timing_ms: dict[str, float],
                  budget: Budget | None = None, cluster_version: int | None = None,
                  preset_parts: dict[str, dict[str, float]] | None = None) -> dict[str, Any]:
    """The wire answer as plain JSON data, exactly what ScheduleResponse dumps (tested): the route
    serializes this directly, since building and checking models for a decision over 10^5 pending
    jobs (2·10^5 records) took longer than the decision's whole budget. `preset_parts`: each job's
    `priority_factors` as sent, added to its factors as `preset_<name>`."""
    s = d.summary
    parts = preset_parts or {}
    return {
        "starts": [{"job_id": x.job_id, "node_ids": list(x.node_ids), "kind": x.kind.value,
                    "queue": x.queue, "expected_end": x.expected_end} for x in d.starts],
        "reservations": [{"job_id": r.job_id, "node_ids": list(r.node_ids), "queue": r.queue,
                          "start_time": r.start_time, "end_time": r.end_time} for r in d.reservations],
        "migrations": [{"job_id": m.job_id, "from_queue": m.from_queue, "to_queue": m.to_queue,
                        "reason": m.reason, "figures": m.figures} for m in d.migrations],
        "pending": [{"job_id": p.job_id, "queue": p.queue, "reason": p.reason.value,
                     "estimated_start": p.estimated_start, "detail": p.detail} for p in d.pending],
        "priorities": [{"job_id": p.job_id, "priority": p.priority, "rank": p.rank,
                        "factors": _with_parts(p.factors, parts.get(p.job_id))} for p in d.priorities],
        "summary": {
            "policy": policy, "started": s.started, "backfilled": s.backfilled, "reserved": s.reserved,
            "migrated": s.migrated, "pending": s.pending, "not_evaluated": s.not_evaluated,
            "nodes_total": s.nodes_total, "nodes_examined": s.nodes_examined,
            "queue_load": s.queue_load, "timing_ms": timing_ms, "budget": _budget_dict(s, budget),
            "cluster_version": cluster_version,
        },
    }


def _budget_dict(s: Summary, budget: Budget | None) -> dict[str, Any] | None:
    if budget is None:
        return None
    return {"time_s": budget.time_s, "max_jobs": budget.max_jobs, "jobs_considered": s.jobs_considered,
            "hit": s.budget_hit}

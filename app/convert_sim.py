"""The adapter between POST /simulate's wire models (schemas.simulate) and the simulator (app.sim)."""

from __future__ import annotations

from app.convert import params_from_wire
from app.errors import ErrorDetail, InputError
from app.sched.params import CommonParams
from app.sim.metrics import per_queue, run_metrics
from app.sim.replay import ReplayResult
from app.sim.swf import SwfError, SwfJob, SwfTrace, read_swf
from app.sim.workload import Machine, Reading, Workload, default_machine, partitioned, workload
from schemas.common import MAX_NODES
from schemas.simulate import MachineIn, SimJobIn, SimulateRequest, SimulateResponse


def _trace_from_jobs(jobs: list[SimJobIn]) -> SwfTrace:
    seen: set[str] = set()
    errors = []
    for i, j in enumerate(jobs):
        if j.id in seen:
            errors.append(ErrorDetail(("body", "jobs", i, "id"), f"duplicate job id {j.id!r}", "duplicate"))
        seen.add(j.id)
    if errors:
        raise InputError(errors)
    trace = SwfTrace()
    queues = {q: k for k, q in enumerate(sorted({j.queue for j in jobs if j.queue}))}
    trace.queues = {k: q for q, k in queues.items()}
    trace.jobs = [SwfJob(j.id, j.submit, -1, j.run, j.procs, -1, j.procs, j.estimate or -1,
                         j.mem_kb_per_proc or -1, 1, -1, -1, queues.get(j.queue, -1), -1) for j in jobs]
    return trace


def workload_from_wire(req: SimulateRequest, max_jobs: int) -> tuple[Workload, str, CommonParams]:
    """The replay's workload, policy and parameters; 422 for a bad trace or one over `max_jobs`."""
    if (req.swf is None) == (req.jobs is None):
        raise InputError.single(("body",), "give the trace as `swf` text or as `jobs`, exactly one")
    if req.swf is not None:
        try:
            trace = read_swf(req.swf.encode(), limit=max_jobs + 1)
        except SwfError as exc:
            raise InputError.single(("body", "swf"), str(exc), "swf_syntax") from exc
        where: tuple[str, ...] = ("body", "swf")
    else:
        trace, where = _trace_from_jobs(req.jobs or []), ("body", "jobs")
    if len(trace.jobs) > max_jobs:
        raise InputError.single(where, f"more than {max_jobs} jobs: this endpoint replays at most "
                                f"{max_jobs} (HPCSCHED_SIM_MAX_JOBS); use the `hpcsched simulate` command "
                                "for long traces", "too_long")
    if not trace.jobs:
        raise InputError.single(where, "the trace has no job", "too_short")
    m = req.machine
    machine = (Machine(m.nodes, m.cores_per_node, m.mem_mib_per_node) if m.nodes
               else default_machine(trace, m.cores_per_node, m.mem_mib_per_node))
    if machine.nodes > MAX_NODES:  # the trace's MaxProcs (or widest job) says so: the schema bounds the rest
        raise InputError.single(where, f"the trace's machine would have {machine.nodes} nodes (MaxProcs, or "
                                f"the widest job, over cores_per_node); at most {MAX_NODES}: give "
                                "machine.nodes", "too_large")
    name, params = params_from_wire(req.policy)
    return _split(workload(trace, machine, Reading(**req.reading.model_dump())), m), name, params


def _split(w: Workload, m: MachineIn) -> Workload:
    if not (m.split_queues or m.queue_nodes):
        return w
    if m.queue_nodes and m.nodes and sum(m.queue_nodes.values()) != m.nodes:
        raise InputError.single(("body", "machine", "queue_nodes"),
                                f"the queues' nodes add up to {sum(m.queue_nodes.values())}, not to "
                                f"machine.nodes {m.nodes}", "bad_split")
    if m.queue_nodes and sum(m.queue_nodes.values()) > MAX_NODES:
        raise InputError.single(("body", "machine", "queue_nodes"),
                                f"the queues' nodes add up to more than {MAX_NODES}", "too_large")
    try:
        return partitioned(w, m.queue_nodes)
    except ValueError as exc:
        field = "queue_nodes" if m.queue_nodes else "split_queues"
        raise InputError.single(("body", "machine", field), str(exc), "bad_split") from exc


def result_to_wire(w: Workload, result: ReplayResult, timing: dict[str, float]) -> SimulateResponse:
    m = w.machine
    return SimulateResponse(
        jobs=len(w.jobs),
        machine=MachineIn(nodes=m.nodes, cores_per_node=m.cores_per_node,
                          mem_mib_per_node=m.mem_mib_per_node, split_queues=bool(m.queues),
                          queue_nodes=dict(m.queues) or None),
        metrics=run_metrics(result, m), per_queue=per_queue(result), notes=result.notes, timing_ms=timing,
    )

"""Use cases: what each endpoint does, free of HTTP."""

from __future__ import annotations

import time
import uuid

from app.clusters import apply_changes, checked, partitions
from app.convert import check_snapshot, decision_to_wire, params_from_wire, snapshot_from_wire
from app.convert_dag import DagLimits, plan_to_wire, problem_from_wire
from app.convert_sim import result_to_wire, workload_from_wire
from app.errors import NotFoundError, StoreUnavailableError, VersionConflictError
from app.sched.registry import decide
from app.sched.registry import plan_dag as run_planner
from app.sim.replay import replay
from app.store.clusters import ClusterStore
from app.store.plans import PlanStore
from schemas.clusters import ClusterOut, ClusterPatch, ClusterPut
from schemas.dag import DagPlanRequest, DagPlanResponse
from schemas.schedule import ScheduleRequest, ScheduleResponse
from schemas.simulate import SimulateRequest, SimulateResponse


def schedule(req: ScheduleRequest, parse_ms: float = 0.0, clusters: ClusterStore | None = None,
             tenant: str = "public") -> ScheduleResponse:
    """Check the request, decide, and report where the time went. With a `cluster_id` the snapshot
    comes from the cache; the starts decided are not applied to it (the resource manager confirms
    them with a PATCH, so the cache mirrors what really runs)."""
    t0 = time.perf_counter()
    if req.cluster_id is not None:
        state = _cached(clusters, tenant, req.cluster_id)
        req = req.model_copy(update={"nodes": state.nodes, "running": state.running})
    held = check_snapshot(req)
    snapshot, jobs = snapshot_from_wire(req, held)
    name, params = params_from_wire(req.policy)
    t1 = time.perf_counter()
    decision = decide(snapshot, jobs, name, params)
    t2 = time.perf_counter()
    timing = {"parse": parse_ms, "validate": (t1 - t0) * 1e3, "schedule": (t2 - t1) * 1e3}
    timing["total"] = sum(timing.values())
    return decision_to_wire(decision, name, timing)


def plan_dag(req: DagPlanRequest, store: PlanStore, limits: DagLimits, ttl_s: int,
             parse_ms: float = 0.0, tenant: str = "public") -> DagPlanResponse:
    """Check, plan, and keep the plan for polling. A plan that cannot be kept is still answered,
    with no plan_id and a warning saying why."""
    t0 = time.perf_counter()
    problem, warnings = problem_from_wire(req, limits)
    t1 = time.perf_counter()
    result = run_planner(problem, req.algorithm, req.explain)
    t2 = time.perf_counter()
    timing = {"parse": parse_ms, "validate": (t1 - t0) * 1e3, "plan": (t2 - t1) * 1e3}
    timing["total"] = sum(timing.values())
    resp = plan_to_wire(req, result, timing, warnings)
    plan_id = uuid.uuid4().hex
    resp.plan_id, resp.expires_in_s = plan_id, ttl_s
    try:
        store.save(f"{tenant}:{plan_id}", resp.model_dump_json().encode(), ttl_s)
    except StoreUnavailableError as exc:
        resp.plan_id, resp.expires_in_s = None, None
        resp.warnings.append(f"the plan was not kept, GET cannot return it: {exc}")
    return resp


def get_plan(store: PlanStore, plan_id: str, tenant: str = "public") -> DagPlanResponse:
    """A plan kept for this tenant; another tenant's plan is as unknown as a plan never made."""
    body = store.load(f"{tenant}:{plan_id}")
    if body is None:
        raise NotFoundError(f"no plan {plan_id!r}: it never existed or it expired")
    return DagPlanResponse.model_validate_json(body)


def simulate(req: SimulateRequest, max_jobs: int, parse_ms: float = 0.0) -> SimulateResponse:
    """Replay a small trace through the scheduling core and measure the schedule."""
    t0 = time.perf_counter()
    w, name, params = workload_from_wire(req, max_jobs)
    t1 = time.perf_counter()
    result = replay(w, name, params)
    t2 = time.perf_counter()
    timing = {"parse": parse_ms, "validate": (t1 - t0) * 1e3, "replay": (t2 - t1) * 1e3}
    timing["total"] = sum(timing.values())
    return result_to_wire(w, result, timing)


def _key(tenant: str, cluster_id: str) -> str:
    return f"{tenant}:{cluster_id}"


def _cached(store: ClusterStore | None, tenant: str, cluster_id: str) -> ClusterPut:
    found = store.get(_key(tenant, cluster_id)) if store is not None else None
    if found is None:
        raise NotFoundError(f"no cluster {cluster_id!r}: PUT /clusters/{cluster_id} first")
    return ClusterPut.model_validate_json(found[1])


def put_cluster(store: ClusterStore, tenant: str, cluster_id: str, state: ClusterPut) -> ClusterOut:
    state = checked(state)
    version = store.put(_key(tenant, cluster_id), state.model_dump_json().encode())
    return _summary(cluster_id, version, state, with_partitions=False)


def patch_cluster(store: ClusterStore, tenant: str, cluster_id: str, if_match: int,
                  patch: ClusterPatch) -> ClusterOut:
    """Apply the changes to the version the caller saw, or change nothing (409 when it is stale)."""
    found = store.get(_key(tenant, cluster_id))
    if found is None:
        raise NotFoundError(f"no cluster {cluster_id!r}")
    version, body = found
    if version != if_match:
        raise VersionConflictError(f"cluster {cluster_id!r} is at version {version}, not {if_match}: "
                                   "read it again and resend the changes")
    state = apply_changes(ClusterPut.model_validate_json(body), patch)
    new_version = store.replace(_key(tenant, cluster_id), if_match, state.model_dump_json().encode())
    return _summary(cluster_id, new_version, state, with_partitions=False)


def get_cluster(store: ClusterStore, tenant: str, cluster_id: str) -> ClusterOut:
    found = store.get(_key(tenant, cluster_id))
    if found is None:
        raise NotFoundError(f"no cluster {cluster_id!r}")
    return _summary(cluster_id, found[0], ClusterPut.model_validate_json(found[1]))


def delete_cluster(store: ClusterStore, tenant: str, cluster_id: str) -> None:
    if not store.delete(_key(tenant, cluster_id)):
        raise NotFoundError(f"no cluster {cluster_id!r}")


def _summary(cluster_id: str, version: int, state: ClusterPut, with_partitions: bool = True) -> ClusterOut:
    return ClusterOut(cluster_id=cluster_id, version=version, nodes=len(state.nodes),
                      running=len(state.running), partitions=partitions(state) if with_partitions else None)

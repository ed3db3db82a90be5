"""Use cases: what each endpoint does, free of HTTP."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import quote

from app.clusters import check_pending, checked
from app.convert import (
    check_snapshot,
    decision_dict,
    job_from_wire,
    params_from_wire,
    snapshot_from_wire,
    window_from_wire,
)
from app.convert_dag import DagLimits, plan_to_wire, problem_from_wire
from app.convert_sim import result_to_wire, workload_from_wire
from app.errors import (
    ClusterUnknownError,
    NotFoundError,
    ReplayTooLongError,
    StoppingError,
    StoreUnavailableError,
)
from app.running_scan import Fallback, Scanned
from app.sched.budget import Budget
from app.sched.model import Job, Snapshot
from app.sched.narrow import NarrowRules, narrow
from app.sched.registry import decide
from app.sched.registry import plan_dag as run_planner
from app.sim.replay import replay
from app.sim.stop import ReplayStopped, StopFlag
from app.store.changes import apply_patch
from app.store.index import ClusterCache, IndexSource, Keys
from app.store.kv import MemoryKv, Tx
from app.store.plans import PlanStore
from schemas.cluster import WindowIn
from schemas.clusters import ClusterOut, ClusterPatch, ClusterPut, PartitionOut
from schemas.dag import DagPlanRequest, DagPlanResponse
from schemas.schedule import BudgetIn, ScheduleRequest, ScheduleResponse
from schemas.simulate import SimulateRequest, SimulateResponse

ANSWER_S_PER_JOB = 10e-6  # writing a pending job's answer and priority (~2 s for 200,000 jobs)


def warm_decisions() -> None:
    """The decision's compiled loops made ready (compiled, or loaded from numba's cache) before the
    first decision needs them: the service does it at start, the Slurm bridge with the service in
    process before its first cycle (else a decision stops for a second or more per loop it loads,
    a minute on a cold cache, while jobs wait)."""
    from app.sched import core

    core.warm()


@dataclass(frozen=True, slots=True)
class DecisionLimits:
    """The operator's ceiling on a decision's work (settings); a request may ask for less."""

    time_s: float | None = None
    max_jobs: int | None = None


def decision_budget(limits: DecisionLimits, asked: BudgetIn | None, started: float,
                    stop: Callable[[], bool] = lambda: False) -> Budget:
    """The budget of one decision: the smaller of the operator's and the request's limits, timed on
    the monotonic clock from `started` (when the body arrived, so parsing counts)."""
    time_s, max_jobs = limits.time_s, limits.max_jobs
    if asked is not None:
        time_s = _least(time_s, asked.time_s)
        max_jobs = _least(max_jobs, asked.max_jobs)  # type: ignore[assignment]
    deadline = float("inf") if time_s is None else started + time_s
    return Budget(time.monotonic, deadline, max_jobs, stop, time_s)


def _least(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else min(a, b)


def schedule(req: ScheduleRequest, parse_ms: float = 0.0, clusters: ClusterCache | None = None,
             tenant: str = "public", rules: NarrowRules | None = None,
             budget: Budget | None = None) -> ScheduleResponse:
    """`schedule_data`'s answer as the wire model (validated)."""
    return ScheduleResponse.model_validate(schedule_data(req, parse_ms, clusters, tenant, rules, budget))


def schedule_data(req: ScheduleRequest, parse_ms: float = 0.0, clusters: ClusterCache | None = None,
                  tenant: str = "public", rules: NarrowRules | None = None,
                  budget: Budget | None = None, scanned: Scanned | None = None) -> dict[str, Any]:
    """Check the request, decide, and report where the time went. With a `cluster_id` the snapshot
    comes from the cache; the starts decided are not applied to it (the resource manager confirms
    them with a PATCH, so the cache mirrors what really runs). With `examine: index` the pass sees
    only the candidates the index finds, and `nodes_examined` counts the node records it read.
    Asked to stop before the checks begin (shutting down), it answers 503 rather than spend seconds
    checking a deep queue nobody will be decided on; past the checks, the budget answers.
    `scanned`: the running jobs read from the body by `running_scan.split` (`req.running` empty);
    `running_scan.Fallback` if their checks cannot vouch for them."""
    if budget is not None and budget.stop():
        raise StoppingError("the service is shutting down: ask again (another instance, or this one "
                            "once restarted)")
    if scanned is not None and req.cluster_id is not None:
        raise Fallback  # running jobs beside a cached cluster: the ordinary parse refuses them
    t0 = time.perf_counter()
    name, params = params_from_wire(req.policy)
    examine = req.examine or ("all" if req.cluster_id is None else "index")
    examined = version = None
    try:
        if req.cluster_id is None and examine == "all":
            snapshot, jobs = snapshot_from_wire(req, check_snapshot(req, scanned), columns=True)
        elif examine == "all":
            version, snapshot, jobs = _cached_whole(_needs(clusters), _key(tenant, req.cluster_id), req)
        else:
            cache, key = _index_of(req, clusters, tenant, scanned)
            queues = "all" if params.migration is not None else None
            rules = rules or NarrowRules(reserve_all=params.reservation_depth > 1)
            version, snapshot, jobs, examined = cache.read(
                key, lambda tx, k: _narrowed(tx, k, req, rules, queues))
    except ClusterUnknownError as exc:
        raise exc.at(("body", "cluster_id")) from None
    t1 = time.perf_counter()
    if budget is not None:
        budget.keep_for_answer(ANSWER_S_PER_JOB * len(req.pending))
    decision = decide(snapshot, jobs, name, params, budget)
    if examined is not None:
        decision = replace(decision, summary=replace(decision.summary, nodes_examined=examined))
    t2 = time.perf_counter()
    timing = {"parse": parse_ms, "validate": (t1 - t0) * 1e3, "schedule": (t2 - t1) * 1e3}
    timing["total"] = sum(timing.values())
    return decision_dict(decision, name, timing, budget,
                         version if req.cluster_id is not None else None,
                         {p.id: p.priority_factors for p in req.pending if p.priority_factors})


def _needs(clusters: ClusterCache | None) -> ClusterCache:
    if clusters is None:
        raise StoreUnavailableError("this service has no cluster cache")
    return clusters


def _index_of(req: ScheduleRequest, clusters: ClusterCache | None, tenant: str,
              scanned: Scanned | None = None) -> tuple[ClusterCache, str]:
    """The cache and key to search: the cached cluster, or an inline snapshot indexed for this pass."""
    if req.cluster_id is not None:
        return _needs(clusters), _key(tenant, req.cluster_id)
    snapshot, _ = snapshot_from_wire(req, check_snapshot(req, scanned))
    cache = ClusterCache(MemoryKv())
    cache.put("inline", snapshot.nodes, snapshot.running, snapshot.windows)
    return cache, "inline"


def _narrowed(tx: Tx, k: Keys, req: ScheduleRequest, rules: NarrowRules,
              queues: str | None) -> tuple[int, Snapshot, list[Job], int]:
    src = IndexSource(tx, k)
    check_pending(req.pending, tx.hlen(k.node), lambda ids: src.nodes(ids).keys(),
                  lambda ids: [j.id for j in src.running(ids)], _request_windows(req))
    jobs = [job_from_wire(p) for p in req.pending]
    narrowed = narrow(src, jobs, rules, src.queues() if queues else None)
    return src.version, _with_windows(src.snapshot(req.now, narrowed), req), jobs, narrowed.examined


def _request_windows(req: ScheduleRequest) -> list[WindowIn]:
    """The request's own windows when the snapshot is a cached one (an inline snapshot's are
    already in it)."""
    return req.windows if req.cluster_id is not None else []


def _with_windows(snapshot: Snapshot, req: ScheduleRequest) -> Snapshot:
    """The cached cluster's windows and the request's own, together."""
    extra = tuple(window_from_wire(w) for w in _request_windows(req))
    return replace(snapshot, windows=snapshot.windows + extra) if extra else snapshot


def _cached_whole(cache: ClusterCache, key: str, req: ScheduleRequest
                  ) -> tuple[int, Snapshot, list[Job]]:
    version, nodes, running, windows = cache.whole_with_windows(key)
    ids = {n.id for n in nodes}
    check_pending(req.pending, len(nodes), lambda x: ids.intersection(x),
                  lambda x: {r.id for r in running}.intersection(x), req.windows)
    snapshot = Snapshot(req.now, tuple(nodes), tuple(running), windows=tuple(windows))
    return version, _with_windows(snapshot, req), [job_from_wire(p) for p in req.pending]


def plan_dag(req: DagPlanRequest, store: PlanStore, limits: DagLimits, ttl_s: int,
             parse_ms: float = 0.0, tenant: str = "public") -> DagPlanResponse:
    """Check, plan, and keep the plan for polling. A plan that cannot be kept is still answered,
    with no plan_id and a warning saying why."""
    t0 = time.perf_counter()
    problem, warnings = problem_from_wire(req, limits)
    t1 = time.perf_counter()
    # `best`'s default total counts from here, the start of planning: parsing and checking a large
    # body (reported apart in the timing) must not eat the planners' time
    result = run_planner(problem, req.algorithm, req.explain, search_s=req.time_budget_s,
                         max_search_s=limits.max_search_s, clock=time.monotonic,
                         best_default_s=limits.best_default_s)
    t2 = time.perf_counter()
    timing = {"parse": parse_ms, "validate": (t1 - t0) * 1e3, "plan": (t2 - t1) * 1e3}
    timing["total"] = sum(timing.values())
    resp = plan_to_wire(req, result, timing, warnings)
    plan_id = uuid.uuid4().hex
    resp.plan_id, resp.expires_in_s = plan_id, ttl_s
    try:
        store.save(_key(tenant, plan_id), resp.model_dump_json().encode(), ttl_s)
    except StoreUnavailableError as exc:
        resp.plan_id, resp.expires_in_s = None, None
        resp.warnings.append(f"the plan was not kept, GET cannot return it: {exc}")
    return resp


def get_plan(store: PlanStore, plan_id: str, tenant: str = "public") -> DagPlanResponse:
    """A plan kept for this tenant; another tenant's plan is as unknown as a plan never made."""
    body = store.load(_key(tenant, plan_id))
    if body is None:
        raise NotFoundError(f"no plan {plan_id!r}: it never existed or it expired")
    return DagPlanResponse.model_validate_json(body)


@dataclass(frozen=True, slots=True)
class SimLimits:
    """The operator's ceiling on a POST /simulate replay (settings)."""

    max_jobs: int = 20_000
    max_seconds: float = float("inf")


STOP_POLL_S = 0.1  # how often a replay's watcher looks at `stop()` and the time cap


def simulate(req: SimulateRequest, limits: SimLimits, parse_ms: float = 0.0,
             stop: Callable[[], bool] = lambda: False) -> SimulateResponse:
    """Replay a small trace through the scheduling core and measure the schedule. The replay stops
    before its next decision once `stop()` turns true (the client left, the service is shutting
    down: 503 `stopping`) or it has run `limits.max_seconds` (422 `replay_too_long`)."""
    t0 = time.perf_counter()
    w, name, params = workload_from_wire(req, limits.max_jobs)
    t1 = time.perf_counter()
    flag = StopFlag()
    try:
        with _watched(flag, stop, limits.max_seconds):
            result = replay(w, name, params, predict=req.predict_runtimes, stop=flag,
                            correction=req.correction)
    except ReplayStopped as exc:
        if exc.reason == "time":
            raise ReplayTooLongError(
                f"the replay ran past {limits.max_seconds:g} s (HPCSCHED_SIM_MAX_SECONDS) and was stopped "
                f"after {exc.started} of {exc.jobs} jobs had started: replay fewer jobs, or the whole "
                "trace with the `hpcsched simulate` command") from exc
        raise StoppingError("the replay was stopped: the client left or the service is shutting down; "
                            "ask again") from exc
    t2 = time.perf_counter()
    timing = {"parse": parse_ms, "validate": (t1 - t0) * 1e3, "replay": (t2 - t1) * 1e3}
    timing["total"] = sum(timing.values())
    return result_to_wire(w, result, timing)


@contextmanager
def _watched(flag: StopFlag, stop: Callable[[], bool], max_seconds: float) -> Iterator[None]:
    """While the block runs, a thread sets `flag` once `stop()` is true ("stopped") or `max_seconds`
    have passed ("time")."""
    done = threading.Event()
    deadline = time.monotonic() + max_seconds

    def watch() -> None:
        while not done.wait(STOP_POLL_S):
            if stop():
                flag.set("stopped")
            elif time.monotonic() > deadline:
                flag.set("time")
            else:
                continue
            return

    watcher = threading.Thread(target=watch, name="replay-watch", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        watcher.join()


def _key(tenant: str, name: str) -> str:
    """The store key of a tenant's cluster or plan. Both parts are percent-encoded, so neither can
    hold the separator: `a:b` + `c` and `a` + `b:c` are different keys, whatever reached this far
    (the API refuses such names already; this keeps the rule where the key is made)."""
    return f"{quote(tenant, safe='')}:{quote(name, safe='')}"


def put_cluster(cache: ClusterCache, tenant: str, cluster_id: str, state: ClusterPut) -> ClusterOut:
    snapshot = checked(state)
    version = cache.put(_key(tenant, cluster_id), snapshot.nodes, snapshot.running, snapshot.windows)
    return ClusterOut(cluster_id=cluster_id, version=version, nodes=len(snapshot.nodes),
                      running=len(snapshot.running))


def patch_cluster(cache: ClusterCache, tenant: str, cluster_id: str, if_match: int,
                  patch: ClusterPatch) -> ClusterOut:
    """Apply the changes to the version the caller saw, or change nothing (409 when it is stale)."""
    key = _key(tenant, cluster_id)
    version, nodes, running = cache.patch(key, if_match, lambda edit: apply_patch(edit, patch))
    return ClusterOut(cluster_id=cluster_id, version=version, nodes=nodes, running=running)


def get_cluster(cache: ClusterCache, tenant: str, cluster_id: str) -> ClusterOut:
    version, nodes, running, parts = cache.summary(_key(tenant, cluster_id))
    return ClusterOut(cluster_id=cluster_id, version=version, nodes=nodes, running=running,
                      partitions=[PartitionOut(label=lab, nodes=n, score_min=lo, score_max=hi)
                                  for lab, n, lo, hi in parts])


def delete_cluster(cache: ClusterCache, tenant: str, cluster_id: str) -> None:
    if not cache.delete(_key(tenant, cluster_id)):
        raise ClusterUnknownError(cluster_id)

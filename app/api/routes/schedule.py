"""POST /schedule."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Request, Response
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool

from app import service
from app.api.observe import Metrics
from app.api.raw_body import ERRORS, NOT_FOUND_CLUSTER, UNAVAILABLE, body_doc, parse, read_body
from app.api.stopping import run_watched
from app.running_scan import Fallback, Scanned, split
from app.sched.collector import rare_collections
from app.settings import Settings
from schemas.common import ErrorBody
from schemas.schedule import ScheduleRequest, ScheduleResponse

router = APIRouter()


# Parsing and checking a body makes about one object per 16 bytes of it (a 14 MB snapshot: ~9·10^5),
# all alive until the answer is made; the collector is asked to wait for twice that before a pass.
BYTES_PER_OBJECT = 8


def _run(body: bytes, request: Request, started: float, stop: Callable[[], bool]) -> dict[str, Any]:
    """The answer, with no collector pass over the body's objects (app.sched.collector): they are
    freed (in `_answer`'s frame) before the threshold comes down again."""
    with rare_collections(len(body) // BYTES_PER_OBJECT):
        return _answer(body, request, started, stop)


def _answer(body: bytes, request: Request, started: float, stop: Callable[[], bool]) -> dict[str, Any]:
    """The running jobs scanned into columns (app.running_scan) and the rest parsed by pydantic;
    where the scan or its checks cannot vouch for them, the whole body parsed and checked the
    ordinary way, which names every problem."""
    settings: Settings = request.app.state.settings
    limits = service.DecisionLimits(settings.decision_time_s, settings.decision_max_jobs)
    try:
        req, scanned, parse_ms = parse_scanned(body)
        budget = service.decision_budget(limits, req.budget, started, stop)
        return service.schedule_data(req, parse_ms, request.app.state.clusters, request.state.tenant,
                                     budget=budget, scanned=scanned)
    except Fallback:
        pass
    req, parse_ms = parse(ScheduleRequest, body)
    budget = service.decision_budget(limits, req.budget, started, stop)
    return service.schedule_data(req, parse_ms, request.app.state.clusters, request.state.tenant,
                                 budget=budget)


def parse_scanned(body: bytes) -> tuple[ScheduleRequest, Scanned | None, float]:
    """(the request, its running jobs scanned, the milliseconds both took); the request's own
    `running` is empty when they were scanned. Raises Fallback when the scan or pydantic refuses
    (the ordinary parse then says why, at the right place in the body)."""
    t0 = time.perf_counter()
    parts = split(body)
    if parts is None:
        req, _ = parse(ScheduleRequest, body)
        return req, None, (time.perf_counter() - t0) * 1e3
    rest, scanned = parts
    try:
        req, _ = parse(ScheduleRequest, rest)
    except ValidationError:
        raise Fallback from None
    return req, scanned, (time.perf_counter() - t0) * 1e3


def _count(metrics: Metrics, resp: dict[str, Any]) -> None:
    s = resp["summary"]
    for kind, n in (("start", s["started"]), ("backfill", s["backfilled"]), ("reservation", s["reserved"]),
                    ("migration", s["migrated"]), ("pending", s["pending"])):
        metrics.decisions.labels(kind).inc(n)
    metrics.nodes_examined.observe(s["nodes_examined"])
    if s["budget"] and s["budget"]["hit"]:
        metrics.budget_hits.labels(s["budget"]["hit"]).inc()


@router.post(
    "/schedule",
    response_model=ScheduleResponse,
    responses={**ERRORS, **NOT_FOUND_CLUSTER, **UNAVAILABLE,
               409: {"model": ErrorBody, "description": "With `cluster_id`: the cached cluster could not "
                     "be read as one version while it was being rewritten; ask again"}},
    summary="Decide which pending jobs start where, which are reserved, and why the rest wait",
    openapi_extra=body_doc(ScheduleRequest),
)
async def schedule(request: Request) -> Response:
    """One scheduling cycle. The body is parsed straight from bytes by pydantic (faster than the
    default path for multi-megabyte snapshots); the decision runs in the thread pool, within the
    decision budget (timed from the body's arrival), and stops early if the client leaves or the
    service shuts down. The answer is serialized once, not re-validated."""
    body = await read_body(request)
    started = time.monotonic()
    resp = await run_watched(request, lambda stop: _run(body, request, started, stop))
    _count(request.app.state.metrics, resp)
    return Response(await run_in_threadpool(_json, resp), media_type="application/json")


def _json(data: dict[str, Any]) -> bytes:
    return json.dumps(data, separators=(",", ":"), allow_nan=False).encode()

"""POST /schedule."""

from __future__ import annotations

from collections import Counter

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool

from app import service
from app.api.observe import Metrics
from app.api.raw_body import ERRORS, body_doc, parse, read_body
from schemas.schedule import ScheduleRequest, ScheduleResponse

router = APIRouter()


def _run(body: bytes, request: Request) -> ScheduleResponse:
    req, parse_ms = parse(ScheduleRequest, body)
    return service.schedule(req, parse_ms, request.app.state.clusters, request.state.tenant)


def _count(metrics: Metrics, resp: ScheduleResponse) -> None:
    kinds = Counter(s.kind for s in resp.starts)
    for kind, n in (("start", kinds["start"]), ("backfill", kinds["backfill"]),
                    ("reservation", len(resp.reservations)), ("migration", len(resp.migrations)),
                    ("pending", len(resp.pending))):
        metrics.decisions.labels(kind).inc(n)
    metrics.nodes_examined.observe(resp.summary.nodes_examined)


@router.post(
    "/schedule",
    response_model=ScheduleResponse,
    responses=ERRORS,
    summary="Decide which pending jobs start where, which are reserved, and why the rest wait",
    openapi_extra=body_doc(ScheduleRequest),
)
async def schedule(request: Request) -> ScheduleResponse:
    """One scheduling cycle. The body is parsed straight from bytes by pydantic (faster than the
    default path for multi-megabyte snapshots); the decision runs in the thread pool."""
    resp = await run_in_threadpool(_run, await read_body(request), request)
    _count(request.app.state.metrics, resp)
    return resp

"""POST /schedule."""

from __future__ import annotations

import time

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool

from app import service
from app.errors import InputError
from schemas.common import ErrorBody
from schemas.schedule import ScheduleRequest, ScheduleResponse

router = APIRouter()

ERRORS = {
    413: {"model": ErrorBody, "description": "Body over the configured size limit"},
    422: {"model": ErrorBody, "description": "Invalid request: every bad field named in `loc`"},
}


def _parse(body: bytes) -> tuple[ScheduleRequest, float]:
    t0 = time.perf_counter()
    req = ScheduleRequest.model_validate_json(body)
    return req, (time.perf_counter() - t0) * 1e3


def _run(body: bytes) -> ScheduleResponse:
    req, parse_ms = _parse(body)
    return service.schedule(req, parse_ms)


@router.post(
    "/schedule",
    response_model=ScheduleResponse,
    responses=ERRORS,  # type: ignore[arg-type]
    summary="Decide which pending jobs start where, which are reserved, and why the rest wait",
    openapi_extra={"requestBody": {
        "required": True,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ScheduleRequest"}}},
    }},
)
async def schedule(request: Request) -> ScheduleResponse:
    """One scheduling cycle. The body is parsed straight from bytes by pydantic (faster than the
    default path for multi-megabyte snapshots); the decision runs in the thread pool."""
    body = await request.body()
    if not body:
        raise InputError.single(("body",), "a JSON body is required", "missing")
    return await run_in_threadpool(_run, body)

"""POST /simulate."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool

from app import service
from app.api.raw_body import ERRORS, body_doc, parse, read_body
from schemas.simulate import SimulateRequest, SimulateResponse

router = APIRouter()


def _run(body: bytes, max_jobs: int) -> SimulateResponse:
    req, parse_ms = parse(SimulateRequest, body)
    return service.simulate(req, max_jobs, parse_ms)


@router.post(
    "/simulate",
    response_model=SimulateResponse,
    responses=ERRORS,
    summary="Replay a small job trace through a policy and measure the schedule",
    openapi_extra=body_doc(SimulateRequest),
)
async def simulate(request: Request) -> SimulateResponse:
    """The trace comes as SWF text (`swf`) or as a job list (`jobs`); traces over HPCSCHED_SIM_MAX_JOBS
    jobs are refused (the `hpcsched simulate` command replays any length)."""
    max_jobs = request.app.state.settings.sim_max_jobs
    return await run_in_threadpool(_run, await read_body(request), max_jobs)

"""POST /simulate."""

from __future__ import annotations

from collections.abc import Callable

from fastapi import APIRouter, Request

from app import service
from app.api.observe import Metrics
from app.api.raw_body import ERRORS, body_doc, parse, read_body
from app.api.stopping import run_watched
from app.errors import ReplayTooLongError, StoppingError
from schemas.common import ErrorBody
from schemas.simulate import SimulateRequest, SimulateResponse

router = APIRouter()
STOPPED = {503: {"model": ErrorBody, "description": "The replay was stopped: the service is shutting down "
                                                 "(or the client left); ask again"}}


def _run(body: bytes, limits: service.SimLimits, stop: Callable[[], bool]) -> SimulateResponse:
    req, parse_ms = parse(SimulateRequest, body)
    return service.simulate(req, limits, parse_ms, stop)


@router.post(
    "/simulate",
    response_model=SimulateResponse,
    responses={**ERRORS, **STOPPED},
    summary="Replay a small job trace through a policy and measure the schedule",
    openapi_extra=body_doc(SimulateRequest),
)
async def simulate(request: Request) -> SimulateResponse:
    """The trace comes as SWF text (`swf`) or as a job list (`jobs`); traces over HPCSCHED_SIM_MAX_JOBS
    jobs are refused (the `hpcsched simulate` command replays any length). The replay runs in the
    thread pool; it is stopped when its client leaves or the service shuts down (503 `stopping`), and
    past HPCSCHED_SIM_MAX_SECONDS (422 `replay_too_long`)."""
    settings = request.app.state.settings
    limits = service.SimLimits(settings.sim_max_jobs, settings.sim_max_seconds)
    body = await read_body(request)
    metrics: Metrics = request.app.state.metrics
    metrics.replays_running.inc()
    try:
        return await run_watched(request, lambda stop: _run(body, limits, stop))
    except (StoppingError, ReplayTooLongError) as exc:
        metrics.replays_stopped.labels("time" if isinstance(exc, ReplayTooLongError) else "stopped").inc()
        raise
    finally:
        metrics.replays_running.dec()

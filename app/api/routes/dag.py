"""POST /dag/plan and GET /dag/plan/{plan_id}."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from app import service
from app.api.raw_body import ERRORS, UNAUTHORIZED, body_doc, parse, read_body
from app.convert_dag import DagLimits
from app.errors import NotFoundError
from app.gantt import gantt_svg
from app.settings import Settings
from schemas.common import NAME_PATTERN, NAME_RULE, ErrorBody
from schemas.dag import DagPlanRequest, DagPlanResponse

router = APIRouter()


def _run(body: bytes, request: Request) -> DagPlanResponse:
    settings: Settings = request.app.state.settings
    req, parse_ms = parse(DagPlanRequest, body)
    limits = DagLimits(settings.dag_max_tasks, settings.dag_max_cells, settings.dag_max_search_s,
                       settings.dag_best_default_s)
    return service.plan_dag(req, request.app.state.plans, limits, settings.plan_ttl_s, parse_ms,
                            request.state.tenant)


@router.post(
    "/dag/plan",
    response_model=DagPlanResponse,
    responses=ERRORS,
    summary="Plan a workflow (DAG) on resource service groups: MDL, HEFT or the better of the two",
    openapi_extra=body_doc(DagPlanRequest),
)
async def plan(request: Request) -> DagPlanResponse:
    """The body is either native `tasks` + `edges` + `groups`, or a WfFormat 1.5 `workflow`. The plan
    is kept for `plan_ttl_s` seconds under the returned `plan_id`."""
    return await run_in_threadpool(_run, await read_body(request), request)


@router.get(
    "/dag/plan/{plan_id}",
    response_model=DagPlanResponse,
    responses={
        200: {"content": {"image/svg+xml": {}},
              "description": "The plan, or its Gantt chart with format=svg"},
        **UNAUTHORIZED,
        404: {"model": ErrorBody, "description": "No such plan, or it expired"},
        422: {"model": ErrorBody, "description": "`format` is neither json nor svg, or "
                                                 "`plan_id` is no plan id"},
        503: {"model": ErrorBody, "description": "The plan cache (Redis) cannot be reached"},
    },
    summary="A plan made earlier, as JSON or as an SVG Gantt chart",
)
def get_plan(request: Request,
             plan_id: Annotated[str, Path(pattern=NAME_PATTERN, description=NAME_RULE)],
             format: Literal["json", "svg"] = Query("json", description="svg: a Gantt chart")) -> Response:
    cache = request.app.state.metrics.cache
    try:
        plan = service.get_plan(request.app.state.plans, plan_id, request.state.tenant)
    except NotFoundError:
        cache.labels("plan", "miss").inc()
        raise
    cache.labels("plan", "hit").inc()
    if format == "svg":
        return Response(gantt_svg(plan), media_type="image/svg+xml")
    return Response(plan.model_dump_json(), media_type="application/json")

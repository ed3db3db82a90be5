"""Liveness and readiness."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from app.errors import StoreUnavailableError

router = APIRouter()


@router.get("/healthz", summary="The process is alive")
def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get(
    "/readyz",
    summary="Ready to serve: the cache store (Redis, when configured) answers",
    responses={503: {"description": "Redis is configured but cannot be reached"}},
)
async def readyz(request: Request) -> JSONResponse:
    store = request.app.state.plans
    try:
        await run_in_threadpool(store.ping)
    except StoreUnavailableError as exc:
        return JSONResponse({"status": "unavailable", "store": store.backend, "detail": str(exc)},
                            status_code=503)
    return JSONResponse({"status": "ok", "store": store.backend})

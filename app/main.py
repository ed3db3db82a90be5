"""The FastAPI application: `create_app(settings)`; `app` for uvicorn."""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware
from fastapi_offline import FastAPIOffline
from starlette.concurrency import run_in_threadpool

from app import running_scan
from app.api import errors
from app.api.auth import ApiKeys, parse_keys
from app.api.edges import CatchAll, Options
from app.api.limits import BodyLimit
from app.api.observe import Metrics, RequestLog, configure_logging
from app.api.routes import clusters, dag, health, metrics, schedule, simulate
from app.api.stopping import ShutdownFlag, shutdown_signals
from app.errors import ERROR_CODES
from app.sched import core
from app.sched.dag import list_kernel
from app.settings import Settings, get_settings
from app.sim import compiled
from app.store.index import ClusterCache
from app.store.kv import index_kv
from app.store.plans import plan_store
from schemas.clusters import ClusterPatch, ClusterPut
from schemas.dag import DagPlanRequest
from schemas.schedule import ScheduleRequest
from schemas.simulate import SimulateRequest


@asynccontextmanager
async def _lifespan(shutdown: ShutdownFlag) -> AsyncIterator[None]:
    """Before the first request: the pass's and the profile's compiled loops made ready (`core.warm`),
    the DAG planners' (`list_kernel.warm`) and the compiled replay's behind POST /simulate
    (`compiled.warm`), and POST /schedule's scan of the running jobs (`running_scan.warm`): one to two
    minutes of CPU the first time on a machine (see docs/operations.md), under a second from numba's
    cache after; then the shutdown signals watched while the service runs."""
    await run_in_threadpool(warm)
    async with shutdown_signals(shutdown):
        yield


def warm() -> None:
    """Every compiled loop a request may run, made ready (compiled, or loaded from numba's cache)."""
    running_scan.warm()
    core.warm()
    list_kernel.warm()
    compiled.warm()


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or get_settings()
    if settings.gc_gen0_threshold:
        _, gen1, gen2 = gc.get_threshold()
        gc.set_threshold(settings.gc_gen0_threshold, gen1, gen2)
    shutdown = ShutdownFlag()
    app = FastAPIOffline(  # /docs and /redoc with their assets from the package, no CDN
        title="hpcsched",
        version="0.1.0",
        summary="Scheduling decisions for HPC clusters: starts, backfills, reservations, "
        "migrations, each with a reason.",
        lifespan=lambda _app: _lifespan(shutdown),
    )
    app.state.settings = settings
    app.state.shutdown = shutdown
    app.state.plans = plan_store(settings.redis_url)
    app.state.clusters = ClusterCache(index_kv(settings.redis_url))
    app.state.metrics = Metrics()
    configure_logging(settings.log_level)
    errors.install(app)
    app.include_router(schedule.router)
    app.include_router(clusters.router)
    app.include_router(dag.router)
    app.include_router(simulate.router)
    app.include_router(health.router)
    app.include_router(metrics.router)
    # the last added is the outermost
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes)
    app.add_middleware(ApiKeys, keys=parse_keys(settings.api_keys))
    app.add_middleware(CatchAll)
    app.add_middleware(Options, owner=app)  # preflights and OPTIONS carry no API key
    origins = parse_origins(settings.cors_origins)
    if origins:
        app.add_middleware(CORSMiddleware, allow_origins=origins, allow_methods=CORS_METHODS,
                           allow_headers=CORS_HEADERS, expose_headers=["ETag", "X-Request-Id"], max_age=600)
    app.add_middleware(RequestLog, metrics=app.state.metrics)  # outermost: sees every answer
    _register_request_schema(app)
    return app


CORS_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"]
CORS_HEADERS = ["Content-Type", "If-Match", "X-API-Key", "Authorization", "X-Request-Id"]


def parse_origins(raw: str | None) -> list[str]:
    """`HPCSCHED_CORS_ORIGINS`: comma-separated origins (`https://portal.example.org`)."""
    return [o.strip().rstrip("/") for o in (raw or "").split(",") if o.strip()]


def _register_request_schema(app: FastAPI) -> None:
    """Routes that read raw bytes get their body schemas added to the OpenAPI by hand."""
    original = app.openapi

    def openapi() -> dict:  # type: ignore[type-arg]
        if app.openapi_schema:
            return app.openapi_schema
        spec = original()
        components = spec.setdefault("components", {}).setdefault("schemas", {})
        for model in (ScheduleRequest, DagPlanRequest, SimulateRequest, ClusterPut, ClusterPatch):
            defs = model.model_json_schema(ref_template="#/components/schemas/{model}")
            components.update(defs.pop("$defs", {}))
            components[model.__name__] = defs
        _document_error_codes(components)
        app.openapi_schema = spec
        return spec

    app.openapi = openapi  # type: ignore[method-assign]


def _document_error_codes(components: dict) -> None:  # type: ignore[type-arg]
    """Every error body's `type` is one of ERROR_CODES (or a pydantic validation type on a 422):
    the OpenAPI file lists them on ErrorDetail.type."""
    detail = components.get("ErrorDetail")
    if detail is None:
        return
    lines = [f"`{code}` ({status}): {meaning}" for code, (status, meaning) in ERROR_CODES.items()]
    detail["properties"]["type"]["description"] = (
        "The error's code, snake_case: one of the following, or on a 422 of the request's shape one of "
        "pydantic's validation types (`missing`, `extra_forbidden`, `string_pattern_mismatch`, ...). "
        + "; ".join(lines))
    detail["properties"]["type"]["examples"] = sorted(ERROR_CODES)


app = create_app()

"""Map the service's errors to HTTP answers, all in FastAPI's 422 body shape."""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from app.errors import (
    InputError,
    NotFoundError,
    PayloadTooLargeError,
    ReplayTooLongError,
    SchedError,
    StoppingError,
    StoreUnavailableError,
    UnsupportedMediaTypeError,
    VersionConflictError,
)

log = logging.getLogger("hpcsched")

STATUS: dict[type[SchedError], int] = {
    InputError: 422,
    NotFoundError: 404,
    VersionConflictError: 409,
    PayloadTooLargeError: 413,
    ReplayTooLongError: 422,
    UnsupportedMediaTypeError: 415,
    StoreUnavailableError: 503,
    StoppingError: 503,
}


HTTP_CODES = {401: "unauthorized", 404: "not_found", 405: "method_not_allowed"}


def error_body(loc: list[Any], msg: str, type_: str) -> dict[str, Any]:
    return {"detail": [{"loc": loc, "msg": msg, "type": type_}]}


MAX_DETAILS = 100  # most problems a 422 lists; one last entry counts the rest


def listed(details: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A 422's details: the first `MAX_DETAILS`, then, where there were more, one entry saying how
    many more and of which types (a body with one mistake in each of 100,000 nodes is told so in a
    few KB, not in 30 MB of repeated details)."""
    if len(details) <= MAX_DETAILS:
        return details
    rest = Counter(d["type"] for d in details[MAX_DETAILS:])
    kinds = ", ".join(f"{kind} {n:,}" for kind, n in rest.most_common())
    more = len(details) - MAX_DETAILS
    return [*details[:MAX_DETAILS], {"loc": ["body"], "msg": f"{more:,} more problems not listed "
                                     f"(the first {MAX_DETAILS} are): {kinds}", "type": "more_errors"}]


def validation_details(exc: ValidationError, prefix: tuple[str, ...] = ("body",)) -> list[dict]:
    """Pydantic's errors as FastAPI shows them: loc prefixed by where the value came from."""
    return [
        {"loc": [*prefix, *e["loc"]], "msg": e["msg"], "type": e["type"]}
        for e in exc.errors(include_url=False, include_context=False, include_input=False)
    ]


def install(app: FastAPI) -> None:
    @app.exception_handler(SchedError)
    async def sched_error(request: Request, exc: SchedError) -> JSONResponse:
        status = next((s for t, s in STATUS.items() if isinstance(exc, t)), 400)
        if isinstance(exc, InputError):
            detail = [{"loc": list(e.loc), "msg": e.msg, "type": e.type} for e in exc.errors]
            return JSONResponse({"detail": listed(detail)}, status_code=status)
        loc = list(getattr(exc, "loc", []))
        if isinstance(exc, UnsupportedMediaTypeError):
            loc = ["header", "content-type"]
        return JSONResponse(error_body(loc, str(exc), exc.type), status_code=status)

    @app.exception_handler(ValidationError)
    async def pydantic_error(request: Request, exc: ValidationError) -> JSONResponse:
        return JSONResponse({"detail": listed(validation_details(exc))}, status_code=422)

    @app.exception_handler(RequestValidationError)
    async def request_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        detail = [{"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]}
                  for e in exc.errors()]
        return JSONResponse({"detail": listed(detail)}, status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        kind = HTTP_CODES.get(exc.status_code, "http_error")
        return JSONResponse(error_body([], str(exc.detail), kind), status_code=exc.status_code,
                            headers=getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unexpected error on %s %s", request.method, request.url.path)
        return JSONResponse(error_body([], "internal error", "internal"), status_code=500)

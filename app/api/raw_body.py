"""Routes that parse their JSON body themselves (pydantic straight from bytes, in the thread pool):
the body's OpenAPI entry, the empty-body check, and the parse timing."""

from __future__ import annotations

import time
from typing import Any, TypeVar

from fastapi import Request
from pydantic import BaseModel

from app.errors import InputError, UnsupportedMediaTypeError
from schemas.common import ErrorBody

Model = TypeVar("Model", bound=BaseModel)

UNAUTHORIZED: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorBody, "description": "API keys are configured and this request has no valid one"},
}
ERRORS: dict[int | str, dict[str, Any]] = {
    **UNAUTHORIZED,
    413: {"model": ErrorBody, "description": "Body over the configured size limit"},
    415: {"model": ErrorBody, "description": "The body is not declared JSON (Content-Type must be "
                                             "application/json)"},
    422: {"model": ErrorBody, "description": "Invalid request: every bad field named in `loc`"},
}


NOT_FOUND_CLUSTER: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorBody, "description": "No such cluster (for this API key): PUT it again"},
}
UNAVAILABLE: dict[int | str, dict[str, Any]] = {
    503: {"model": ErrorBody, "description": "The cluster cache (Redis) cannot be reached, or this "
                                             "service has none; or the service is shutting down: "
                                             "ask again"},
}


def body_doc(model: type[BaseModel]) -> dict[str, Any]:
    """`openapi_extra` naming the request model (registered in components by app.main)."""
    ref = {"$ref": f"#/components/schemas/{model.__name__}"}
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": ref}}}}


def is_json(content_type: str | None) -> bool:
    """application/json, or a JSON-based type (`+json`), whatever its parameters."""
    media = (content_type or "").split(";", 1)[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


async def read_body(request: Request) -> bytes:
    """The body of a request that must be JSON. A body sent as text/plain (or with no type) is
    refused with 415: such a request is a "simple" one a browser page on any site may send
    without a CORS preflight."""
    if not is_json(request.headers.get("content-type")):
        raise UnsupportedMediaTypeError(
            f"Content-Type must be application/json, not {request.headers.get('content-type')!r}")
    body = await request.body()
    if not body:
        raise InputError.single(("body",), "a JSON body is required", "missing")
    return body


def parse(model: type[Model], body: bytes) -> tuple[Model, float]:
    """The validated model and the milliseconds it took. Strict: a JSON value of another type than
    the schema says (`true` or `"1"` for a number, `2.0` for an integer) is a 422, not coerced."""
    t0 = time.perf_counter()
    req = model.model_validate_json(body, strict=True)
    return req, (time.perf_counter() - t0) * 1e3

"""Routes that parse their JSON body themselves (pydantic straight from bytes, in the thread pool):
the body's OpenAPI entry, the empty-body check, and the parse timing."""

from __future__ import annotations

import time
from typing import Any, TypeVar

from fastapi import Request
from pydantic import BaseModel

from app.errors import InputError
from schemas.common import ErrorBody

Model = TypeVar("Model", bound=BaseModel)

UNAUTHORIZED: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorBody, "description": "API keys are configured and this request has no valid one"},
}
ERRORS: dict[int | str, dict[str, Any]] = {
    **UNAUTHORIZED,
    413: {"model": ErrorBody, "description": "Body over the configured size limit"},
    422: {"model": ErrorBody, "description": "Invalid request: every bad field named in `loc`"},
}


def body_doc(model: type[BaseModel]) -> dict[str, Any]:
    """`openapi_extra` naming the request model (registered in components by app.main)."""
    ref = {"$ref": f"#/components/schemas/{model.__name__}"}
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": ref}}}}


async def read_body(request: Request) -> bytes:
    body = await request.body()
    if not body:
        raise InputError.single(("body",), "a JSON body is required", "missing")
    return body


def parse(model: type[Model], body: bytes) -> tuple[Model, float]:
    """The validated model and the milliseconds it took."""
    t0 = time.perf_counter()
    req = model.model_validate_json(body)
    return req, (time.perf_counter() - t0) * 1e3

"""The cluster cache: PUT, PATCH (If-Match), GET and DELETE /clusters/{cluster_id}."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, Path, Request, Response
from starlette.concurrency import run_in_threadpool

from app import service
from app.api.raw_body import ERRORS, NOT_FOUND_CLUSTER, UNAUTHORIZED, UNAVAILABLE, body_doc, parse, read_body
from app.errors import InputError
from schemas.clusters import ClusterOut, ClusterPatch, ClusterPut
from schemas.common import NAME_PATTERN, NAME_RULE, ErrorBody

router = APIRouter()
NOT_FOUND = NOT_FOUND_CLUSTER
IF_MATCH = r'^(W/)?"?[0-9]+"?$'
ClusterId = Annotated[str, Path(pattern=NAME_PATTERN, description=f"the cluster's name: {NAME_RULE}")]
CONFLICT = {409: {"model": ErrorBody,
                  "description": "If-Match is not the cluster's version: nothing changed"}}


def _tagged(response: Response, out: ClusterOut) -> ClusterOut:
    response.headers["ETag"] = f'"{out.version}"'
    return out


def _version(if_match: str | None) -> int:
    raw = (if_match or "").strip().removeprefix("W/").strip('"')
    if not raw.isdigit():
        raise InputError.single(("header", "if-match"), "PATCH needs If-Match: the version you read "
                                "(GET or the last PUT/PATCH answer)", "missing" if not raw else "value_error")
    return int(raw)


@router.put("/clusters/{cluster_id}", response_model=ClusterOut,
            summary="Load a cluster snapshot into the cache",
            responses={**ERRORS, **UNAVAILABLE}, openapi_extra=body_doc(ClusterPut))
async def put_cluster(cluster_id: ClusterId, request: Request, response: Response) -> ClusterOut:
    body = await read_body(request)
    state, _ = await run_in_threadpool(parse, ClusterPut, body)
    out = await run_in_threadpool(service.put_cluster, request.app.state.clusters, request.state.tenant,
                                  cluster_id, state)
    return _tagged(response, out)


@router.patch("/clusters/{cluster_id}", response_model=ClusterOut,
              summary="Apply changes (jobs started/ended, nodes added/removed/down/drained) "
                      "to a cached cluster",
              responses={**ERRORS, **NOT_FOUND, **CONFLICT, **UNAVAILABLE},
              openapi_extra=body_doc(ClusterPatch))
async def patch_cluster(cluster_id: ClusterId, request: Request, response: Response,
                        if_match: str = Header(..., pattern=IF_MATCH, description=(
                            "the version this change applies to, as read (the ETag of GET, PUT or "
                            "the last PATCH); a stale one is 409 and changes nothing"))) -> ClusterOut:
    version = _version(if_match)
    body = await read_body(request)
    patch, _ = await run_in_threadpool(parse, ClusterPatch, body)  # off the event loop, like PUT
    out = await run_in_threadpool(service.patch_cluster, request.app.state.clusters, request.state.tenant,
                                  cluster_id, version, patch)
    return _tagged(response, out)


@router.get("/clusters/{cluster_id}", response_model=ClusterOut,
            summary="A cached cluster: version, sizes, label partitions with their fragment-score ranges",
            responses={**UNAUTHORIZED, **NOT_FOUND, **UNAVAILABLE})
def get_cluster(cluster_id: ClusterId, request: Request, response: Response) -> ClusterOut:
    out = service.get_cluster(request.app.state.clusters, request.state.tenant, cluster_id)
    return _tagged(response, out)


@router.delete("/clusters/{cluster_id}", status_code=204, summary="Forget a cached cluster",
               responses={**UNAUTHORIZED, **NOT_FOUND, **UNAVAILABLE})
def delete_cluster(cluster_id: ClusterId, request: Request) -> Response:
    service.delete_cluster(request.app.state.clusters, request.state.tenant, cluster_id)
    return Response(status_code=204)

"""The service as the bridge sees it: `POST /schedule` (and, for the cached path, PUT/PATCH
/clusters/{id}), in process or over HTTP, with the same wire schemas either way."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx

from app.bridges.slurm.cached import StaleCacheError
from schemas.clusters import ClusterPatch, ClusterPut
from schemas.schedule import ScheduleRequest, ScheduleResponse

Decide = Callable[[ScheduleRequest], ScheduleResponse]
TENANT = "public"


class RefusedError(ValueError):
    """The service refused the request (422): `details` as its body lists them (loc, msg, type)."""

    def __init__(self, details: list[dict[str, Any]]) -> None:
        self.details = details
        super().__init__("; ".join(f"{'.'.join(map(str, d['loc']))}: {d['msg']}" for d in details)[:1000])


class ClusterLostError(StaleCacheError):
    """POST /schedule named a cluster the service no longer has (404 `cluster_unknown`)."""


class InProcess:
    """The service's own use cases, called directly, with an in-process cluster cache."""

    def __init__(self) -> None:
        from app.store.index import ClusterCache
        from app.store.kv import MemoryKv

        self.clusters = ClusterCache(MemoryKv())

    def warm(self) -> None:
        """Ready the decision's compiled loops now, not in the first decision (`warm_decisions`)."""
        from app import service

        service.warm_decisions()

    def __call__(self, req: ScheduleRequest) -> ScheduleResponse:
        from app import service
        from app.errors import ClusterUnknownError, InputError

        try:
            return service.schedule(req, clusters=self.clusters)
        except InputError as exc:
            details = [{"loc": list(e.loc), "msg": e.msg, "type": e.type} for e in exc.errors]
            raise RefusedError(details) from exc
        except ClusterUnknownError as exc:
            raise ClusterLostError(str(exc)) from exc

    def put(self, cluster_id: str, body: ClusterPut) -> int:
        from app import service

        return service.put_cluster(self.clusters, TENANT, cluster_id, body).version

    def patch(self, cluster_id: str, version: int, body: ClusterPatch) -> int:
        from app import service
        from app.errors import NotFoundError, VersionConflictError

        try:
            return service.patch_cluster(self.clusters, TENANT, cluster_id, version, body).version
        except (NotFoundError, VersionConflictError) as exc:
            raise StaleCacheError(str(exc)) from exc


def in_process() -> InProcess:
    return InProcess()


class OverHttp:
    """A running service; an error status raises httpx.HTTPStatusError (409/404 on PATCH:
    StaleCacheError)."""

    def __init__(self, url: str, api_key: str | None = None, timeout_s: float = 120.0) -> None:
        headers = {"content-type": "application/json"}
        if api_key:
            headers["x-api-key"] = api_key
        self.client = httpx.Client(base_url=url.rstrip("/"), timeout=timeout_s, headers=headers)

    def _send(self, method: str, path: str, body: Any,
              headers: dict[str, str] | None = None) -> httpx.Response:
        resp = self.client.request(method, path, content=body.model_dump_json(exclude_unset=True),
                                   headers=headers)
        if resp.status_code in (404, 409) and method == "PATCH":
            raise StaleCacheError(f"{method} {path}: {resp.status_code}")
        if resp.status_code == 404 and _detail_type(resp) == "cluster_unknown":
            raise ClusterLostError(f"{method} {path}: 404 cluster_unknown")
        if resp.status_code == 422 and isinstance(_details(resp), list):
            raise RefusedError(_details(resp))
        if resp.status_code >= 400:
            raise httpx.HTTPStatusError(f"{method} {path}: {resp.status_code} {resp.text[:500]}",
                                        request=resp.request, response=resp)
        return resp

    def __call__(self, req: ScheduleRequest) -> ScheduleResponse:
        return ScheduleResponse.model_validate_json(self._send("POST", "/schedule", req).content)

    def put(self, cluster_id: str, body: ClusterPut) -> int:
        return int(self._send("PUT", f"/clusters/{cluster_id}", body).json()["version"])

    def patch(self, cluster_id: str, version: int, body: ClusterPatch) -> int:
        resp = self._send("PATCH", f"/clusters/{cluster_id}", body, {"if-match": f'"{version}"'})
        return int(resp.json()["version"])

    def close(self) -> None:
        self.client.close()


def _details(resp: httpx.Response) -> Any:
    try:
        return resp.json().get("detail")
    except ValueError:
        return None


def _detail_type(resp: httpx.Response) -> str:
    detail = _details(resp)
    return str(detail[0].get("type")) if isinstance(detail, list) and detail else ""


def over_http(url: str, api_key: str | None = None, timeout_s: float = 120.0) -> OverHttp:
    return OverHttp(url, api_key, timeout_s)

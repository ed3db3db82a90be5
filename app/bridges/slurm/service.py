"""The service as the bridge sees it: a function from a ScheduleRequest to a ScheduleResponse,
in process or over HTTP (the same wire schemas either way)."""

from __future__ import annotations

from collections.abc import Callable

import httpx

from schemas.schedule import ScheduleRequest, ScheduleResponse

Decide = Callable[[ScheduleRequest], ScheduleResponse]


def in_process() -> Decide:
    """The service's own use case, called directly."""
    from app import service

    return lambda req: service.schedule(req)


class OverHttp:
    """POST /schedule on a running service; an error status raises httpx.HTTPStatusError."""

    def __init__(self, url: str, api_key: str | None = None, timeout_s: float = 120.0) -> None:
        headers = {"content-type": "application/json"}
        if api_key:
            headers["x-api-key"] = api_key
        self.client = httpx.Client(base_url=url.rstrip("/"), timeout=timeout_s, headers=headers)

    def __call__(self, req: ScheduleRequest) -> ScheduleResponse:
        resp = self.client.post("/schedule", content=req.model_dump_json(exclude_unset=True))
        if resp.status_code >= 400:
            raise httpx.HTTPStatusError(f"POST /schedule: {resp.status_code} {resp.text[:500]}",
                                        request=resp.request, response=resp)
        return ScheduleResponse.model_validate_json(resp.content)

    def close(self) -> None:
        self.client.close()


def over_http(url: str, api_key: str | None = None, timeout_s: float = 120.0) -> OverHttp:
    return OverHttp(url, api_key, timeout_s)

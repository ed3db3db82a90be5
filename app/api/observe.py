"""Request ids, one JSON log line per request, and the Prometheus metrics of the service.

`RequestLog` is pure ASGI middleware: it takes the caller's `X-Request-ID` (or makes one), returns it
in the response header with the pid of the worker process that answered (`X-Worker-Pid`: several
uvicorn workers share the port), times the request, logs it, and feeds the latency histogram, labelled by the
route template (never the raw path, so ids in paths do not explode the label set).
"""

from __future__ import annotations

import json
import logging
import os
import time
import uuid
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from starlette.types import ASGIApp, Message, Receive, Scope, Send

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
NODE_BUCKETS = (1, 10, 100, 1_000, 10_000, 100_000)
access_log = logging.getLogger("hpcsched.access")


class Metrics:
    """The service's metrics, in a registry of their own (one per app, so tests can build many)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.latency = Histogram("hpcsched_request_duration_seconds", "Request latency by route",
                                 ["method", "route", "status"], buckets=LATENCY_BUCKETS,
                                 registry=self.registry)
        self.decisions = Counter("hpcsched_decisions_total", "Decisions made by POST /schedule, by kind",
                                 ["kind"], registry=self.registry)
        self.nodes_examined = Histogram("hpcsched_nodes_examined", "Nodes examined per scheduling pass",
                                        buckets=NODE_BUCKETS, registry=self.registry)
        self.budget_hits = Counter(
            "hpcsched_decision_budget_hits_total", "POST /schedule decisions ended early, by the limit hit "
            "(time, jobs; stopped: shutting down or the client left)", ["limit"], registry=self.registry)
        self.replays_running = Gauge("hpcsched_replays_running", "POST /simulate replays under way",
                                     registry=self.registry)
        self.replays_stopped = Counter(
            "hpcsched_replays_stopped_total", "POST /simulate replays stopped before their end, by reason "
            "(time: past HPCSCHED_SIM_MAX_SECONDS; stopped: the client left or the service is shutting down)",
            ["reason"], registry=self.registry)
        self.cache = Counter("hpcsched_cache_requests_total", "Cache lookups by cache and result",
                             ["cache", "result"], registry=self.registry)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {"ts": round(record.created, 3), "level": record.levelname.lower(),
                                "logger": record.name, "msg": record.getMessage()}
        line.update(getattr(record, "fields", {}))
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        return json.dumps(line)


def configure_logging(level: str) -> None:
    """JSON lines on stderr for the service's loggers (once; uvicorn's own loggers are left alone)."""
    root = logging.getLogger("hpcsched")
    root.setLevel(level.upper())
    if not any(isinstance(h.formatter, JsonFormatter) for h in root.handlers):
        handler = logging.StreamHandler()
        handler.setFormatter(JsonFormatter())
        root.addHandler(handler)
        root.propagate = False


class RequestLog:
    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app, self.metrics = app, metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers", []))
        given = headers.get(b"x-request-id", b"").decode("latin-1")
        request_id = given if 0 < len(given) <= 128 else uuid.uuid4().hex
        scope.setdefault("state", {})["request_id"] = request_id
        status = 500
        t0 = time.perf_counter()

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message["headers"] = [*message.get("headers", []),
                                      (b"x-request-id", request_id.encode("latin-1")),
                                      (b"x-worker-pid", str(os.getpid()).encode())]  # which worker answered
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            self._record(scope, request_id, status, time.perf_counter() - t0)

    def _record(self, scope: Scope, request_id: str, status: int, seconds: float) -> None:
        route = getattr(scope.get("route"), "path", None) or "unmatched"
        self.metrics.latency.labels(scope["method"], route, str(status)).observe(seconds)
        access_log.info("request", extra={"fields": {
            "request_id": request_id, "method": scope["method"], "path": scope["path"], "route": route,
            "status": status, "duration_ms": round(seconds * 1e3, 3),
        }})

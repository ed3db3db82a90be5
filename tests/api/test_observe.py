"""Request ids, JSON access logs and Prometheus metrics."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from app.api.observe import JsonFormatter
from schemas.dag import EXAMPLE as DAG_EXAMPLE
from schemas.schedule import EXAMPLE
from tests.conftest import Client


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.setFormatter(JsonFormatter())
        self.lines: list[dict] = []  # type: ignore[type-arg]

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(json.loads(self.format(record)))


@pytest.fixture
def log_lines() -> Iterator[Lines]:
    handler = Lines()
    logger = logging.getLogger("hpcsched")
    logger.addHandler(handler)
    yield handler
    logger.removeHandler(handler)


def samples(client: Client) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = client.get("/metrics").text
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def test_request_id_is_made_or_kept_and_logged(client: Client, log_lines: Lines) -> None:
    made = client.get("/healthz").headers["x-request-id"]
    assert len(made) == 32
    kept = client.get("/healthz", headers={"x-request-id": "rm-cycle-42"}).headers["x-request-id"]
    assert kept == "rm-cycle-42"
    line = log_lines.lines[-1]
    assert line["msg"] == "request" and line["request_id"] == "rm-cycle-42"
    assert line["route"] == "/healthz" and line["status"] == 200 and line["duration_ms"] >= 0


def test_refused_bodies_are_logged_too(client: Client, log_lines: Lines) -> None:
    r = client.post("/schedule", content=b"x" * 2_000_000, headers={"content-type": "application/json"})
    assert r.status_code == 413 and "x-request-id" in r.headers
    assert log_lines.lines[-1]["status"] == 413


def test_metrics_count_latency_decisions_nodes_and_cache(client: Client) -> None:
    client.post("/schedule", json=EXAMPLE)
    plan_id = client.post("/dag/plan", json=DAG_EXAMPLE).json()["plan_id"]
    client.get(f"/dag/plan/{plan_id}")
    client.get("/dag/plan/unknown")
    m = samples(client)
    route = (("method", "POST"), ("route", "/schedule"), ("status", "200"))
    assert m[("hpcsched_request_duration_seconds_count", route)] == 1
    get = (("method", "GET"), ("route", "/dag/plan/{plan_id}"), ("status", "404"))
    assert m[("hpcsched_request_duration_seconds_count", get)] == 1  # the template, not the raw path
    assert m[("hpcsched_decisions_total", (("kind", "backfill"),))] == 2
    assert m[("hpcsched_decisions_total", (("kind", "reservation"),))] == 1
    assert m[("hpcsched_nodes_examined_count", ())] == 1 and m[("hpcsched_nodes_examined_sum", ())] == 3
    assert m[("hpcsched_cache_requests_total", (("cache", "plan"), ("result", "hit")))] == 1
    assert m[("hpcsched_cache_requests_total", (("cache", "plan"), ("result", "miss")))] == 1

"""Readers beside a writer on a cached cluster in a real Redis: one writer PATCHes as fast as it can
while two readers GET the cluster and schedule on it. A reader is never refused (no 409) and never
sees a half-moved index (no 500); each answer is one whole version, the one the writer acknowledged."""

from __future__ import annotations

import threading
from typing import Any

import httpx
import pytest

from app.main import create_app
from app.settings import Settings
from tests.conftest import Client

NODES = 24
PATCHES = 240


def cluster() -> dict[str, Any]:
    nodes = [{"id": f"n{i:02d}", "queue": "batch", "labels": ["gpu"] if i % 4 == 0 else [],
              "capacity": {"cpu": 32, "mem_mib": 128_000, "gpu": 4 if i % 4 == 0 else 0}}
             for i in range(NODES)]
    return {"nodes": nodes, "running": []}


def change(i: int) -> dict[str, Any]:
    """Whole-node jobs started then ended, so nodes keep moving between the index's sorted sets."""
    node, jid = f"n{(i // 2) % NODES:02d}", f"j{i // 2}"
    if i % 2:
        return {"op": "job_ended", "job_id": jid}
    return {"op": "job_started", "job": {"id": jid, "queue": "batch", "start_time": 1_700_000_000,
                                         "walltime_s": 600 + i,
                                         "allocation": [{"node": node, "cpu": 32, "mem_mib": 100_000}]}}


SCHEDULE = {"now": 1_700_000_100, "cluster_id": "c1", "policy": {"name": "easy"},
            "pending": [{"id": f"p{i}", "queue": "batch", "submit_time": 1_699_999_000 + i,
                         "cpu": 16 if i % 3 else 32, "mem_mib": 8_000, "walltime_s": 900,
                         "gpu": 1 if i % 5 == 0 else 0} for i in range(12)]}


def writer(c: Client, acked: dict[int, tuple[int, int]], statuses: list[int]) -> None:
    version = 1
    for i in range(PATCHES):
        r = c.request("PATCH", "/clusters/c1", json={"changes": [change(i)]},
                      headers={"if-match": str(version)})
        statuses.append(r.status_code)
        assert r.status_code == 200, r.text  # the only writer: never stale
        body = r.json()
        version = body["version"]
        acked[version] = (body["nodes"], body["running"])


def answering(app: Any) -> Client:
    """A client that gets the 500 an unexpected exception answers, instead of the exception."""
    c = Client(app)
    c.transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    return c


def reader(c: Client, done: threading.Event, seen: list[tuple[str, int, Any]]) -> None:
    while not done.is_set():
        g = c.get("/clusters/c1")
        seen.append(("get", g.status_code, g.json() | {"etag": g.headers.get("etag")}))
        s = c.post("/schedule", json=SCHEDULE)
        seen.append(("schedule", s.status_code, s.json()))


def test_readers_beside_a_writer_see_whole_versions_and_are_never_refused(redis_url: str) -> None:
    """1 writer, 2 readers on real Redis: 0 5xx, 0 409 to readers, every answer one acknowledged
    version whole (sizes as the writer was told at that version; one body per version)."""
    app = create_app(Settings(redis_url=redis_url))
    put = Client(app).request("PUT", "/clusters/c1", json=cluster())
    assert put.status_code == 200
    acked: dict[int, tuple[int, int]] = {1: (NODES, 0)}
    statuses: list[int] = []
    seen: list[tuple[str, int, Any]] = []
    done = threading.Event()
    readers = [threading.Thread(target=reader, args=(answering(app), done, seen)) for _ in range(2)]
    for t in readers:
        t.start()
    try:
        writer(Client(app), acked, statuses)
    finally:
        done.set()
        for t in readers:
            t.join()
    assert statuses == [200] * PATCHES
    codes = [(kind, code) for kind, code, _ in seen]
    assert [x for x in codes if x[1] >= 500] == [], "server errors to readers"
    assert [x for x in codes if x[1] == 409] == [], "readers refused because the state moved"
    assert {code for _, code in codes} == {200}
    bodies: dict[int, dict[str, Any]] = {}
    for kind, _, body in seen:
        if kind == "get":
            v = body["version"]
            assert body["etag"] == f'"{v}"'
            assert (body["nodes"], body["running"]) == acked[v], f"version {v} read half-applied"
            assert bodies.setdefault(v, body) == body, f"two different bodies for version {v}"
        else:
            v = body["summary"]["cluster_version"]
            assert v in acked
            assert len(body["starts"]) + len(body["reservations"]) + len(body["pending"]) == 12
    assert len({b["version"] for b in bodies.values()}) > 1  # the readers did read while it moved


@pytest.mark.parametrize("examine", ["index", "all"])
def test_schedule_on_a_cached_cluster_says_which_version(examine: str, client: Client) -> None:
    """The schedule answer names the cluster version it was decided on (memory store)."""
    assert client.request("PUT", "/clusters/c1", json=cluster()).status_code == 200
    r = client.post("/schedule", json=SCHEDULE | {"examine": examine})
    assert r.status_code == 200 and r.json()["summary"]["cluster_version"] == 1
    client.request("PATCH", "/clusters/c1", json={"changes": [change(0)]}, headers={"if-match": "1"})
    assert client.post("/schedule", json=SCHEDULE | {"examine": examine}).json()["summary"][
        "cluster_version"] == 2

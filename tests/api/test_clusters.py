"""The cluster cache over HTTP, on the in-process store and on a real Redis: versions, If-Match,
concurrent writers, the same decisions as an inline snapshot, tenants, and Redis going away."""

from __future__ import annotations

import copy
import threading
from typing import Any

import pytest

from app.main import create_app
from app.settings import Settings
from schemas.schedule import EXAMPLE
from tests.api.test_plan_store import DEAD_URL
from tests.conftest import Client

SNAPSHOT = {"nodes": EXAMPLE["nodes"], "running": EXAMPLE["running"]}


@pytest.fixture(params=["memory", "redis"])
def settings(request: pytest.FixtureRequest) -> Settings:
    if request.param == "memory":
        return Settings()
    return Settings(redis_url=request.getfixturevalue("redis_url"))


def started(job_id: str, node: str = "n2", cpu: int = 1) -> dict[str, Any]:
    return {"op": "job_started", "job": {"id": job_id, "queue": "batch", "start_time": 1_700_000_000,
                                         "walltime_s": 600, "allocation": [{"node": node, "cpu": cpu}]}}


def test_put_get_patch_delete(settings: Settings) -> None:
    c = Client(create_app(settings))
    put = c.request("PUT", "/clusters/c1", json=SNAPSHOT)
    assert put.status_code == 200 and put.headers["etag"] == '"1"'
    info = c.get("/clusters/c1").json()
    assert (info["version"], info["nodes"], info["running"]) == (1, 3, 1)
    labels = {p["label"]: p for p in info["partitions"]}
    assert labels["gpu"]["nodes"] == 1 and labels["cpu"]["nodes"] == 2
    assert labels["cpu"]["score_min"] <= labels["cpu"]["score_max"]
    r = c.request("PATCH", "/clusters/c1", json={"changes": [started("x1")]}, headers={"if-match": '"1"'})
    assert r.status_code == 200 and r.json()["version"] == 2 and r.json()["running"] == 2
    stale = c.request("PATCH", "/clusters/c1", json={"changes": [started("x2")]}, headers={"if-match": "1"})
    assert stale.status_code == 409
    assert c.get("/clusters/c1").json()["running"] == 2  # the stale PATCH changed nothing
    assert c.request("DELETE", "/clusters/c1").status_code == 204
    assert c.get("/clusters/c1").status_code == 404
    again = c.request("PUT", "/clusters/c1", json=SNAPSHOT).json()
    assert again["version"] > 2  # a re-created cluster never reuses a version


def test_bad_patches_change_nothing(settings: Settings) -> None:
    c = Client(create_app(settings))
    c.request("PUT", "/clusters/c1", json=SNAPSHOT)
    cases = [
        ({"changes": [started("x1"), {"op": "job_ended", "job_id": "ghost"}]},
         ["body", "changes", 1, "job_id"]),
        ({"changes": [started("big", "n2", 64)]}, None),  # above the node's capacity
        ({"changes": [{"op": "node_removed", "node_id": "n9"}]}, ["body", "changes", 0, "node_id"]),
    ]
    for body, loc in cases:
        r = c.request("PATCH", "/clusters/c1", json=body, headers={"if-match": "1"})
        assert r.status_code == 422, r.text
        if loc:
            assert r.json()["detail"][0]["loc"] == loc
    no_if_match = c.request("PATCH", "/clusters/c1", json={"changes": [started("y")]})
    assert no_if_match.status_code == 422 and no_if_match.json()["detail"][0]["loc"] == ["header", "if-match"]
    assert c.get("/clusters/c1").json()["version"] == 1


def test_cached_and_inline_snapshots_decide_the_same(settings: Settings) -> None:
    c = Client(create_app(settings))
    c.request("PUT", "/clusters/c1", json=SNAPSHOT)
    inline = c.post("/schedule", json=EXAMPLE).json()
    body = {k: v for k, v in copy.deepcopy(EXAMPLE).items() if k not in ("nodes", "running")}
    cached = c.post("/schedule", json=body | {"cluster_id": "c1"}).json()
    for key in ("starts", "reservations", "migrations", "pending", "priorities"):
        assert cached[key] == inline[key]
    assert c.get("/clusters/c1").json()["version"] == 1  # starts are not applied by themselves


def test_concurrent_writers_lose_no_update(settings: Settings) -> None:
    app = create_app(settings)
    Client(app).request("PUT", "/clusters/c1", json=SNAPSHOT)
    writers, changes = 4, 5
    conflicts = [0] * writers

    def write(w: int) -> None:
        c = Client(app)
        for m in range(changes):
            while True:
                version = c.get("/clusters/c1").json()["version"]
                r = c.request("PATCH", "/clusters/c1", json={"changes": [started(f"w{w}-{m}")]},
                              headers={"if-match": str(version)})
                if r.status_code == 200:
                    break
                assert r.status_code == 409
                conflicts[w] += 1

    threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    info = Client(app).get("/clusters/c1").json()
    assert info["version"] == 1 + writers * changes
    assert info["running"] == 1 + writers * changes


def test_two_instances_share_a_redis_cluster(redis_url: str) -> None:
    one, two = (Client(create_app(Settings(redis_url=redis_url))) for _ in range(2))
    one.request("PUT", "/clusters/c1", json=SNAPSHOT)
    body = {k: v for k, v in EXAMPLE.items() if k not in ("nodes", "running")} | {"cluster_id": "c1"}
    first, second = one.post("/schedule", json=body).json(), two.post("/schedule", json=body).json()
    assert first["starts"] == second["starts"] and first["reservations"] == second["reservations"]
    two.request("PATCH", "/clusters/c1", json={"changes": [started("x")]}, headers={"if-match": "1"})
    assert one.get("/clusters/c1").json()["version"] == 2


def test_redis_down_inline_still_works_cached_is_503() -> None:
    c = Client(create_app(Settings(redis_url=DEAD_URL)))
    assert c.post("/schedule", json=EXAMPLE).status_code == 200
    body = {k: v for k, v in EXAMPLE.items() if k not in ("nodes", "running")} | {"cluster_id": "c1"}
    r = c.post("/schedule", json=body)
    assert r.status_code == 503 and "Redis" in r.json()["detail"][0]["msg"]
    assert c.request("PUT", "/clusters/c1", json=SNAPSHOT).status_code == 503


def test_tenants_do_not_see_each_others_clusters() -> None:
    c = Client(create_app(Settings(api_keys="alice=a,bob=b")))
    c.request("PUT", "/clusters/c1", json=SNAPSHOT, headers={"x-api-key": "a"})
    assert c.get("/clusters/c1", headers={"x-api-key": "a"}).status_code == 200
    assert c.get("/clusters/c1", headers={"x-api-key": "b"}).status_code == 404
    r = c.request("PATCH", "/clusters/c1", json={"changes": [started("x")]},
                  headers={"x-api-key": "b", "if-match": "1"})
    assert r.status_code == 404


def test_schedule_needs_exactly_one_snapshot(client: Client) -> None:
    both = copy.deepcopy(EXAMPLE) | {"cluster_id": "c1"}
    assert client.post("/schedule", json=both).status_code == 422
    neither = {k: v for k, v in EXAMPLE.items() if k not in ("nodes", "running")}
    assert client.post("/schedule", json=neither).status_code == 422
    unknown = neither | {"cluster_id": "nope"}
    assert client.post("/schedule", json=unknown).status_code == 404


def test_documented_examples_work(client: Client) -> None:
    from schemas.clusters import EXAMPLE_PATCH, EXAMPLE_PUT

    assert client.request("PUT", "/clusters/ex", json=EXAMPLE_PUT).status_code == 200
    r = client.request("PATCH", "/clusters/ex", json=EXAMPLE_PATCH, headers={"if-match": "1"})
    assert r.status_code == 200 and r.json()["running"] == 1


@pytest.mark.parametrize("policy", ["easy", "conservative", pytest.param("priority", marks=pytest.mark.slow)])
def test_index_decisions_are_the_same_inline_and_cached(settings: Settings, policy: str) -> None:
    """`examine: index` on an inline snapshot, and on the same cluster cached (in process or in
    Redis), give the same answer; `examine: all` on the cached cluster gives the inline answer."""
    from bench.workload import cluster, pending, request_body

    snap = cluster(1500)
    c = Client(create_app(settings))
    body = request_body(snap, pending(300), policy)
    put = c.request("PUT", "/clusters/big", json={k: body[k] for k in ("nodes", "running")})
    assert put.status_code == 200
    cached = {k: v for k, v in body.items() if k not in ("nodes", "running")} | {"cluster_id": "big"}
    answers = [c.post("/schedule", json=b).json() for b in (
        body | {"examine": "index"}, cached, body, cached | {"examine": "all"})]
    for key in ("starts", "reservations", "migrations", "pending", "priorities"):
        assert answers[0][key] == answers[1][key], (policy, key)
        assert answers[2][key] == answers[3][key], (policy, key)
    index, full = answers[1]["summary"], answers[2]["summary"]
    assert index["nodes_total"] == full["nodes_total"] == 1500
    assert 0 < index["nodes_examined"] < 1500
    assert index["started"] + index["backfilled"] > 0.9 * (full["started"] + full["backfilled"])


def test_an_unknown_or_lost_cluster_tells_the_resource_manager_to_put_it_again(settings: Settings) -> None:
    """GET, PATCH, DELETE and a schedule on a cluster the cache does not hold: 404, type
    `cluster_unknown`, the field that named it, and the cure (PUT it again) in the message."""
    c = Client(create_app(settings))
    body = {k: v for k, v in EXAMPLE.items() if k not in ("nodes", "running")} | {"cluster_id": "gone"}
    answers = [
        (c.get("/clusters/gone"), ["path", "cluster_id"]),
        (c.request("PATCH", "/clusters/gone", json={"changes": [started("x")]}, headers={"if-match": "1"}),
         ["path", "cluster_id"]),
        (c.request("DELETE", "/clusters/gone"), ["path", "cluster_id"]),
        (c.post("/schedule", json=body), ["body", "cluster_id"]),
        (c.post("/schedule", json=body | {"examine": "all"}), ["body", "cluster_id"]),
    ]
    for r, loc in answers:
        assert r.status_code == 404, r.text
        (detail,) = r.json()["detail"]
        assert (detail["type"], detail["loc"]) == ("cluster_unknown", loc)
        assert "PUT /clusters/gone" in detail["msg"]


def test_a_stale_writer_is_told_what_to_do(settings: Settings) -> None:
    """409 stays for writers, with a writer's instruction: nothing changed, re-read, resend."""
    c = Client(create_app(settings))
    c.request("PUT", "/clusters/c1", json=SNAPSHOT)
    c.request("PATCH", "/clusters/c1", json={"changes": [started("a")]}, headers={"if-match": "1"})
    r = c.request("PATCH", "/clusters/c1", json={"changes": [started("b")]}, headers={"if-match": "1"})
    assert r.status_code == 409
    msg = r.json()["detail"][0]["msg"]
    assert "is at version 2, not 1" in msg and "nothing was changed" in msg and "If-Match" in msg


def test_an_if_match_ahead_of_the_cache_says_it_lost_changes(settings: Settings) -> None:
    """A cache that lost acknowledged PATCHes (restarted with part of them) is behind the version
    the writer holds: 409 `cluster_behind`, telling it to PUT again, never a silent mismatch."""
    c = Client(create_app(settings))
    c.request("PUT", "/clusters/c1", json=SNAPSHOT)
    r = c.request("PATCH", "/clusters/c1", json={"changes": [started("a")]}, headers={"if-match": "7"})
    assert r.status_code == 409
    (detail,) = r.json()["detail"]
    assert (detail["type"], detail["loc"]) == ("cluster_behind", ["header", "if-match"])
    assert "PUT /clusters/c1" in detail["msg"] and "at version 1, behind the 7" in detail["msg"]

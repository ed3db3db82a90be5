"""The snapshot fields Slurm needs, over HTTP: overlapping queues, weights, whole-node jobs, memory
per cpu, maintenance windows, inline and on a cached cluster; a 422 naming the field for each bad
reference."""

from __future__ import annotations

from typing import Any

import pytest

from app.main import create_app
from app.settings import Settings
from tests.conftest import Client

NOW = 1_699_999_980  # a multiple of the 60 s grain


def nodes() -> list[dict[str, Any]]:
    return [{"id": "n1", "queues": ["batch", "debug"], "capacity": {"cpu": 4, "mem_mib": 4000}},
            {"id": "n2", "queue": "batch", "weight": 0, "capacity": {"cpu": 4, "mem_mib": 4000}}]


def pending(jid: str = "p1", **kw: Any) -> dict[str, Any]:
    return {"id": jid, "queue": "batch", "submit_time": NOW - 100, "walltime_s": 3600, **kw}


def schedule(c: Client, **body: Any) -> Any:
    r = c.post("/schedule", json={"now": NOW, **body})
    assert r.status_code == 200, r.text
    return r.json()


def errors(c: Client, url: str, body: dict[str, Any], method: str = "POST",
           **kw: Any) -> list[tuple[tuple[Any, ...], str]]:
    r = c.request(method, url, json=body, **kw)
    assert r.status_code == 422, r.text
    return [(tuple(e["loc"]), e["msg"]) for e in r.json()["detail"]]


@pytest.fixture
def c() -> Client:
    return Client(create_app(Settings()))


def test_weight_first_and_a_debug_job_on_the_shared_node(c: Client) -> None:
    """n2 (weight 0) is taken before n1; a debug job may only use n1, which serves debug too."""
    out = schedule(c, nodes=nodes(), pending=[pending("b"), pending("d", queue="debug")])
    assert {s["job_id"]: s["node_ids"] for s in out["starts"]} == {"b": ["n2"], "d": ["n1"]}
    assert out["summary"]["queue_load"] == {"batch": 0.0, "debug": 0.0}


def test_memory_per_cpu_is_cpu_times_it(c: Client) -> None:
    """4 cpus x 1000 MiB fit a 4000 MiB node; 4 x 1001 never does."""
    out = schedule(c, nodes=nodes(), pending=[pending("ok", cpu=4, mem_mib_per_cpu=1000),
                                              pending("big", cpu=4, mem_mib_per_cpu=1001)])
    assert [s["job_id"] for s in out["starts"]] == ["ok"]
    assert {p["job_id"]: p["reason"] for p in out["pending"]} == {"big": "never_fits"}


def test_an_exclusive_job_takes_the_whole_node(c: Client) -> None:
    """The exclusive one-cpu job takes n2 whole: the next one-cpu job goes to n1."""
    out = schedule(c, nodes=nodes(), pending=[pending("x", exclusive=True), pending("y")])
    assert {s["job_id"]: s["node_ids"] for s in out["starts"]} == {"x": ["n2"], "y": ["n1"]}


def test_a_window_keeps_jobs_off_its_nodes(c: Client) -> None:
    """Both nodes enter a window in 30 minutes: a one-hour job starts nowhere, and is reserved
    at the window's end."""
    windows = [{"id": "maint", "nodes": ["n1", "n2"], "start": NOW + 1800, "end": NOW + 7200}]
    out = schedule(c, nodes=nodes(), windows=windows, pending=[pending()])
    assert out["starts"] == []
    assert [(r["job_id"], r["start_time"]) for r in out["reservations"]] == [("p1", NOW + 7200)]


@pytest.mark.parametrize(("change", "loc", "words"), [
    ({"windows": [{"id": "w", "nodes": ["n9"], "start": NOW, "end": NOW + 60}]},
     ("body", "windows", 0, "nodes", 0), "unknown node"),
    ({"windows": [{"id": "w", "nodes": ["n1"], "start": NOW, "end": NOW}]},
     ("body", "windows", 0, "end"), "not after"),
    ({"windows": [{"id": "w", "nodes": ["n1", "n1"], "start": NOW, "end": NOW + 60}]},
     ("body", "windows", 0, "nodes", 1), "twice"),
    ({"windows": [{"id": "w", "nodes": ["n1"], "start": NOW, "end": NOW + 60}] * 2},
     ("body", "windows", 1, "id"), "duplicate"),
    ({"pending": [pending(mem_mib=10, mem_mib_per_cpu=10)]},
     ("body", "pending", 0, "mem_mib_per_cpu"), "not both"),
    ({"nodes": [{"id": "n1", "queue": "x", "queues": ["a", "b"], "capacity": {"cpu": 1}}]},
     ("body", "nodes", 0, "queue"), "not one of"),
    ({"nodes": [{"id": "n1", "weight": -1, "capacity": {"cpu": 1}}]},
     ("body", "nodes", 0, "weight"), "greater than or equal"),
], ids=["window-unknown-node", "window-empty", "window-node-twice", "window-duplicate-id",
        "mem-twice", "queue-not-in-queues", "negative-weight"])
def test_bad_fields_name_themselves(c: Client, change: dict[str, Any], loc: tuple[Any, ...],
                                    words: str) -> None:
    """Each bad reference is a 422 at its own path."""
    body = {"now": NOW, "nodes": nodes(), "pending": [pending()], **change}
    found = errors(c, "/schedule", body)
    assert any(where == loc and words in msg for where, msg in found), found


def test_a_cached_cluster_keeps_its_windows_and_queues(c: Client) -> None:
    """PUT with a window: the cached pass keeps off it; PATCH window_removed: the job starts;
    a request's own window is added to the cached ones; node_added takes several queues."""
    window = {"id": "maint", "nodes": ["n1", "n2"], "start": NOW + 1800, "end": NOW + 7200}
    assert c.request("PUT", "/clusters/k", json={"nodes": nodes(), "windows": [window]}).status_code == 200
    for examine in ("index", "all"):
        out = schedule(c, cluster_id="k", examine=examine, pending=[pending()])
        assert out["starts"] == [] and out["reservations"][0]["start_time"] == NOW + 7200
    r = c.request("PATCH", "/clusters/k", headers={"if-match": '"1"'},
                  json={"changes": [{"op": "window_removed", "window_id": "maint"}]})
    assert r.status_code == 200, r.text
    assert [s["job_id"] for s in schedule(c, cluster_id="k", pending=[pending()])["starts"]] == ["p1"]
    again = schedule(c, cluster_id="k", windows=[window], pending=[pending()])
    assert again["starts"] == [] and again["reservations"][0]["start_time"] == NOW + 7200
    added = {"op": "node_added", "node": {"id": "n3", "queues": ["debug", "long"],
                                          "capacity": {"cpu": 8}}}
    r = c.request("PATCH", "/clusters/k", headers={"if-match": '"2"'}, json={"changes": [added]})
    assert r.status_code == 200, r.text
    out = schedule(c, cluster_id="k", pending=[pending("l", queue="long", cpu=8)])
    assert [(s["job_id"], s["node_ids"]) for s in out["starts"]] == [("l", ["n3"])]


def test_bad_window_patches_change_nothing(c: Client) -> None:
    """window_added on an unknown node, a removed window that does not exist, a request window on
    an unknown node of a cached cluster: 422 naming the field, and the version stays."""
    assert c.request("PUT", "/clusters/k", json={"nodes": nodes()}).status_code == 200
    bad = {"op": "window_added", "window": {"id": "w", "nodes": ["n9"], "start": NOW, "end": NOW + 60}}
    found = errors(c, "/clusters/k", {"changes": [bad]}, "PATCH", headers={"if-match": '"1"'})
    assert found[0][0] == ("body", "changes", 0, "window", "nodes", 0)
    gone = {"op": "window_removed", "window_id": "nope"}
    found = errors(c, "/clusters/k", {"changes": [gone]}, "PATCH", headers={"if-match": '"1"'})
    assert found[0][0] == ("body", "changes", 0, "window_id")
    body = {"now": NOW, "cluster_id": "k", "pending": [pending()],
            "windows": [{"id": "w", "nodes": ["n9"], "start": NOW, "end": NOW + 60}]}
    assert errors(c, "/schedule", body)[0][0] == ("body", "windows", 0, "nodes", 0)
    assert c.get("/clusters/k").json()["version"] == 1

"""Conservative backfilling keeps its promises across cycles when the caller sends them back."""

from __future__ import annotations

from typing import Any

from tests.conftest import Client


def request(promise: dict[str, Any] | None = None) -> dict[str, Any]:
    # Two one-core nodes. At the previous cycle R1 held n1 until 10 and R2 held n2 until 20, so A
    # (both nodes) was reserved at 20 and B (one node, 10 s) fitted before it: n1 at 10.
    # R2 ended early; now = 5. Planned from scratch, A moves to 10 on both nodes and B slides to 20.
    b = {"id": "B", "queue": "q", "submit_time": 1, "nodes": 1, "cpu": 1, "walltime_s": 10} | (promise or {})
    return {
        "now": 5,
        "nodes": [{"id": n, "queue": "q", "capacity": {"cpu": 1}} for n in ("n1", "n2")],
        "running": [{"id": "R1", "queue": "q", "start_time": 0, "walltime_s": 10,
                     "allocation": [{"node": "n1", "cpu": 1}]}],
        "pending": [{"id": "A", "queue": "q", "submit_time": 0, "nodes": 2, "cpu": 1, "walltime_s": 10}, b],
        "policy": {"name": "conservative", "params": {"time_grain_s": 1}},
    }


def reserved(client: Client, body: dict[str, Any]) -> dict[str, tuple[float, list[str]]]:
    """Planned start and nodes per job; a job started now counts as planned at now."""
    r = client.post("/schedule", json=body)
    assert r.status_code == 200, r.text
    out = {x["job_id"]: (x["start_time"], x["node_ids"]) for x in r.json()["reservations"]}
    return out | {x["job_id"]: (body["now"], x["node_ids"]) for x in r.json()["starts"]}


def test_without_the_promise_a_replan_pushes_b_later(client: Client) -> None:
    assert reserved(client, request()) == {"A": (10, ["n1", "n2"]), "B": (20, ["n1"])}


def test_with_the_promise_b_keeps_its_slot(client: Client) -> None:
    # with n1 held for B from 10 to 20, A stays at 20, and B even fits n2 now, before A needs it
    got = reserved(client, request({"promised_start": 10, "promised_nodes": ["n1"]}))
    assert got == {"A": (20, ["n1", "n2"]), "B": (5, ["n2"])}


def test_bad_promises_are_422(client: Client) -> None:
    for promise, loc in [({"promised_start": 10}, ["body", "pending", 1, "promised_nodes"]),
                         ({"promised_start": 10, "promised_nodes": ["n9"]},
                          ["body", "pending", 1, "promised_nodes", 0]),
                         ({"promised_start": 10, "promised_nodes": ["n1", "n2"]},
                          ["body", "pending", 1, "promised_nodes"])]:
        r = client.post("/schedule", json=request(promise))
        assert r.status_code == 422 and r.json()["detail"][0]["loc"] == loc, r.text

"""The wire's snapshot read back into the core's records exactly (POST /schedule's parse, checks and
conversion), and the holdings of a running job that lists a node twice."""

from __future__ import annotations

import json

import pytest

from app.convert import check_snapshot, snapshot_from_wire
from app.errors import InputError
from bench.workload import cluster, pending, production, request_body
from schemas.schedule import ScheduleRequest


@pytest.mark.parametrize("which", ["bench", "production"])
def test_a_snapshot_sent_is_the_snapshot_decided(which: str) -> None:
    """Every node, running job, window and pending job of bench/workload.py's problems, sent as JSON,
    comes back as the same record (all fields compared): nothing dropped, nothing defaulted wrong."""
    snap, jobs = (cluster(120), pending(200)) if which == "bench" else production(120, 200)
    req = ScheduleRequest.model_validate_json(json.dumps(request_body(snap, jobs, "easy")), strict=True)
    got, got_jobs = snapshot_from_wire(req, check_snapshot(req))
    assert got.nodes == snap.nodes
    assert got.running == snap.running
    assert got.windows == snap.windows
    assert got_jobs == jobs
    assert got.now == snap.now


def test_nodes_without_allocated_take_what_their_running_jobs_hold() -> None:
    snap, jobs = cluster(60), pending(10)
    body = request_body(snap, jobs, "easy")
    for n in body["nodes"]:
        del n["allocated"]
    req = ScheduleRequest.model_validate_json(json.dumps(body), strict=True)
    got, _ = snapshot_from_wire(req, check_snapshot(req))
    assert [n.alloc for n in got.nodes] == [n.alloc for n in snap.nodes]


def test_a_node_listed_twice_is_named_and_not_counted() -> None:
    """The repeat is the error; it is not added to what the node holds (no second, false error)."""
    body = {"now": 0, "nodes": [{"id": "n1", "capacity": {"cpu": 4}}],
            "running": [{"id": "r1", "start_time": 0, "walltime_s": 60,
                         "allocation": [{"node": "n1", "cpu": 3}, {"node": "n1", "cpu": 3},
                                        {"node": "nx", "cpu": 1}]}]}
    req = ScheduleRequest.model_validate_json(json.dumps(body), strict=True)
    with pytest.raises(InputError) as caught:
        check_snapshot(req)
    assert [(e.loc, e.type) for e in caught.value.errors] == [
        (("body", "running", 0, "allocation", 1, "node"), "duplicate"),
        (("body", "running", 0, "allocation", 2, "node"), "unknown_node")]

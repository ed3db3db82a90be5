"""The wire's snapshot read back into the core's records exactly (POST /schedule's parse, checks and
conversion), and the holdings of a running job that lists a node twice."""

from __future__ import annotations

import json

import numpy as np
import pytest

from app.convert import check_snapshot, snapshot_from_wire
from app.errors import InputError
from app.sched.cluster import NodeColumns
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


@pytest.mark.parametrize("which", ["bench", "production", "no allocated", "shuffled"])
def test_the_columns_made_from_the_wire_are_those_of_the_records(which: str) -> None:
    """A decision over the whole snapshot reads columns made from the wire's nodes without records
    (`NodeColumns.of_lists`): they are `NodeColumns.of` of the records, field for field (order of
    the nodes, queues as slices or index arrays, holdings), and the records read back are the same."""
    snap, jobs = production(150, 50) if which == "production" else (cluster(150), pending(50))
    body = request_body(snap, jobs, "easy")
    if which == "no allocated":
        for n in body["nodes"]:
            del n["allocated"]
    if which == "shuffled":  # input order is not the columns' order; equal weights decide by id
        body["nodes"] = body["nodes"][::-1]
        for k, n in enumerate(body["nodes"]):
            n["weight"] = k % 3
    req = ScheduleRequest.model_validate_json(json.dumps(body), strict=True)
    plain, _ = snapshot_from_wire(req, check_snapshot(req))
    got, _ = snapshot_from_wire(req, check_snapshot(req), columns=True)
    assert got.columns is not None and plain.columns is None
    want = NodeColumns.of(plain.nodes, plain.running)
    for name in ("ids", "pos", "queue_of", "labels", "serves"):
        assert getattr(got.columns, name) == getattr(want, name), name
    assert got.columns.queues.keys() == want.queues.keys()
    every = np.arange(len(want.ids))
    for q, where in want.queues.items():
        assert isinstance(got.columns.queues[q], slice) == isinstance(where, slice)
        assert np.array_equal(every[got.columns.queues[q]], every[where])
    for name in ("cap", "alloc", "usable", "cpu_load", "cpu_ghz"):
        assert np.array_equal(getattr(got.columns, name), getattr(want, name)), name
    for a, b in zip(got.columns.held, want.held, strict=True):
        assert np.array_equal(a, b)
    assert len(got.nodes) == len(plain.nodes) and got.nodes == plain.nodes and tuple(got.nodes) == plain.nodes

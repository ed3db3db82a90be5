"""A decision or replay raises the cycle collector's threshold only while it runs, however they overlap."""

from __future__ import annotations

import gc
import threading

import pytest

from app.sched.collector import REPLAY_THRESHOLD, rare_collections


def test_raised_inside_and_restored_after() -> None:
    before = gc.get_threshold()
    with rare_collections():
        assert gc.get_threshold() == (max(REPLAY_THRESHOLD, before[0]), *before[1:])
    assert gc.get_threshold() == before


def test_restored_when_the_caller_fails() -> None:
    before = gc.get_threshold()
    with pytest.raises(RuntimeError), rare_collections():
        raise RuntimeError("decision failed")
    assert gc.get_threshold() == before


def test_overlapping_callers_restore_only_when_the_last_ends() -> None:
    before = gc.get_threshold()
    first_in, second_done, leave = threading.Event(), threading.Event(), threading.Event()
    seen: list[tuple[int, int, int]] = []

    def first() -> None:
        with rare_collections():
            first_in.set()
            leave.wait(5)

    def second() -> None:
        first_in.wait(5)
        with rare_collections():
            pass
        seen.append(gc.get_threshold())  # the first is still inside: still raised
        second_done.set()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    second_done.wait(5)
    leave.set()
    for t in threads:
        t.join(5)
    assert seen == [(max(REPLAY_THRESHOLD, before[0]), *before[1:])]
    assert gc.get_threshold() == before


def test_the_largest_threshold_asked_holds_while_its_caller_is_inside() -> None:
    """A big request body's wait (POST /schedule) and a decision's, nested: the larger one holds until
    its caller leaves, then the smaller, then the threshold from before."""
    before = gc.get_threshold()
    big = before[0] + 1_000_000
    with rare_collections(big):
        assert gc.get_threshold()[0] == big
        with rare_collections():
            assert gc.get_threshold()[0] == big
        assert gc.get_threshold()[0] == big
    assert gc.get_threshold() == before
    with rare_collections(), rare_collections(big):
        assert gc.get_threshold()[0] == big
    assert gc.get_threshold() == before


def test_a_body_parsed_as_served_is_freed_without_a_collector_pass() -> None:
    """The objects of a parsed and checked snapshot leave the collector's count when they are freed:
    the wait costs no pass later."""
    import json

    from app.api.routes.schedule import BYTES_PER_OBJECT
    from app.convert import check_snapshot, snapshot_from_wire
    from bench.workload import cluster, pending, request_body
    from schemas.schedule import ScheduleRequest

    raw = json.dumps(request_body(cluster(300), pending(300), "easy")).encode()
    passes: list[int] = []

    def parse_and_check() -> int:
        req = ScheduleRequest.model_validate_json(raw, strict=True)
        snapshot_from_wire(req, check_snapshot(req))
        return gc.get_count()[0]

    gc.collect()
    gc.callbacks.append(lambda phase, info: passes.append(info["generation"]) if phase == "start" else None)
    try:
        with rare_collections(len(raw) // BYTES_PER_OBJECT):
            inside = parse_and_check()
        after = gc.get_count()[0]
    finally:
        gc.callbacks.pop()
    assert passes == []
    assert inside > 10_000 > after

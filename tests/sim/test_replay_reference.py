"""Speed work on the replay or the pass must keep every schedule: the records of a 600-job slice of
SDSC-SP2 under nine policy settings hash to the digests taken before it (tests/sim/replay_reference.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.sim.replay_reference import F1_EASY, digest, run, sdsc

REFERENCE = {
    "fcfs": "8de370304c8016346cef",
    "firstfit": "e5e4ef355b045623810c",
    "easy": "ff7e71f4d68d921f0622",
    # 2026-11-27: the reference pass found two reservation-search bugs (a tie went past the first
    # node in node order; candidate instants after the first were tried without the skipped nodes);
    # their fixes move conservative's schedule on this slice (was fc157bf252a43acd9a0b)
    "conservative": "937a09fe3bcebc9f1e9a",
    "memory_backfill": "d0fb4680183933538400",
    "priority": "7b5bc95b1113d0c52f08",
    F1_EASY: "ecb96ca0c633c1a2fd75",
    F1_EASY + ";predicted=true": "1cd43dfdc5fc729a0c85",
    'priority:order=sjf;reservation_depth=2;backfill_order="sjf"': "c0803b01390669b64400",
}
LONG = {"firstfit", "conservative", "memory_backfill", "priority"}  # unlimited reservation depths


@pytest.fixture(scope="module")
def workload():  # type: ignore[no-untyped-def]
    return sdsc()


@pytest.mark.parametrize("label", [pytest.param(k, marks=pytest.mark.slow) if k in LONG else k
                                   for k in REFERENCE])
def test_the_replay_keeps_todays_schedules(workload, label: str) -> None:  # type: ignore[no-untyped-def]
    """Same start, end and nodes for every job as the reference replay."""
    assert digest(run(workload, label)) == REFERENCE[label]


def test_the_digest_sees_one_job_moved(workload) -> None:  # type: ignore[no-untyped-def]
    """The check can fail: one job started a second later, or on another node, changes the digest."""
    result = run(workload, "fcfs")
    base = digest(result)
    first = result.records[0]
    later = replace(result, records=[replace(first, start=first.start + 1), *result.records[1:]])
    moved = replace(result, records=[replace(first, nodes=("n999",)), *result.records[1:]])
    assert digest(later) != base and digest(moved) != base

"""Speed work on the replay or the pass must keep every schedule: the records of a 600-job slice of
SDSC-SP2 under nine policy settings hash to the digests taken before it (tests/sim/replay_reference.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.sim.replay_reference import F1_EASY, digest, run, sdsc

REFERENCE = {
    "fcfs": "8de370304c8016346cef",
    "firstfit": "e5e4ef355b045623810c",
    "easy": "e8c58d50b4e7cee63d5b",
    "conservative": "2db0180679eebf8693a3",
    "memory_backfill": "4070a9c378bfba66d454",
    "priority": "19605e3a627446399758",
    F1_EASY: "128ff879f00cb2005e09",
    F1_EASY + ";predicted=true": "8ebd593e2c05aa26af4d",
    'priority:order=sjf;reservation_depth=2;backfill_order="sjf"': "4a351064167afc7ba1b5",
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

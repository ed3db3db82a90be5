"""Instants not asked (app.sim.settled) change nothing: the incremental replay's records equal a
replay that asks at every instant, job for job, reservations included, with fewer decisions."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.cli import policy_params, policy_spec
from app.sim.replay import replay
from app.sim.settled import applies
from app.sim.swf import read_swf
from app.sim.workload import Machine, Reading, default_machine, workload

SDSC = Path(__file__).parent.parent / "data" / "SDSC-SP2-1998-4.2-cln.first1500.swf"
FCFS_ORDER = 'priority:order="fcfs";reservation_depth=1;selector="first_fit"'


@pytest.fixture(scope="module")
def sdsc():  # type: ignore[no-untyped-def]
    """Told run times past the requests (raise_to_run): no job overruns what it is told, the rule's
    condition (the default reading tells the requests, and 88 of these jobs overrun theirs)."""
    trace = read_swf(SDSC, limit=900)
    return workload(trace, default_machine(trace), Reading(raise_to_run=True))


@pytest.mark.parametrize("label", ["easy", "fcfs", "easy:time_grain_s=60",
                                   FCFS_ORDER + ';backfill_order="sjf";time_grain_s=60'])
def test_incremental_records_equal_a_replay_asked_at_every_instant(sdsc, label: str) -> None:  # type: ignore[no-untyped-def]
    """Same start, end, nodes, kind and first reservation for every job; some instants not asked."""
    name, pairs = policy_spec(label)
    params = policy_params(name, pairs)[1]
    full = replay(sdsc, name, params, incremental=False)
    fast = replay(sdsc, name, params)
    assert fast.records == full.records and fast.unstarted == full.unstarted
    assert fast.decisions < full.decisions


@pytest.mark.parametrize(("label", "predict", "machine", "expected"), [
    ("easy", False, None, True),
    ("fcfs", False, None, True),
    (FCFS_ORDER, False, None, True),
    ("easy", True, None, False),  # told times run out: time-dependent
    ("easy:reservation_depth=2", False, None, False),  # a second reservation may move
    # new jobs may rank first:
    ('priority:order="sjf";reservation_depth=1;selector="first_fit"', False, None, False),
    ('easy:selector="least_load"', False, None, False),
    ("conservative", False, None, False),
    ("firstfit", False, None, False),
    ("easy", False, Machine(64, 2), False),  # multi-core nodes
], ids=lambda v: str(v))
def test_the_rule_applies_only_where_it_is_proven(sdsc, label: str, predict: bool, machine: Machine | None,
                                                   expected: bool) -> None:  # type: ignore[no-untyped-def]
    """fcfs order, one reservation, first_fit, one-core nodes, no prediction; nothing else."""
    name, pairs = policy_spec(label)
    w = sdsc if machine is None else workload(read_swf(SDSC, limit=10), machine)
    assert applies(w, name, policy_params(name, pairs)[1], predict) is expected


def test_the_rule_is_off_when_a_job_overruns_what_it_is_told() -> None:
    """The default reading tells a job its request even when it ran longer: an overrunning job's nodes
    are expected free at the next grain, a time that moves with the instant asked, so a job that
    waited at t0 for the head's reservation may backfill at t1 (found on random workloads at a 60 s
    grain): the rule is not used."""
    trace = read_swf(SDSC, limit=900)
    told = workload(trace, default_machine(trace))
    assert any(j.run > j.estimate for j in told.jobs)
    assert not applies(told, "easy", policy_params("easy", [])[1], False)

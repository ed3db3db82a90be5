"""The aging term in one decision: an aged job goes ahead of the order, and says why in its factors."""

from __future__ import annotations

from app.sched.params import PriorityParams
from app.sched.registry import decide
from tests.builders import NOW, job, node, running, snapshot


def test_a_job_past_the_wait_cap_ranks_first_and_its_factors_say_so() -> None:
    """n1 is full until 9000. L (7200 s) has waited 5000 s, S (600 s) 1000 s, T (300 s) 500 s.
    Shortest first, T takes the reservation at 9000; with a cap of 3600 s L is aged and takes it,
    and T and S follow shortest first. The priorities stay sjf's (minus the estimate)."""
    snap = snapshot([node("n1")], [running("r1", {"n1": (4, 0, 0)}, 9000)])
    jobs = [job("L", NOW - 5000, 7200, cpu=4), job("S", NOW - 1000, 600, cpu=4),
            job("T", NOW - 500, 300, cpu=4)]
    common = dict(order="sjf", reservation_depth=1, selector="first_fit", time_grain_s=1)
    plain = decide(snap, jobs, "priority", PriorityParams(**common))
    assert [p.job_id for p in plain.priorities] == ["T", "S", "L"]
    assert [r.job_id for r in plain.reservations] == ["T"]
    assert "aged" not in plain.priorities[0].factors
    aged = decide(snap, jobs, "priority", PriorityParams(**common, wait_cap_s=3600.0))
    assert [p.job_id for p in aged.priorities] == ["L", "T", "S"]
    assert [(r.job_id, r.start_time) for r in aged.reservations] == [("L", 9000.0)]
    factors = {p.job_id: p.factors for p in aged.priorities}
    assert factors["L"] == {"walltime_s": 7200.0, "age_s": 5000.0, "wait_cap_s": 3600.0, "aged": 1.0}
    assert factors["T"]["aged"] == 0.0 and factors["T"]["age_s"] == 500.0
    assert {p.job_id: p.priority for p in aged.priorities} == {"L": -7200.0, "S": -600.0, "T": -300.0}


def test_the_aged_jobs_go_first_come_first_served_among_themselves() -> None:
    """Two aged jobs under sjf: the older goes first though it is longer; the young short job last."""
    snap = snapshot([node("n1")], [running("r1", {"n1": (4, 0, 0)}, 9000)])
    jobs = [job("B", 200, 600, cpu=1), job("A", 100, 7200, cpu=4), job("C", NOW - 10, 60, cpu=1)]
    common = dict(order="sjf", reservation_depth=1, selector="first_fit")
    plain = decide(snap, jobs, "priority", PriorityParams(**common))
    assert [x.job_id for x in plain.priorities] == ["C", "B", "A"]
    d = decide(snap, jobs, "priority", PriorityParams(**common, wait_cap_s=3600.0))
    assert [x.job_id for x in d.priorities] == ["A", "B", "C"]
    assert [x.job_id for x in d.priorities if x.factors["aged"]] == ["A", "B"]

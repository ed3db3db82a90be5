"""Selective reservation (Srinivasan et al. 2002), `priority`'s `reserve_xfactor`: a blocked job takes a
reservation only once its expansion factor (wait + told) / told reaches the threshold. Exact starts
on a hand trace, in the Python replay and the compiled one; the wire model's bounds."""

from __future__ import annotations

import pytest
from pydantic import TypeAdapter, ValidationError

from app.sched.params import PriorityParams
from app.sim.replay import replay
from app.sim.swf import read_swf
from app.sim.workload import Machine, workload
from schemas.policies import PolicySpec
from tests.sim.test_predicted import swf

# 2 nodes. J1 (t0, 1 node) runs 100 s; J2 (t1, both nodes, 100 s) is blocked until 100; J3 (t2, 1 node,
# 1,000 s) fits on the free node now but would delay J2 past 100
TRACE = swf((0, 100, 1, 100, 1), (1, 100, 2, 100, 2), (2, 1000, 1, 1000, 3))


def starts(xfactor: float | None, compiled: bool) -> dict[str, float]:
    params = PriorityParams(order="fcfs", reservation_depth=1, selector="first_fit", time_grain_s=1,
                            reserve_xfactor=xfactor)
    result = replay(workload(read_swf(TRACE), Machine(2)), "priority", params, compiled=compiled)
    return {r.job.id: r.start for r in result.records}


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "python"])
def test_a_job_not_yet_expanded_enough_takes_no_reservation(compiled: bool) -> None:
    """Without a threshold (or at 1, which every job reaches) J2 reserves at 100 and J3 waits; at 2,
    J2's factor at t2 is (1 + 100) / 100 = 1.01: no reservation, J3 backfills and J2 waits for it."""
    assert starts(None, compiled) == starts(1.0, compiled) == {"1": 0, "2": 100, "3": 200}
    assert starts(2.0, compiled) == {"1": 0, "3": 2, "2": 1002}


@pytest.mark.parametrize("bad", [0.5, -1, float("inf"), "x"])
def test_a_threshold_under_one_or_not_finite_is_refused_naming_the_field(bad: object) -> None:
    with pytest.raises(ValidationError, match="reserve_xfactor"):
        TypeAdapter(PolicySpec).validate_python({"name": "priority", "params": {"reserve_xfactor": bad}})

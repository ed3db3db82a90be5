"""Predicted run times (after Tsafrir et al. 2007): the scheduler is told the request scaled by the mean
of the user's last two run/request ratios instead of the request, and a job is still killed at its
request. Exact starts on a hand trace, what a wrong prediction costs, and the invariants of a real
trace's replay."""

from __future__ import annotations

import pytest

from app.sched.params import EasyParams, PriorityParams
from app.sim.correction import STEPS_S, corrected
from app.sim.replay import Predictor, replay
from app.sim.swf import read_swf
from app.sim.workload import Machine, SimJob, default_machine, workload
from tests.sim.test_replay import SDSC, check_capacity

EASY = EasyParams(time_grain_s=1)


def swf(*jobs: tuple[int, int, int, int, int]) -> bytes:
    """(submit, run, processors, requested time, user) per job, numbered from 1."""
    lines = [f"{i} {s} -1 {r} {p} -1 -1 {p} {e} -1 1 {u} 1 -1 0 -1 -1 -1"
             for i, (s, r, p, e, u) in enumerate(jobs, start=1)]
    return ("; MaxProcs: 2\n" + "\n".join(lines) + "\n").encode()


def hand(j4_run: int) -> bytes:
    # 2 nodes. J1 (user 1) asks 1,000 s and runs 10: user 1's history is [10].
    # J2 (user 2, t20, 1 node, 100 s) runs to 120. J3 (user 3, t21, 2 nodes) is reserved at 120.
    # J4 (user 1, t22, 1 node, asks 1,000 s): told its request it would hold the free node past 120,
    # so EASY cannot backfill it; told 10 s (user 1's mean) it backfills at 22.
    return swf((0, 10, 1, 1000, 1), (20, 100, 1, 100, 2), (21, 10, 2, 10, 3), (22, j4_run, 1, 1000, 1))


def starts(trace: bytes, predict: bool, correction: str = "request",
           compiled: bool = True) -> dict[str, tuple[float, float]]:
    result = replay(workload(read_swf(trace), Machine(2)), "easy", EASY, predict=predict,
                    correction=correction, compiled=compiled)
    return {r.job.id: (r.start, r.end) for r in result.records}


def test_a_good_prediction_lets_a_job_backfill() -> None:
    assert starts(hand(10), predict=False) == {"1": (0, 10), "2": (20, 120), "3": (120, 130), "4": (130, 140)}
    assert starts(hand(10), predict=True) == {"1": (0, 10), "2": (20, 120), "3": (120, 130), "4": (22, 32)}


def test_a_wrong_prediction_delays_the_reservation_and_the_job_is_told_its_request() -> None:
    # J4 runs 200 s, not the 10 s predicted: at 32 it is told its request (1,022), J3 waits for it
    got = starts(hand(200), predict=True)
    assert got["4"] == (22, 222) and got["3"] == (222, 232)


def test_predictor_scales_the_request_by_the_last_two_ratios_never_above_it() -> None:
    p = Predictor()
    job = SimJob("x", 0, 50, 300, 1, 1, 1, 0, "", "u")
    assert p.told(job) == 300  # no history: the request
    for ran in (100, 400, 200):  # ratios 1/3, 4/3, 2/3 of the 300 s request
        p.ended(job, ran)
    assert p.told(job) == 300  # mean ratio of the last two is 1: the request
    p.ended(job, 20)  # ratios 2/3 and 1/15: mean 11/30
    assert p.told(job) == pytest.approx(110)
    big = SimJob("y", 0, 50, 3000, 1, 1, 1, 0, "", "u")
    assert p.told(big) == pytest.approx(1100)  # the same ratio of a larger request
    assert p.told(SimJob("z", 0, 50, 3000, 1, 1, 1, 0, "", "v")) == 3000  # another user: no history


def test_the_stepwise_correction_climbs_the_ladder_up_to_the_request() -> None:
    """Told 10 s: 10 + 1 min, then + 5 min, then the request (10 + 60 + 300 + 900 is over it)."""
    p = Predictor("stepwise")
    assert [p.overdue(10, 1000, 0), p.overdue(70, 1000, 1), p.overdue(370, 1000, 2)] == [70, 370, 1000]
    assert corrected(1e6, 2e6, len(STEPS_S) - 1) == 1e6 + 360_000 and corrected(5, 2e6, len(STEPS_S)) == 2e6
    assert Predictor().overdue(10, 1000, 0) == 1000  # the request correction
    with pytest.raises(ValueError, match="correction"):
        Predictor("gradual")


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "python"])
def test_a_stepwise_correction_keeps_the_reservation_close(compiled: bool) -> None:
    """J2 (user 1, one node) is predicted 10 s (user 1's J1 ran 10 of 1,000) and runs 500; J3
    (2 nodes) waits for it; J4 (1 node, 200 s) arrives at 40. Told its request at 30, J2 is expected
    to end at 1,020: J4 backfills at 40. Corrected stepwise, J2 is expected at 90 (10 + 60 s): J4
    would delay J3's reservation, so it waits and runs after J3."""
    trace = swf((0, 10, 1, 1000, 1), (20, 500, 1, 1000, 1), (25, 100, 2, 100, 2), (40, 200, 1, 200, 3))
    request = starts(trace, predict=True, compiled=compiled)
    stepwise = starts(trace, predict=True, correction="stepwise", compiled=compiled)
    assert request["4"] == (40, 240) and request["3"] == (520, 620)
    assert stepwise["3"] == (520, 620) and stepwise["4"] == (620, 820)
    assert starts(trace, predict=False, correction="stepwise") == starts(trace, predict=False)


@pytest.mark.parametrize("params", [EASY, PriorityParams(time_grain_s=1, order="f1", reservation_depth=1,
                                                         selector="first_fit")], ids=["easy", "f1"])
def test_real_trace_with_predictions(params: EasyParams) -> None:
    trace = read_swf(SDSC, limit=600)
    w = workload(trace, default_machine(trace))
    result = replay(w, params.__class__.__name__.removesuffix("Params").lower(), params, predict=True)
    assert not result.unstarted and len(result.records) == len(w.jobs)
    check_capacity(result.records, w.machine)
    for r in result.records:
        assert r.start >= r.job.submit and r.end == r.start + r.job.run
    assert any("the user's last two run/request ratios" in n for n in result.notes)

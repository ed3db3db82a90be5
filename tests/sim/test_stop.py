"""A replay stops before its next decision once its stop flag is set (issue 31: a /simulate whose
client left, or that ran past its time cap, frees its worker thread), compiled and in Python alike."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.cli import policy_params
from app.sim import compiled
from app.sim.replay import replay
from app.sim.stop import ReplayStopped, StopFlag
from app.sim.swf import read_swf
from app.sim.workload import default_machine, workload

DATA = Path(__file__).resolve().parent.parent / "data"


def _sdsc(jobs: int):  # type: ignore[no-untyped-def]
    trace = read_swf(DATA / "SDSC-SP2-1998-4.2-cln.first1500.swf", jobs)
    return workload(trace, default_machine(trace))


@pytest.mark.parametrize(("policy", "jobs", "fast"), [("conservative", 1500, True), ("easy", 300, False)])
def test_a_flag_set_mid_replay_stops_it_before_the_next_decision(policy: str, jobs: int, fast: bool) -> None:
    w = _sdsc(jobs)
    params = policy_params(policy, [])[1]
    assert compiled.applies(w, policy, params)  # so `compiled=fast` picks the loop that replays
    whole = replay(w, policy, params, compiled=fast)
    flag, heard = StopFlag(), []

    def progress(n: int) -> None:  # told after a decision's starts: stop at the third report
        heard.append(n)
        if len(heard) == 3:
            flag.set("test")

    with pytest.raises(ReplayStopped) as caught:
        replay(w, policy, params, progress=progress, stop=flag, compiled=fast)
    assert caught.value.reason == "test" and caught.value.jobs == len(w.jobs)
    # no decision after the flag: exactly the jobs reported so far had started, far fewer than in full
    assert caught.value.started == sum(heard) < len(whole.records) // 2
    assert len(heard) == 3


@pytest.mark.parametrize("fast", [True, False])
def test_a_flag_set_before_the_replay_stops_it_at_once(fast: bool) -> None:
    w = _sdsc(200)
    params = policy_params("easy", [])[1]
    flag = StopFlag()
    flag.set("time")
    flag.set("stopped")  # the first reason stands
    with pytest.raises(ReplayStopped) as caught:
        replay(w, "easy", params, stop=flag, compiled=fast)
    assert (caught.value.reason, caught.value.started) == ("time", 0)
    assert len(replay(w, "easy", params, stop=StopFlag(), compiled=fast).records) == len(w.jobs)


@pytest.mark.parametrize("fast", [True, False])
def test_a_flag_set_after_the_last_decision_leaves_the_replay_whole(fast: bool) -> None:
    """Set once every job has started (a time cap reached as the replay ends): no decision was cut
    short, so the whole replay is returned, as without a flag."""
    w = _sdsc(200)
    params = policy_params("easy", [])[1]
    whole = replay(w, "easy", params, compiled=fast)
    flag, heard = StopFlag(), []

    def progress(n: int) -> None:
        heard.append(n)
        if sum(heard) == len(w.jobs):
            flag.set("time")

    got = replay(w, "easy", params, progress=progress, stop=flag, compiled=fast)
    assert flag.is_set() and got.records == whole.records

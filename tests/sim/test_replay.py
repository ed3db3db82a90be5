"""The replay drives the real scheduling core: exact starts on a hand-made trace, and the invariants
of a real trace's replay (capacity, arrival before start, reservations never delayed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.sched.params import ConservativeParams, EasyParams, FcfsParams
from app.sim.metrics import run_metrics
from app.sim.replay import JobRecord, replay
from app.sim.swf import read_swf
from app.sim.workload import Machine, Reading, default_machine, workload

DATA = Path(__file__).parent.parent / "data"
SDSC = DATA / "SDSC-SP2-1998-4.2-cln.first1500.swf"


def swf(*jobs: tuple[int, int, int, int]) -> bytes:
    """(submit, run, processors, requested time) per job, numbered from 1."""
    lines = [f"{i} {s} -1 {r} {p} -1 -1 {p} {e} -1 1 1 1 -1 0 -1 -1 -1"
             for i, (s, r, p, e) in enumerate(jobs, start=1)]
    return ("; MaxProcs: 4\n" + "\n".join(lines) + "\n").encode()


# 4 one-core nodes.
# J1 (t0, 3 nodes, 10 s) starts at once. J2 (t1, 2 nodes, 5 s) must wait for J1: reserved at 10.
# J3 (t2, 4 nodes, 5 s) needs the whole machine. J4 (t3, 1 node, 20 s) fits the free node now but
# would hold it until 23. J5 (t4, 1 node, 4 s).
# fcfs: strict order: J2 10, J3 15 (after J2), J4 and J5 20 (after J3).
# easy: only J2 is protected: J4 backfills at 3 (J2 still has 3 nodes at 10), which pushes J3 (head
#   after J2 starts) to 23; J5 backfills at 10 in the node J2 leaves free, ending 14 < 23.
# conservative: J3 is reserved at 15 on all nodes, so J4 cannot take the free node (it would run past
#   15): J4 at 20; J5 fits the free node from 4 to 8, delaying nobody.
HAND = swf((0, 10, 3, 10), (1, 5, 2, 5), (2, 5, 4, 5), (3, 20, 1, 20), (4, 4, 1, 4))
EXPECTED = {
    "fcfs": {"1": 0, "2": 10, "3": 15, "4": 20, "5": 20},
    "easy": {"1": 0, "2": 10, "3": 23, "4": 3, "5": 10},
    "conservative": {"1": 0, "2": 10, "3": 15, "4": 20, "5": 4},
}
PARAMS = {"fcfs": FcfsParams(time_grain_s=1), "easy": EasyParams(time_grain_s=1),
          "conservative": ConservativeParams(time_grain_s=1)}


@pytest.mark.parametrize("policy", list(EXPECTED))
def test_exact_starts_on_a_hand_trace(policy: str) -> None:
    w = workload(read_swf(HAND), Machine(4))
    result = replay(w, policy, PARAMS[policy])
    assert {r.job.id: r.start for r in result.records} == EXPECTED[policy]
    assert all(r.end == r.start + r.job.run for r in result.records)


def test_a_job_past_its_request_runs_its_recorded_time_told_its_request() -> None:
    """The default reading: the job runs its logged 100 s and the scheduler is told its 30 s request."""
    w = workload(read_swf(swf((0, 100, 1, 30))), Machine(4))
    (rec,) = replay(w, "easy", PARAMS["easy"]).records
    assert (rec.start, rec.end, rec.job.estimate) == (0, 100, 30)


def test_kill_at_request_kills_a_job_past_its_request() -> None:
    """With kill_at_request the scheduler is told the request and the job ends there."""
    w = workload(read_swf(swf((0, 100, 1, 30))), Machine(4), Reading(kill_at_request=True))
    (rec,) = replay(w, "easy", PARAMS["easy"]).records
    assert (rec.start, rec.end, rec.job.estimate) == (0, 30, 30)


# 2 one-core nodes. A (t0, 1 node) asks 30 s and runs 100. B (t1, 2 nodes) waits for A: EASY reserves
# it at A's told end. C (t2, 1 node, asks and runs 50) fits the free node now, ending at 52.
# Told A's request (30): C would delay B's reservation, so C waits. Told A's run time (100, the
# reading that knows the future): C ends before B's reservation and backfills at once.
OVERRUN = swf((0, 100, 1, 30), (1, 10, 2, 10), (2, 50, 1, 50))


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "python"])
def test_the_scheduler_is_told_the_request_of_a_job_that_overran(compiled: bool) -> None:
    """No future in the default reading: C's backfill is judged by A's request, not A's run time."""
    trace = read_swf(OVERRUN)
    told = replay(workload(trace, Machine(2)), "easy", PARAMS["easy"], compiled=compiled)
    knew = replay(workload(trace, Machine(2), Reading(raise_to_run=True)), "easy", PARAMS["easy"],
                  compiled=compiled)
    starts = [{r.job.id: r.start for r in result.records} for result in (told, knew)]
    assert starts[1]["3"] == 2  # backfilled: the scheduler knew A runs to 100
    assert starts[0]["3"] > 2 and starts[0]["2"] == 100  # waits; B starts when A really ends
    assert all(r.end == r.start + r.job.run for r in told.records)


def check_capacity(records: list[JobRecord], machine: Machine) -> None:
    """Sweep every start and end: no node ever holds more cores than it has."""
    events = sorted([(r.start, 1, r) for r in records] + [(r.end, -1, r) for r in records],
                    key=lambda e: (e[0], e[1]))
    used: dict[str, int] = {}
    for _, sign, r in events:
        for n in r.nodes:
            used[n] = used.get(n, 0) + sign * r.job.cpu
            assert 0 <= used[n] <= machine.cores_per_node, f"node {n} over-committed at {r.job.id}"


@pytest.fixture(scope="module")
def sdsc() -> tuple:  # type: ignore[type-arg]
    trace = read_swf(SDSC, limit=600)
    return workload(trace, default_machine(trace))


@pytest.mark.parametrize("knows", [False, True], ids=["told requests", "told run times past them"])
@pytest.mark.parametrize("policy", ["fcfs", "easy", "conservative", "firstfit"])
def test_real_trace_replay_invariants(sdsc, policy: str, knows: bool) -> None:  # type: ignore[no-untyped-def]
    """Capacity, arrival before start, the run time run. A reservation is never delayed where no job
    runs past what the scheduler was told (raise_to_run); told the requests, a job that overruns its
    request may delay one, as on a real machine."""
    w = workload(read_swf(SDSC, limit=600), sdsc.machine, Reading(raise_to_run=knows))
    assert any(j.run > j.estimate for j in w.jobs) != knows
    result = replay(w, policy, PARAMS.get(policy))
    assert not result.unstarted and len(result.records) == len(w.jobs)
    check_capacity(result.records, w.machine)
    for r in result.records:
        assert r.start >= r.job.submit
        assert r.end == r.start + r.job.run
        if knows and r.reserved_start is not None and policy in ("easy", "fcfs", "conservative"):
            assert r.start <= r.reserved_start, f"job {r.job.id} started after its reservation"
    m = run_metrics(result, w.machine)
    assert 0 < m["utilisation"] <= 1 and m["bsld_mean"] >= 1 and m["wait_p50"] <= m["wait_p99"]


def test_backfilling_beats_strict_order_on_a_real_trace(sdsc) -> None:  # type: ignore[no-untyped-def]
    fcfs = run_metrics(replay(sdsc, "fcfs", PARAMS["fcfs"]), sdsc.machine)
    easy = run_metrics(replay(sdsc, "easy", PARAMS["easy"]), sdsc.machine)
    assert easy["backfills"] > 0 and fcfs["backfills"] == 0
    assert easy["wait_mean"] < fcfs["wait_mean"]


"""The aging term (`wait_cap_s`) in replays: a hand-made stream of short jobs that plain sjf lets
starve a long job and the aged order does not, and the bound that holds on every random workload."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from app.sched.params import PriorityParams
from app.sim.replay import replay
from app.sim.workload import Machine, SimJob, Workload
from tests.sim.test_shortlist import workloads


def sjf(**more: object) -> PriorityParams:
    return PriorityParams(order="sjf", reservation_depth=1, selector="first_fit", time_grain_s=1,
                          **more)  # type: ignore[arg-type]


def stream() -> Workload:
    """One single-core node. A (100 s) starts at 0; L (1000 s) comes at 1; from 2 s on, a 100 s job
    comes every 50 s until 2000 s, so a shorter job than L is always waiting when the node frees."""
    jobs = [SimJob("A", 0.0, 100.0, 100.0, 1, 1, 1, 0), SimJob("L", 1.0, 1000.0, 1000.0, 1, 1, 1, 0)]
    jobs += [SimJob(f"S{k:03d}", 2.0 + 50 * k, 100.0, 100.0, 1, 1, 1, 0) for k in range(40)]
    return Workload(Machine(1), jobs)


def start_of(w: Workload, params: PriorityParams, jid: str) -> float:
    return next(r.start for r in replay(w, "priority", params).records if r.job.id == jid)


def test_plain_sjf_starves_the_long_job_and_the_wait_cap_does_not() -> None:
    """Under sjf every short job goes before L: L starts when the stream has run dry, after the 40
    shorts (100 + 40·100 s). With a cap of 300 s L is still behind the shorts at 100, 200 and 300 s
    (waits 99, 199, 299 s) and first at the end at 400 s (399 s waited)."""
    w = stream()
    assert start_of(w, sjf(), "L") == 4100.0
    assert start_of(w, sjf(wait_cap_s=300.0), "L") == 400.0
    python = replay(w, "priority", sjf(wait_cap_s=300.0), compiled=False)
    assert next(r.start for r in python.records if r.job.id == "L") == 400.0


# --- the bound ---------------------------------------------------------------------------------------
# With run times told exactly (estimate = run), a reservation depth of at least 1 and a grain of 1 s,
# take a job J that fits the machine, and h_J the last start of the other jobs submitted no later
# than J. Aged jobs rank first come, first served and a job ages after every job submitted before
# it, so from t = max(submit(J) + T, h_J) on, J is first in the order at every decision. No job
# starts between t and the first decision after it, so every job running then ends by t + R_max (the
# longest estimate), by which J fits the empty machine: that decision comes by then, and J starts
# there or takes the first reservation, at most at t + R_max; with exact estimates that reservation
# never moves later (a backfilled job may not delay it, and ends come when told). So
#     start(J) <= max(submit(J) + T, h_J) + R_max.
# No bound of T + R_max alone holds: the jobs submitted before J and aged before it go first, each
# up to R_max, so a queue of aged jobs holds J past it (hypothesis finds such workloads at once).
@settings(max_examples=150, deadline=None)
@given(w=workloads(), cap=st.sampled_from([0.0, 60.0, 300.0, 1000.0]), depth=st.integers(1, 3),
       order=st.sampled_from(["sjf", "f1"]), bf=st.sampled_from(["priority", "sjf"]),
       compiled=st.booleans())
def test_an_aged_job_starts_within_the_longest_run_of_its_turn(
        w: Workload, cap: float, depth: int, order: str, bf: str, compiled: bool) -> None:
    """On the compiled replay and on the Python one (`decide` at every instant)."""
    w = Workload(w.machine, [replace(j, estimate=j.run) for j in w.jobs])
    params = PriorityParams(order=order, reservation_depth=depth, backfill_order=bf, selector="first_fit",
                            time_grain_s=1, wait_cap_s=cap)
    result = replay(w, "priority", params, compiled=compiled)
    started = {r.job.id: r for r in result.records}
    fits = [j for j in w.jobs if j.nodes <= w.machine.nodes and j.cpu <= w.machine.cores_per_node
            and j.mem_mib <= w.machine.mem_mib_per_node]
    assert {j.id for j in fits} == set(started)  # exact estimates: every job that fits starts
    longest = max((j.run for j in fits), default=0.0)
    for j in fits:
        before = [started[k.id].start for k in fits if k.submit <= j.submit and k.id != j.id]
        turn = max([j.submit + cap, *before])
        assert started[j.id].start <= turn + longest, j.id

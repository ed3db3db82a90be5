"""`best` is never longer than the list plans it ran, whatever its budget cuts: on random DAGs (small
ones of every kind, and layered, fan-out, independent and chain ones of up to 400 tasks), on a fake
clock that moves a random step at each read, with totals from nothing to the service's default.
The planners skipped, given up or stopped at the bound, the other priorities and the search cut
anywhere: the plan is valid, and its makespan is at most that of every list plan `best` ran, each of
which is the planner's own plan."""

from __future__ import annotations

import time
from collections.abc import Callable

from hypothesis import event, given, settings
from hypothesis import strategies as st

from app.sched.dag import best
from app.sched.dag.model import DagProblem
from app.sched.registry import plan_dag
from bench.dag_workload import groups, shaped_dag
from tests.dag.strategies import dag_problems
from tests.dag_invariants import check_plan


def ticking(step: float, speed: float) -> Callable[[], float]:
    """A clock that moves `step` seconds each time it is read, and `speed` seconds a real second (so
    that the planners' real work counts as it would on a slower machine: MDL gives up)."""
    now, t0 = [0.0], time.monotonic()

    def clock() -> float:
        now[0] += step
        return now[0] + speed * (time.monotonic() - t0)
    return clock


@st.composite
def shaped(draw: st.DrawFn) -> DagProblem:
    shape = draw(st.sampled_from(["layered", "layered", "fanout", "independent", "chain"]))
    seed = draw(st.integers(0, 1000))
    gs = groups(draw(st.integers(2, 16)), seed=seed, slots=draw(st.integers(1, 2)))
    return shaped_dag(shape, draw(st.integers(20, 400)), gs, seed=seed)


PROBLEMS = st.one_of(dag_problems(), shaped(), shaped())


@settings(deadline=None, max_examples=200)
@given(PROBLEMS, st.sampled_from([1e-6, 1e-5, 1e-4, 1e-3]), st.sampled_from([0.0, 1.0, 10.0, 100.0]),
       st.sampled_from([0.0, 1e-3, 0.01, 0.1, 0.8]), st.sampled_from([None, None, 0.0, 0.005]),
       st.booleans(), st.integers(0, 3))
def test_best_is_never_longer_than_a_list_plan_it_ran(p: DagProblem, tick: float, speed: float,
                                                      total: float, search_s: float | None,
                                                      explain: bool, seed: int) -> None:
    """Timing decides only what runs (so a real clock may take part); the property holds whatever ran."""
    r = plan_dag(p, "best", explain=explain, search_s=search_s, clock=ticking(tick, speed),
                 best_default_s=total, seed=seed)
    ran = [m for m in best.ORDER if m in r.makespans]
    event(f"ran {','.join(ran)}; skipped {sorted(set(r.skipped.values()))}; "
          f"searched {r.search is not None and r.search.evaluations > 0}; other priorities {r.restarts > 0}")
    assert ran[0] == best.ORDER[0], "the first planner always runs"
    assert set(ran) | set(r.skipped) == set(best.ORDER) and not set(ran) & set(r.skipped)
    for m in ran:  # what `best` reports for a planner is that planner's own plan
        assert r.makespans[m] == plan_dag(p, m).makespans[m]
    check_plan(p, r.plan.placements, r.makespan)  # valid, and r.makespan is the plan's
    assert r.makespan <= min(r.makespans[m] for m in ran) * (1 + 1e-12)
    assert r.makespan <= min(r.makespans.values()) * (1 + 1e-12)  # the other priorities' plans too

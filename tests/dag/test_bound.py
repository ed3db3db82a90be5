"""The makespan lower bound (`app.sched.dag.bound`): no plan of any method, searched or not, from
scratch or replanned around running and done tasks, is shorter; a plan that reaches it stops `best`
and the search at once."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.sched.dag.best import SKIP_BOUND
from app.sched.dag.bound import lower_bound, reaches
from app.sched.dag.graph import compile_problem
from app.sched.dag.model import DagProblem, Edge, Group, Network, Task
from app.sched.dag.shift import relative
from app.sched.registry import DAG_ALGORITHMS, DAG_PLANNERS, plan_dag
from tests.dag.strategies import dag_problems, replanned

METHODS = st.sampled_from(DAG_ALGORITHMS)


def _bound(p: DagProblem) -> float:
    return lower_bound(compile_problem(relative(p)))


def _no_shorter(makespan: float, bound: float) -> None:
    assert makespan >= bound - 1e-9 * max(1.0, bound), (makespan, bound)


@given(dag_problems(), METHODS, st.integers(0, 3))
def test_no_plan_is_shorter_than_the_bound(p: DagProblem, algorithm: str, seed: int) -> None:
    _no_shorter(plan_dag(p, algorithm).makespan, _bound(p))
    _no_shorter(plan_dag(p, algorithm, search_s=60.0, max_evaluations=40, seed=seed).makespan, _bound(p))


@given(dag_problems(), st.sampled_from(list(DAG_PLANNERS)), st.floats(0.0, 1.0), METHODS)
def test_no_replanned_plan_is_shorter_than_the_bound(p: DagProblem, first: str, cut: float,
                                                      second: str) -> None:
    again = replanned(p, plan_dag(p, first).plan.placements, cut)
    _no_shorter(plan_dag(again, second, search_s=60.0, max_evaluations=30).makespan, _bound(again))


def _chain(n: int) -> DagProblem:
    """n tasks in a line; one group is fastest for all, so the plan that keeps them there is optimal."""
    tasks = tuple(Task(f"t{i}", work=10.0 + i % 5) for i in range(n))
    edges = tuple(Edge(f"t{i}", f"t{i + 1}", 1e8) for i in range(n - 1))
    gs = (Group("slow", speed=1.0), Group("fast", speed=3.0, slots=2), Group("mid", speed=2.0))
    return DagProblem(tasks, edges, gs, Network(bandwidth=1e8, latency=0.5))


@pytest.mark.parametrize("algorithm", DAG_ALGORITHMS)
def test_a_plan_at_the_bound_ends_the_search_at_once(algorithm: str) -> None:
    """On a chain every planner finds the optimal plan; `best` then runs only its first planner (and
    says it skipped the others), and neither other priorities nor the local search are tried, however
    long the budget."""
    p = _chain(60)
    r = plan_dag(p, algorithm, search_s=60.0, max_evaluations=500)
    assert reaches(r.makespan, r.bound)
    assert r.makespan == pytest.approx(sum((10.0 + i % 5) / 3.0 for i in range(60)))
    assert r.search is not None and r.search.evaluations == 0 and r.restarts == 0
    assert list(r.makespans) == (["heft"] if algorithm == "best" else [algorithm])
    assert r.skipped == ({"mdl": SKIP_BOUND, "peft": SKIP_BOUND} if algorithm == "best" else {})


def test_a_plan_short_of_the_bound_is_searched() -> None:
    """The bound only stops the search where it is reached: two chains competing for one fast slot
    leave the list plan above it, and the search runs."""
    tasks = tuple(Task(f"{c}{i}", work=10.0) for c in "ab" for i in range(20))
    edges = tuple(Edge(f"{c}{i}", f"{c}{i + 1}", 0.0) for c in "ab" for i in range(19))
    gs = (Group("fast", speed=3.0), Group("slow", speed=1.0))
    r = plan_dag(DagProblem(tasks, edges, gs, Network()), "mdl", search_s=60.0, max_evaluations=50)
    assert r.bound is not None and not reaches(r.makespans["mdl"], r.bound)
    assert r.search is not None and r.search.evaluations > 0


@pytest.mark.parametrize("algorithm", DAG_ALGORITHMS)
def test_work_spread_evenly_reaches_the_bound(algorithm: str) -> None:
    """Eight equal independent tasks on a group twice as fast (one slot) and a slower one (two
    slots): the fast slot runs four, each slow slot two, all ending at 20 s, which is the work
    bound (total work at the fastest, 40 s, over a rate of 1 + 2 × ½). Every method finds it, and
    nothing more is tried."""
    tasks = tuple(Task(f"t{i}", work=10.0) for i in range(8))
    gs = (Group("fast", speed=2.0), Group("slow", speed=1.0, slots=2))
    r = plan_dag(DagProblem(tasks, (), gs, Network()), algorithm, search_s=60.0, max_evaluations=500)
    assert r.bound == pytest.approx(20.0) and r.makespan == pytest.approx(20.0)
    assert r.search is not None and r.search.evaluations == 0 and r.restarts == 0

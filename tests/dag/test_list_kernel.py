"""The compiled placement loop (`app.sched.dag.list_kernel`) gives the Python reference's plans to
the last bit: HEFT, PEFT and HEFT's placement under any priority, from scratch and replanned around
running and done tasks, on random problems (ties, zero-length tasks, links inside a group) and on
the benchmark's larger DAGs (many idle gaps)."""

from __future__ import annotations

from unittest.mock import patch

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.sched.dag import list_kernel
from app.sched.dag.bound import lower_bound
from app.sched.dag.graph import Compiled, compile_problem
from app.sched.dag.heft import HeftPlanner, list_schedule, upward_rank
from app.sched.dag.model import DagProblem, Placement
from app.sched.dag.peft import PeftPlanner, optimistic_costs
from app.sched.dag.restarts import _finite, rank_with
from app.sched.dag.shift import relative
from app.sched.registry import plan_dag
from bench.dag_workload import groups, shaped_dag
from tests.dag.strategies import dag_problems, replanned


def _both(c: Compiled, run) -> tuple[list[Placement], list[Placement]]:  # type: ignore[no-untyped-def]
    with patch.object(list_kernel, "COMPILED", False):
        reference = run(c).placements
    with patch.object(list_kernel, "COMPILED", True):
        compiled = run(c).placements
    return reference, compiled


def _planners(seed: int):  # type: ignore[no-untyped-def]
    def noisy(c: Compiled):  # type: ignore[no-untyped-def]
        rng = np.random.default_rng(seed)
        return list_schedule(c, upward_rank(c) * rng.lognormal(0.0, 0.3, c.n_tasks), "noisy")
    return [lambda c: HeftPlanner().plan(c), lambda c: PeftPlanner().plan(c), noisy]


@given(dag_problems(), st.integers(0, 3))
def test_the_compiled_loop_gives_the_reference_plans(p: DagProblem, seed: int) -> None:
    c = compile_problem(relative(p))
    for run in _planners(seed):
        reference, compiled = _both(c, run)
        assert compiled == reference
    with patch.object(list_kernel, "COMPILED", False):
        reference_oct = optimistic_costs(c)
    assert np.array_equal(optimistic_costs(c), reference_oct)


@given(dag_problems(), st.floats(0.0, 1.0), st.integers(0, 3))
def test_the_compiled_loop_gives_the_reference_plans_when_replanning(p: DagProblem, cut: float,
                                                                     seed: int) -> None:
    again = replanned(p, plan_dag(p, "heft").plan.placements, cut)
    c = compile_problem(relative(again))
    for run in _planners(seed):
        reference, compiled = _both(c, run)
        assert compiled == reference
    _same_numbers(c)


def _numbers(c: Compiled) -> list[np.ndarray]:
    """Every rank the planners and `best` use, and the lower bound."""
    ranks = [upward_rank(c), rank_with(c, c.mean_cost, every_pair=True)]
    ranks += [rank_with(c, _finite(c, stat)) for stat in (np.min, np.max, np.median)]
    return [*ranks, np.array([lower_bound(c)])]


def _same_numbers(c: Compiled) -> None:
    with patch.object(list_kernel, "COMPILED", False):
        reference = _numbers(c)
    compiled = _numbers(c)
    assert all(np.array_equal(a, b) for a, b in zip(compiled, reference, strict=True))


@given(dag_problems())
def test_the_compiled_ranks_and_bound_are_the_reference_numbers(p: DagProblem) -> None:
    _same_numbers(compile_problem(relative(p)))


@given(dag_problems())
def test_each_tasks_cost_statistic_is_the_row_by_row_one(p: DagProblem) -> None:
    """`_finite` sorts all rows at once; the numbers are `stat` of each row's finite costs."""
    c = compile_problem(relative(p))
    for stat in (np.min, np.max, np.median):
        one_by_one = [stat(row[np.isfinite(row)]) if np.isfinite(row).any() else 0.0 for row in c.cost]
        assert np.array_equal(_finite(c, stat), np.array(one_by_one))


@pytest.mark.parametrize(("shape", "n", "n_groups", "slots"), [
    ("layered", 400, 8, 1), ("layered", 400, 6, 3), ("fanout", 300, 5, 2), ("chain", 200, 4, 1),
    ("independent", 300, 7, 2)])
def test_the_compiled_loop_gives_the_reference_plans_on_larger_dags(shape: str, n: int, n_groups: int,
                                                                    slots: int) -> None:
    c = compile_problem(shaped_dag(shape, n, groups(n_groups, seed=n, slots=slots), seed=n))
    for run in _planners(n):
        reference, compiled = _both(c, run)
        assert compiled == reference
    _same_numbers(c)


def test_a_lane_grows_past_its_first_gaps() -> None:
    """Two groups of one slot each, waiting on each other's transfers: a lane holds up to 17 idle gaps
    at once (its arrays grow from 8), and the plans stay equal."""
    c = compile_problem(shaped_dag("layered", 600, groups(2, seed=600), seed=600))
    reference, compiled = _both(c, lambda c: HeftPlanner().plan(c))
    assert compiled == reference


def test_reach_is_the_reference_margin() -> None:
    from app.sched.dag.state import reach

    for a, b in [(0.0, 0.0), (1.0, 3.0), (-5.0, -0.0), (-7.0, -2.5), (1e300, 1.5e300), (0.1, 1e-320)]:
        assert list_kernel._reach(a, b) == reach(a, b)


def test_after_warming_planning_compiles_nothing_more() -> None:
    """`warm` (run before the service's first request) covers the types the planners pass."""
    loops = (list_kernel.list_schedule, list_kernel.optimistic_costs, list_kernel.upward,
             list_kernel.path_bound)
    list_kernel.warm()
    warmed = [len(loop.signatures) for loop in loops]
    p = shaped_dag("layered", 50, groups(3, seed=1, slots=2), seed=1)
    for name in ("heft", "peft", "mdl", "best"):
        plan_dag(p, name, search_s=1.0, max_evaluations=20)
    assert [len(loop.signatures) for loop in loops] == warmed

"""`best`'s extra list plans keep to their budget: none starts that could not end within it."""

from __future__ import annotations

import pytest

from app.sched.dag import restarts
from app.sched.dag.graph import compile_problem
from app.sched.dag.heft import HeftPlanner
from bench.dag_workload import groups, shaped_dag


@pytest.mark.parametrize(("budget", "estimate", "plans"), [(1.0, 0.0, 3), (1.0, 0.3, 3), (0.95, 0.0, 3),
                                                          (0.5, 0.6, 0), (0.3, 0.0, 1)])
def test_no_list_plan_starts_that_would_end_past_the_budget(
        monkeypatch: pytest.MonkeyPatch, budget: float, estimate: float, plans: int) -> None:
    """Each list plan takes 0.3 s on a fake clock: plans start at 0, 0.3, 0.6 while one more fits."""
    now = [0.0]
    real = restarts.list_schedule

    def slow_plan(*args, **kwargs):  # type: ignore[no-untyped-def]
        now[0] += 0.3
        return real(*args, **kwargs)

    monkeypatch.setattr(restarts, "list_schedule", slow_plan)
    c = compile_problem(shaped_dag("layered", 40, groups(4, seed=1), seed=1))
    plan = HeftPlanner().plan(c)
    best, tried = restarts.restart(c, plan, budget, clock=lambda: now[0], estimate_s=estimate)
    assert tried == plans
    assert now[0] <= budget + 1e-12  # the last plan ended within the budget
    assert restarts.makespan(best, 0.0) <= restarts.makespan(plan, 0.0)

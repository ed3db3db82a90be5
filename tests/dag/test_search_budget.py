"""The local search ends within its budget, the answer's re-timing included: on a fake clock where a
full re-timing takes 0.1 s and a partial one 0.04 s, no search runs past the budget it was given
(once the budget holds the set-up's re-timing and the answer's)."""

from __future__ import annotations

import pytest

from app.sched.dag import search
from app.sched.dag.graph import compile_problem
from app.sched.dag.heft import HeftPlanner
from bench.dag_workload import groups, shaped_dag

FULL_S, PART_S = 0.1, 0.04


@pytest.mark.parametrize("budget", [0.2, 0.25, 0.33, 0.5, 1.0, 2.0])
def test_the_search_ends_within_its_budget(monkeypatch: pytest.MonkeyPatch, budget: float) -> None:
    now = [0.0]
    retime, retime_from = search.Retimer.retime, search.Retimer.retime_from

    def slow_full(self, lay):  # type: ignore[no-untyped-def]
        now[0] += FULL_S
        return retime(self, lay)

    def slow_part(self, lay, old, i):  # type: ignore[no-untyped-def]
        now[0] += PART_S
        return retime_from(self, lay, old, i)

    monkeypatch.setattr(search.Retimer, "retime", slow_full)
    monkeypatch.setattr(search.Retimer, "retime_from", slow_part)
    c = compile_problem(shaped_dag("layered", 60, groups(4, seed=2), seed=2))
    plan = HeftPlanner().plan(c)
    result = search.improve(c, plan, budget, clock=lambda: now[0])
    assert now[0] <= budget + 1e-9
    assert result.evaluations >= 1 + int((budget - 2 * FULL_S) / PART_S) // 2  # it used the budget
    assert result.after <= result.before

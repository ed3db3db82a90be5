"""The local search ends within its budget, the answer's re-timing included: on a fake clock where a
full re-timing takes 0.1 s and a partial one 0.04 s, no search runs past the budget it was given
(once the budget holds the set-up's re-timing and the answer's). On its default budget it also stops
once it stops gaining."""

from __future__ import annotations

import pytest

from app.sched import registry
from app.sched.dag import search
from app.sched.dag.graph import compile_problem
from app.sched.dag.heft import HeftPlanner
from app.sched.registry import plan_dag
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


@pytest.mark.parametrize(("done", "gained_at", "patience", "stop"), [
    (99, 0, 100, False), (100, 0, 100, True),  # no gain at all: stop after `patience` tries
    (250, 150, 100, False), (300, 150, 100, True),  # the last gain at 150: as many again without one
    (10**6, 0, None, False),  # no patience: never
])
def test_stalled_is_no_gain_in_the_last_max_patience_or_as_many_tries_as_the_last_gain_took(
        done: int, gained_at: int, patience: int | None, stop: bool) -> None:
    assert search.stalled(done, gained_at, patience) == stop


def test_a_patient_search_stops_when_it_stops_gaining() -> None:
    """Same seed, same path: the patient search is the first part of the one that runs on, ends
    well before it, and as short a plan as that one had at the same point."""
    c = compile_problem(shaped_dag("layered", 120, groups(6, seed=3), seed=3))
    plan = HeftPlanner().plan(c)
    on = search.improve(c, plan, 60.0, max_evaluations=4000)
    patient = search.improve(c, plan, 60.0, max_evaluations=4000, patience=50)
    assert patient.evaluations < on.evaluations == 4000
    assert patient.after == search.improve(c, plan, 60.0, max_evaluations=patient.evaluations).after
    assert on.after <= patient.after <= patient.before


@pytest.mark.parametrize("algorithm", ["mdl", "best"])
def test_the_default_search_ends_by_itself_when_time_stands_still(algorithm: str) -> None:
    """A clock that never moves: only stopping when it stops gaining ends the default search (and
    `best`'s other priorities), after at least the patience window; an asked budget is searched to its
    end (here, its evaluations)."""
    p = shaped_dag("layered", 150, groups(6, seed=5), seed=5)
    r = plan_dag(p, algorithm, search_s=None, clock=lambda: 0.0, best_default_s=1.0)
    assert r.search is not None
    assert r.search.evaluations >= max(registry.PATIENCE, registry.PATIENCE_WORK // len(p.tasks))
    more = r.search.evaluations + 2000
    asked = plan_dag(p, algorithm, search_s=1.0, clock=lambda: 0.0, max_evaluations=more)
    assert asked.search is not None and asked.search.evaluations == more

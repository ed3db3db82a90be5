"""`best` within a time budget: a planner after the first starts only when it is expected to end
within the budget (its relative cost times the slowest pace so far), and the answer says which
planners were skipped and why; without an asked budget the whole of `best` keeps to its default."""

from __future__ import annotations

import pytest

from app.sched.dag import best
from app.sched.dag.bound import reaches
from app.sched.dag.graph import compile_problem
from app.sched.dag.heft import HeftPlanner
from app.sched.dag.model import CHECK_EVERY, Late, Plan, check
from app.sched.registry import NEAR_BOUND, plan_dag
from bench.dag_workload import groups, shaped_dag

SECONDS = {"heft": 0.1, "mdl": 0.3, "peft": 0.13}  # each planner's time on the fake clock


class Slow:
    """A planner that takes SECONDS[name] on the fake clock, evenly over STEPS placements, asking
    `late` as the real ones do (`model.check`), and gives HEFT's plan under its name."""

    STEPS = 640

    def __init__(self, name: str, now: list[float]) -> None:
        self.name, self.now = name, now

    def plan(self, c: object, explain: bool = False, late: Late | None = None) -> Plan:
        for placed in range(self.STEPS):
            check(late, placed, self.STEPS)
            self.now[0] += SECONDS[self.name] / self.STEPS
        plan = HeftPlanner().plan(c)  # type: ignore[arg-type]
        return Plan(self.name, plan.placements)


@pytest.mark.parametrize(("budget", "spent", "ran"), [
    (None, 0.0, ["heft", "peft", "mdl"]),
    (1.0, 0.0, ["heft", "peft", "mdl"]),
    (0.531, 0.0, ["heft", "peft", "mdl"]),  # peft expected to end at 0.23, mdl at 0.53 (+ rounding)
    (0.52, 0.0, ["heft", "peft"]),
    (0.2, 0.0, ["heft"]),  # peft (0.23) does not fit, nor mdl (0.4)
    (0.05, 0.0, ["heft"]),  # the first planner always runs
    (0.5, 0.2, ["heft", "peft"]),  # 0.2 s were spent before the planners (compiling, the bound)
])
def test_a_planner_starts_only_when_it_is_expected_to_fit(monkeypatch: pytest.MonkeyPatch,
                                                         budget: float | None, spent: float,
                                                         ran: list[str]) -> None:
    """Planners take 0.1, 0.3, 0.13 s, and are expected to take 1, 3 and 1.3 × HEFT's pace."""
    monkeypatch.setattr(best, "COST", {"heft": 1.0, "mdl": 3.0, "peft": 1.3})
    now = [0.0]
    c = compile_problem(shaped_dag("layered", 40, groups(4, seed=1), seed=1))
    pace = best.Pace(budget, lambda: now[0], spent)
    found = best.best_plan(c, {n: Slow(n, now) for n in best.ORDER}, pace=pace,
                           prefer=["mdl", "heft", "peft"])
    assert list(found.spans) == ran
    assert found.skipped == dict.fromkeys([n for n in best.ORDER if n not in ran], best.SKIP_TIME)
    # every planner's pace is 0.1 s per unit of cost: a skipped one was expected to take 0.1 x its cost
    assert found.skipped_s == pytest.approx(0.1 * sum(best.COST[n] for n in found.skipped))
    if budget is not None:  # ended within the budget, or the first planner alone overran it
        assert now[0] + spent <= max(budget, SECONDS["heft"] + spent) + 1e-12
    assert found.plan.algorithm == ("mdl" if "mdl" in ran else "heft")  # equal plans: mdl preferred


@pytest.mark.parametrize("budget", [0.3, 0.35, 0.4, 0.45, 0.5])
def test_a_planner_that_turns_out_slower_gives_up_within_the_budget(monkeypatch: pytest.MonkeyPatch,
                                                                   budget: float) -> None:
    """MDL is expected to take as long as HEFT (0.1 s) but takes 0.3 s: it starts when 0.1 s fits,
    then gives up once its pace says it cannot end in time, or at the latest when the budget is spent
    (one check interval late at most), and the plans of the others are kept."""
    monkeypatch.setattr(best, "COST", {"heft": 1.0, "mdl": 1.0, "peft": 1.3})
    now = [0.0]
    c = compile_problem(shaped_dag("layered", 40, groups(4, seed=1), seed=1))
    found = best.best_plan(c, {n: Slow(n, now) for n in best.ORDER}, pace=best.Pace(budget, lambda: now[0]))
    assert list(found.spans) == ["heft", "peft"] and found.skipped == {"mdl": best.SKIP_TIME}
    assert now[0] <= budget + SECONDS["mdl"] * CHECK_EVERY / Slow.STEPS + 1e-12
    assert now[0] < 0.23 + SECONDS["mdl"]  # it did not run to its end


def _ticking(step: float):  # type: ignore[no-untyped-def]
    """A clock that moves `step` seconds each time it is read."""
    now = [0.0]

    def clock() -> float:
        now[0] += step
        return now[0]
    return clock


@pytest.mark.parametrize(("default", "ceiling"), [(0.8, 2.0), (0.3, 2.0), (0.8, 0.2), (5.0, 2.0)])
def test_best_without_an_asked_budget_keeps_to_its_default(default: float, ceiling: float) -> None:
    """The search gets what the planners left of min(default, ceiling); the answer gives that total."""
    p = shaped_dag("layered", 60, groups(4, seed=2), seed=2)
    r = plan_dag(p, "best", search_s=None, max_search_s=ceiling, clock=_ticking(1e-3),
                 best_default_s=default, near_bound=0.0)
    assert r.budget_s == min(default, ceiling)
    assert r.search is None or r.search.budget_s <= min(default, ceiling)
    assert set(r.makespans) | set(r.skipped) >= set(best.ORDER)


def test_an_asked_budget_runs_every_planner() -> None:
    """time_budget_s given: it is the search's, as for the other methods, and every planner runs
    (unless one is near the bound)."""
    p = shaped_dag("layered", 60, groups(4, seed=2), seed=2)
    r = plan_dag(p, "best", search_s=0.01, clock=_ticking(1e-3), near_bound=0.0, best_default_s=0.0)
    assert r.budget_s is None and r.skipped == {} and list(r.makespans)[:3] == list(best.ORDER)


@pytest.mark.parametrize(("min_cells", "searched"), [(1, False), (10**9, True)])
def test_a_plan_near_the_bound_is_not_searched_on_a_large_problem(min_cells: int, searched: bool) -> None:
    """Independent tasks: HEFT's plan is a little above the work bound, not at it. Counted as large
    (`near_min_cells`), no other priority and no move is tried; counted as small, the search runs."""
    p = shaped_dag("independent", 300, groups(8, seed=4), seed=4)
    r = plan_dag(p, "best", search_s=60.0, max_evaluations=40, near_min_cells=min_cells)
    assert r.bound is not None and not reaches(r.makespan, r.bound)
    assert r.makespans[r.plan.algorithm] <= r.bound * (1 + NEAR_BOUND)
    assert r.search is not None and (r.search.evaluations > 0 or r.restarts > 0) == searched


@pytest.mark.parametrize(("budget", "computed"), [(None, True), (1.0, True), (0.2, True), (0.15, False)])
def test_the_bound_is_computed_after_the_first_planner_when_it_fits(monkeypatch: pytest.MonkeyPatch,
                                                                  budget: float | None,
                                                                  computed: bool) -> None:
    """HEFT takes 0.1 s and the bound is expected to take as long: with 0.15 s it is left out (at the
    size limit it costs about HEFT's time, after the plan is there), and then no later planner fits."""
    monkeypatch.setattr(best, "COST", {"heft": 1.0, "mdl": 3.0, "peft": 1.3, "bound": 1.0})
    now, calls = [0.0], []
    c = compile_problem(shaped_dag("layered", 40, groups(4, seed=1), seed=1))

    def bound() -> float:
        calls.append(now[0])
        return 0.0  # a bound below every plan: nothing reaches it, every planner that fits runs
    found = best.best_plan(c, {n: Slow(n, now) for n in best.ORDER}, bound=bound,
                           pace=best.Pace(budget, lambda: now[0]))
    assert (found.bound == 0.0) == computed and len(calls) == int(computed)
    assert not computed or calls == [pytest.approx(SECONDS["heft"])]  # right after the first planner
    if not computed:
        assert list(found.spans) == ["heft"]

"""A decision's budget (app/sched/budget.py): a fake clock, a cap on jobs, a stop flag; past it the
jobs not looked at are `not_evaluated`, and everything before is decided as without a budget."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.sched.budget import Budget, BudgetHit
from app.sched.model import Reason
from app.sched.params import UNLIMITED
from app.sched.registry import POLICIES, decide
from tests.builders import job, node, snapshot
from tests.invariants import check_decision
from tests.sched.test_contract import params_for
from tests.strategies import common_params, snapshots_and_jobs


class FakeClock:
    """Each reading advances by `step` seconds: the n-th job is checked at time n·step."""

    def __init__(self, step: float = 1.0) -> None:
        self.t, self.step = 0.0, step

    def __call__(self) -> float:
        self.t += self.step
        return self.t


def _busy_queue(n: int = 30):  # noqa: ANN202
    nodes = [node(f"n{i}", cpu=4) for i in range(3)]
    jobs = [job(f"j{i:02d}", submit=60.0 * i, walltime=600.0 * (1 + i % 4), cpu=1 + i % 4,
                nodes=1 + i % 2) for i in range(n)]
    return snapshot(nodes, []), jobs


def _reasons(d) -> dict[str, Reason]:  # noqa: ANN001
    return {p.job_id: p.reason for p in d.pending}


def _looked_at(d) -> list[str]:  # noqa: ANN001
    skipped = {p.job_id for p in d.pending if p.reason == Reason.not_evaluated}
    return sorted({p.job_id for p in d.priorities} - skipped)


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_time_budget_stops_the_pass_with_a_fake_clock(name: str) -> None:
    """A deadline of 3.5 clock steps (one reading to start, one before the pass, one before each
    chunk of 1, 2, 4, ... jobs the pass may look at: `core.CHUNK`): 1 + 2 jobs are looked at, the
    other 27 are not_evaluated, and the same clock gives the same decision."""
    snap, jobs = _busy_queue()
    runs = []
    for _ in range(2):
        budget = Budget.starting_now(FakeClock(), time_s=3.5)  # start reading: t=1, deadline 4.5
        runs.append((decide(snap, jobs, name, None, budget), budget))
    (d, budget), (again, _) = runs
    assert d == again
    assert d.summary.budget_hit == BudgetHit.time and budget.considered == d.summary.jobs_considered == 3
    skipped = [p for p in d.pending if p.reason == Reason.not_evaluated]
    assert len(skipped) == d.summary.not_evaluated == 27
    assert all("time budget of 3.5 s" in p.detail for p in skipped)
    assert check_decision(snap, jobs, d) == []


@pytest.mark.parametrize("name", sorted(set(POLICIES) - {"priority"}))
@given(case=snapshots_and_jobs(), common=common_params(), cap=st.integers(1, 8))
@settings(max_examples=15)  # x 5 policies; the contract tests run the pass itself at full count
def test_a_job_cap_decides_the_first_jobs_as_the_queue_depth_does(name, case, common, cap) -> None:  # noqa: ANN001
    """With the pass in rank order, a cap of k jobs looked at decides exactly what a queue depth of k
    does (starts, reservations, reasons), and reports which limit it hit. (Promises are left out: a
    job past the cap keeps its promised slot held, one past the queue depth does not.)"""
    snap, all_jobs = case
    jobs = [dataclasses.replace(j, promise_start=None, promise_nodes=()) for j in all_jobs]
    params = dataclasses.replace(params_for(name, common, None), queue_depth=UNLIMITED)
    capped = decide(snap, jobs, name, params, Budget(max_jobs=cap))
    deep = decide(snap, jobs, name, dataclasses.replace(params, queue_depth=cap))
    assert capped.starts == deep.starts and capped.reservations == deep.reservations
    assert _reasons(capped) == _reasons(deep)
    assert capped.summary.jobs_considered == min(cap, len(jobs))
    assert capped.summary.budget_hit == (BudgetHit.max_jobs if len(jobs) > cap else None)
    assert capped.summary.not_evaluated == max(0, len(jobs) - cap)
    assert check_decision(snap, jobs, capped, params.time_grain_s) == []


@pytest.mark.parametrize("name", sorted(POLICIES))
@given(case=snapshots_and_jobs(), common=common_params(), cap=st.integers(0, 8))
@settings(max_examples=15)
def test_every_policy_keeps_its_invariants_under_a_cap(name, case, common, cap) -> None:  # noqa: ANN001
    """Whatever stops the pass, every job is answered once and nothing is over-committed."""
    snap, jobs = case
    params = params_for(name, common, None)
    d = decide(snap, jobs, name, params, Budget(max_jobs=cap))
    assert check_decision(snap, jobs, d, params.time_grain_s) == []
    assert len(_looked_at(d)) == d.summary.jobs_considered == min(cap, len(jobs), params.queue_depth)


def test_stop_flag_ends_the_pass_at_the_next_job() -> None:
    """A stop asked for mid-pass (shutdown, client gone) leaves the rest not_evaluated."""
    snap, jobs = _busy_queue()
    asked = iter([False] * 4 + [True] * 100)  # one look before the pass, then one per chunk (1, 2, 4, ...)
    d = decide(snap, jobs, "conservative", None, Budget(stop=lambda: next(asked)))
    assert d.summary.budget_hit == BudgetHit.stopped and d.summary.jobs_considered == 7
    assert d.summary.not_evaluated == 23


def test_no_budget_looks_at_every_job() -> None:
    """Without a budget nothing is cut: the summary says no limit was hit."""
    snap, jobs = _busy_queue()
    d = decide(snap, jobs, "easy")
    assert d.summary.budget_hit is None and d.summary.jobs_considered == 30
    assert d.summary.not_evaluated == 0


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_a_budget_spent_before_the_pass_answers_without_ranking(name: str) -> None:
    """Past the deadline before the pass begins (or asked to stop): every job not_evaluated in the
    order given, nothing ranked, no job looked at."""
    snap, jobs = _busy_queue()
    late = Budget(FakeClock(), deadline=0.5)
    d = decide(snap, jobs, name, None, late)
    assert [p.job_id for p in d.pending] == [j.id for j in jobs]
    assert {p.reason for p in d.pending} == {Reason.not_evaluated}
    assert d.priorities == () and d.starts == () and d.reservations == ()
    assert d.summary.budget_hit == BudgetHit.time and d.summary.jobs_considered == 0
    assert d.summary.nodes_total == 3 and d.summary.not_evaluated == 30
    stopped = decide(snap, jobs, name, None, Budget(stop=lambda: True))
    assert stopped.summary.budget_hit == BudgetHit.stopped and len(stopped.pending) == 30


def test_time_kept_for_the_answer_ends_the_pass_earlier_by_at_most_half_the_budget() -> None:
    """Keeping 1 step for the answer out of 5.5 reads the clock past the deadline a chunk earlier (7
    jobs looked at instead of 1 + 2 + 4 + 8); asking for more than half keeps half (the pass still
    gets 2.75 steps: one chunk, 1 job); with no time budget, nothing."""
    snap, jobs = _busy_queue()
    looked = []
    for keep in (0.0, 1.0, 100.0):
        budget = Budget.starting_now(FakeClock(), time_s=5.5)
        budget.keep_for_answer(keep)
        looked.append(decide(snap, jobs, "easy", None, budget).summary.jobs_considered)
    assert looked == [15, 7, 1]
    unlimited = Budget.starting_now(FakeClock(), time_s=None)
    unlimited.keep_for_answer(4.0)
    assert decide(snap, jobs, "easy", None, unlimited).summary.jobs_considered == len(jobs)

"""Policy name -> (params type, policy class), DAG planner name -> class. One line each."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from app.sched.budget import Budget, unevaluated
from app.sched.collector import rare_collections
from app.sched.dag import best
from app.sched.dag.bound import lower_bound
from app.sched.dag.critical import critical_path
from app.sched.dag.graph import Compiled, compile_problem
from app.sched.dag.heft import HeftPlanner
from app.sched.dag.mdl import MdlPlanner
from app.sched.dag.model import DagProblem, Plan
from app.sched.dag.peft import PeftPlanner
from app.sched.dag.restarts import restart
from app.sched.dag.search import SearchResult, improve
from app.sched.dag.shift import absolute, relative
from app.sched.model import Decision, Job, Snapshot
from app.sched.params import CommonParams
from app.sched.policies.base import BasePolicy
from app.sched.policies.conservative import ConservativePolicy
from app.sched.policies.easy import EasyPolicy
from app.sched.policies.fcfs import FcfsPolicy
from app.sched.policies.firstfit import FirstfitPolicy
from app.sched.policies.memory_backfill import MemoryBackfillPolicy
from app.sched.policies.priority import PriorityPolicy

_CLASSES: tuple[type[BasePolicy], ...] = (
    FcfsPolicy, FirstfitPolicy, EasyPolicy, ConservativePolicy, MemoryBackfillPolicy,
    PriorityPolicy,
)
POLICIES: dict[str, tuple[type[CommonParams], type[BasePolicy]]] = {
    cls.NAME: (cls.Params, cls) for cls in _CLASSES  # type: ignore[attr-defined]
}


def decide(
    snapshot: Snapshot, pending: Sequence[Job], policy: str, params: CommonParams | None = None,
    budget: Budget | None = None,
) -> Decision:
    """The one scheduling function: every caller (HTTP, simulator, bench) goes through here.
    `budget` bounds the pass's work (none: every job is looked at, up to the queue depth)."""
    params_type, policy_type = POLICIES[policy]
    if budget is not None and budget.spent():
        return unevaluated(snapshot, pending, budget)
    with rare_collections():
        policy_obj = policy_type(params if params is not None else params_type())
        return policy_obj.decide(snapshot, pending, budget)


@dataclass(frozen=True, slots=True)
class DagResult:
    compiled: Compiled
    plan: Plan
    makespans: dict[str, float]  # per planner run: one entry, or every planner `best` ran
    critical: list[int]  # task indices, first to last
    now: float = 0.0  # the caller's `now`: `compiled` is relative to it, `plan` is on the caller's clock
    search: SearchResult | None = None  # what the local search after list scheduling did, if it ran
    restarts: int = 0  # `best`: list plans tried besides the planners' (other task priorities)
    bound: float | None = None  # a makespan no plan beats (`app.sched.dag.bound`), where it was computed
    skipped: dict[str, str] = field(default_factory=dict)  # `best`: planners not run, and why
    budget_s: float | None = None  # `best` without an asked budget: the time it had in all

    @property
    def makespan(self) -> float:
        return self.search.after if self.search is not None else self.makespans[self.plan.algorithm]


DAG_PLANNERS: dict[str, type[MdlPlanner] | type[HeftPlanner] | type[PeftPlanner]] = {
    MdlPlanner.NAME: MdlPlanner, HeftPlanner.NAME: HeftPlanner, PeftPlanner.NAME: PeftPlanner,
}
DAG_ALGORITHMS = (*DAG_PLANNERS, best.NAME)
NEAR_BOUND = 0.005  # a plan within this fraction of the lower bound is taken as short enough...
NEAR_MIN_CELLS = 100_000  # ...from this many tasks x groups (below, the search is cheap: it runs)
BEST_DEFAULT_S = 0.8  # `best` without an asked budget: everything (planners and search) within this
ANSWER_S_PER_TASK = 2e-6  # kept in hand from `best`'s total for what follows the search (critical path)
# a default-budget search stops once it stops gaining (`stalled`): no gain in the last max(PATIENCE,
# PATIENCE_WORK / tasks, n) re-timings, n those the last gain took; a re-timing costs about its tasks,
# so the window is about as long in time at every size (~0.1-0.3 s here), and small problems, whose
# gains come late (2-5 % at 300 tasks after 300-1000 re-timings), still get them
PATIENCE = 100
PATIENCE_WORK = 1_000_000
# `best`'s other priorities likewise, counted in list plans (compiled, ~10 x cheaper a task than a
# re-timing): a fixed 8 left best 0.7 % longer on bench_dag_saga's small instances
PATIENCE_PLANS = 8
PATIENCE_PLANS_WORK = 100_000


def plan_dag(problem: DagProblem, algorithm: str, explain: bool = False, search_s: float | None = 0.0,
             max_search_s: float = 2.0, max_evaluations: int | None = None, seed: int = 0,
             clock: Callable[[], float] | None = None, near_bound: float = NEAR_BOUND,
             best_default_s: float = BEST_DEFAULT_S, near_min_cells: int = NEAR_MIN_CELLS) -> DagResult:
    """The one DAG planning function: compile, plan with one planner (or several, for `best`),
    improve by local search, analyse. Planning runs in times relative to `now`; the plan returned is
    on the caller's clock.

    search_s: the search's budget in seconds on `clock` (the caller's, monotonic; the core reads
    none); 0 turns it off; None: SEARCH_MULTIPLE × the list scheduling time, at least MIN_SEARCH_S;
    never more than `max_search_s`. For `best` with search_s None (and a clock), the whole of it
    (compiling, planners, search) also keeps within `best_default_s` (and `max_search_s`): a planner
    after the first starts only when it is expected to end within that (the list time the search's
    default counts includes the expected time of those that do not), and the search has at most
    what is left. Without a clock only `max_evaluations` bounds the search (and without either there is
    none): the same request then always gives the same plan. Once a plan reaches the lower bound,
    `best` runs no more planners; once one is within `near_bound` (a fraction) of it, on a problem
    of `near_min_cells` tasks × groups or more, no search is begun or continued (it could gain at
    most that, and a small problem's search is cheap). A search on the default budget (search_s
    None) also stops once it stops gaining (`_patience`, `search.stalled`); an asked
    budget is searched to its end.
    """
    t0 = clock() if clock else 0.0
    c = compile_problem(relative(problem))
    bound = total = None
    skipped: dict[str, str] = {}
    skipped_s = 0.0
    keep = ANSWER_S_PER_TASK * c.n_tasks
    if algorithm == best.NAME:
        total = min(best_default_s, max_search_s) if search_s is None and clock else None
        plan, spans, skipped, skipped_s, bound = _portfolio(c, explain, _less(total, keep), clock, t0)
    else:
        plan = DAG_PLANNERS[algorithm]().plan(c, explain)
        spans = {algorithm: best.makespan(plan, 0.0)}
    # Without a clock time stands still (the search's clock reads 0): the budget never runs out and
    # only max_evaluations stops the search, so there is none without it.
    list_s = clock() - t0 if clock else 0.0
    budget = search_budget(search_s, list_s + skipped_s, max_search_s)
    budget = budget if total is None else max(0.0, min(budget, total - keep - list_s))
    found, tried = None, 0
    if budget > 0 and (clock or max_evaluations) and not (total is not None and bound is None):
        # (`best` left the bound out: its total had no time for it, nor for a search)
        bound = lower_bound(c) if bound is None else bound
        plan, found, tried = _search(c, plan, spans, algorithm == best.NAME and not explain, budget,
                                     max_evaluations, seed, clock or (lambda: 0.0), list_s / len(spans),
                                     _good_enough(c, bound, near_bound, near_min_cells), search_s is None)
    return DagResult(c, absolute(plan, problem), spans, critical_path(c, plan.placements), problem.now,
                     found, tried, bound, skipped, total)


def _less(total: float | None, keep: float) -> float | None:
    return None if total is None else max(0.0, total - keep)


def _good_enough(c: Compiled, bound: float, near: float, min_cells: int) -> float:
    """The makespan at which the search stops: the bound, or within `near` of it on a large problem."""
    return bound * (1 + near) if c.n_tasks * c.n_groups >= min_cells else bound


def _portfolio(c: Compiled, explain: bool, total: float | None, clock: Callable[[], float] | None,
               t0: float) -> tuple[Plan, dict[str, float], dict[str, str], float, float | None]:
    """`best`'s planners in `best.ORDER`, within `total` seconds from `t0` when it is given; the
    plan, the makespans, the planners skipped, the time those skipped for time would have taken
    (the search's default counts it as list time: skipping a planner does not shrink the search),
    and the lower bound (computed after the first planner if the total leaves time for it)."""
    pace = best.Pace(total, clock, clock() - t0) if clock else None
    found = best.best_plan(c, {n: DAG_PLANNERS[n]() for n in best.ORDER}, explain, lambda: lower_bound(c),
                           pace, prefer=list(DAG_PLANNERS))
    return found.plan, found.spans, found.skipped, found.skipped_s, found.bound


def _search(c: Compiled, plan: Plan, spans: dict[str, float], more_priorities: bool, budget: float,
            max_evaluations: int | None, seed: int, clock: Callable[[], float],
            one_plan_s: float = 0.0, target: float | None = None,
            until_stalled: bool = False) -> tuple[Plan, SearchResult, int]:
    """More list plans first (for `best`: half the budget, each started only if it fits, judged by
    `one_plan_s`, the time of one list plan, and then by the slowest so far), then the local search
    on the best; neither goes on once the plan reaches `target` (the lower bound, or close enough),
    nor, `until_stalled`, once it stops gaining."""
    t1, listed, tried = clock(), best.makespan(plan, 0.0), 0
    if more_priorities:
        share = None if max_evaluations is None else max(1, max_evaluations // 4)
        plan, tried = restart(c, plan, budget / 2, share, seed, clock, one_plan_s, target,
                              _patience(c, PATIENCE_PLANS, PATIENCE_PLANS_WORK) if until_stalled else None)
        spans.setdefault(plan.algorithm, best.makespan(plan, 0.0))
    found = improve(c, plan, budget - (clock() - t1), max_evaluations, seed, clock, target,
                    _patience(c, PATIENCE, PATIENCE_WORK) if until_stalled else None)
    found = replace(found, before=listed, budget_s=budget, seconds=clock() - t1)
    return found.plan, found, tried


def _patience(c: Compiled, least: int, work: int) -> int:
    """Tries without gain after which a search has stopped gaining: about `work` tasks' worth."""
    return max(least, work // max(c.n_tasks, 1))


SEARCH_MULTIPLE = 3.0
MIN_SEARCH_S = 0.05


def search_budget(asked: float | None, list_s: float, cap_s: float) -> float:
    if asked is None:
        asked = max(MIN_SEARCH_S, SEARCH_MULTIPLE * list_s)
    return max(0.0, min(asked, cap_s))

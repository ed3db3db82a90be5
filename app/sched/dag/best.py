"""`best`: run the planners in turn, keep the shortest plan (ties go to the first in `prefer`, `mdl`).

The planners run cheapest first (`ORDER`: HEFT, then PEFT, then MDL, which takes 13-60 x HEFT's
time). One is skipped, and says why in `Portfolio.skipped`, when a plan so far already reaches the
lower bound (`app.sched.dag.bound`: no plan is shorter), or when a budget is given and the planner
could not be expected to end within it: its expected time is its `COST` (its time relative to
HEFT's) times the slowest pace, seconds per unit of `COST`, of the planners run so far. One that
starts and then cannot end within the budget (at the pace it goes, or at all) gives up and is
skipped too (`Pace.late`). The first planner always runs, to its end.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from app.sched.dag.bound import reaches
from app.sched.dag.graph import Compiled
from app.sched.dag.model import Late, Plan, Stopped, TaskStatus

NAME = "best"
ORDER = ("heft", "peft", "mdl")
# time relative to HEFT's (compiled, `list_kernel`) on bench_dag's shapes at 1,000 and 10,000 tasks x
# 64 groups and 20,000 x 200 x 2: mdl 13-60 x, peft 1.0-1.8 x. PEFT's compiled loop cannot stop part
# way, so it is taken at the top of its range; MDL gives up when late (`Pace.late`): the middle
COST = {"heft": 1.0, "mdl": 25.0, "peft": 1.8, "bound": 1.0}  # bound: the lower bound, 0.4-1.3 x
SKIP_BOUND = "reached_bound"  # a plan so far reaches the lower bound: none is shorter
SKIP_TIME = "time_budget"  # it could not be expected to end within the time budget, or gave up
PROJECT_FROM = 0.5  # `Pace.late` projects a planner's end once it has placed this fraction more


def makespan(plan: Plan, now: float) -> float:
    """Latest finish of the tasks still to run (planned or running) minus `now`; 0 when all are done."""
    return max((p.finish - now for p in plan.placements if p.status != TaskStatus.DONE), default=0.0)


@dataclass(slots=True)
class Portfolio:
    plan: Plan
    spans: dict[str, float]  # per planner run, in the order run
    skipped: dict[str, str] = field(default_factory=dict)  # per planner not run: why
    skipped_s: float = 0.0  # the time the planners skipped for time were expected to take
    bound: float | None = None  # the lower bound, if it was given or computed


@dataclass(slots=True)
class Pace:
    """When a planner may start: the budget left on the caller's clock and the pace seen so far."""

    budget_s: float | None = None  # None: no limit
    clock: Callable[[], float] = lambda: 0.0
    spent_s: float = 0.0  # already spent from the budget before the first planner
    per_cost: float = 0.0  # seconds per unit of COST, the slowest seen
    t0: float = field(init=False, default=0.0)  # when the budget began, on `clock`

    def __post_init__(self) -> None:
        self.t0 = self.clock() - self.spent_s

    def expected(self, name: str) -> float:
        return self.per_cost * COST.get(name, 1.0)

    def fits(self, name: str) -> bool:
        return self.budget_s is None or self.clock() - self.t0 + self.expected(name) <= self.budget_s

    def late(self) -> Late:
        """For a planner about to start: whether, having placed a fraction `done` of its tasks, it
        should give up: the budget is spent, or its pace since the first question (its set-up
        apart) says the rest would not end within what is left."""
        first: list[float] = []

        def late(done: float) -> bool:
            now = self.clock()
            left = self.budget_s - (now - self.t0) if self.budget_s is not None else float("inf")
            if not first:
                first.extend((now, done))
            went = done - first[1]
            return left <= 0 or (went >= PROJECT_FROM and (now - first[0]) * (1 - done) / went > left)
        return late

    def timed(self, name: str, run: Callable[[], Plan]) -> Plan:
        t1 = self.clock()
        plan = run()
        self.per_cost = max(self.per_cost, (self.clock() - t1) / COST.get(name, 1.0))
        return plan


def best_plan(c: Compiled, planners: Mapping[str, object], explain: bool = False,
              bound: float | Callable[[], float] | None = None, pace: Pace | None = None,
              prefer: Sequence[str] = ()) -> Portfolio:
    """The shortest of the planners' plans (run in the order given), each one's makespan, and the
    planners skipped: those after a plan that reaches `bound` (a makespan no plan beats), and those
    `pace` does not expect to end within its budget or that gave up on it. Among equal makespans the
    first in `prefer` wins, then the first run. `bound` given as a function is computed after the
    first planner when `pace` expects it to fit (COST["bound"]), else left out: at the size limit on
    a short total it would cost as much as HEFT, after the plan is already there."""
    pace = pace or Pace()
    plans: dict[str, Plan] = {}
    spans: dict[str, float] = {}
    skipped: dict[str, str] = {}
    skipped_s = 0.0
    for name, planner in planners.items():
        if plans and callable(bound):
            bound = bound() if pace.fits("bound") else None
        if plans and reaches(min(spans.values()), bound):
            skipped[name] = SKIP_BOUND
        elif plans and not pace.fits(name):
            skipped[name], skipped_s = SKIP_TIME, skipped_s + pace.expected(name)
        else:
            late = pace.late() if plans else None  # the first runs to its end: there is no plan yet
            try:
                plans[name] = pace.timed(name, lambda p=planner, k=late: p.plan(c, explain, k))  # type: ignore[attr-defined]
            except Stopped:
                skipped[name], skipped_s = SKIP_TIME, skipped_s + pace.expected(name)
                continue
            spans[name] = makespan(plans[name], c.problem.now)
    if callable(bound):  # a single planner
        bound = bound() if pace.fits("bound") else None
    rank = {name: i for i, name in enumerate(prefer)}
    winner = min(spans, key=lambda name: (spans[name], rank.get(name, len(rank))))
    return Portfolio(plans[winner], spans, skipped, skipped_s, bound)

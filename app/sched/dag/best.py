"""`best`: run every planner, keep the shortest plan (ties go to the first in DAG_PLANNERS, `mdl`)."""

from __future__ import annotations

from collections.abc import Mapping

from app.sched.dag.bound import reaches
from app.sched.dag.graph import Compiled
from app.sched.dag.model import Plan, TaskStatus

NAME = "best"


def makespan(plan: Plan, now: float) -> float:
    """Latest finish of the tasks still to run (planned or running) minus `now`; 0 when all are done."""
    return max((p.finish - now for p in plan.placements if p.status != TaskStatus.DONE), default=0.0)


def best_plan(
    c: Compiled, planners: Mapping[str, object], explain: bool = False, bound: float | None = None
) -> tuple[Plan, dict[str, float]]:
    """The shortest of the planners' plans, and each one's makespan. Once a plan reaches `bound`, a
    makespan no plan can beat (`app.sched.dag.bound`), the planners after it are not run."""
    plans: dict[str, Plan] = {}
    spans: dict[str, float] = {}
    for name, planner in planners.items():
        plans[name] = planner.plan(c, explain)  # type: ignore[attr-defined]
        spans[name] = makespan(plans[name], c.problem.now)
        if reaches(spans[name], bound):
            break
    winner = min(spans, key=lambda name: spans[name])  # first of equals wins: dict order
    return plans[winner], spans

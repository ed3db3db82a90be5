"""`best`: run every planner, keep the shortest plan (ties go to the first in DAG_PLANNERS, `mdl`)."""

from __future__ import annotations

from collections.abc import Mapping

from app.sched.dag.graph import Compiled
from app.sched.dag.model import Plan, TaskStatus

NAME = "best"


def makespan(plan: Plan, now: float) -> float:
    """Latest finish of the tasks still to run (planned or running) minus `now`; 0 when all are done."""
    return max((p.finish - now for p in plan.placements if p.status != TaskStatus.DONE), default=0.0)


def best_plan(
    c: Compiled, planners: Mapping[str, object], explain: bool = False
) -> tuple[Plan, dict[str, float]]:
    plans = {name: p.plan(c, explain) for name, p in planners.items()}  # type: ignore[attr-defined]
    spans = {name: makespan(plan, c.problem.now) for name, plan in plans.items()}
    winner = min(spans, key=lambda name: spans[name])  # first of equals wins: dict order
    return plans[winner], spans

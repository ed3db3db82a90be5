"""Planning in times relative to `now`: a plan at now = 1e12 with millisecond tasks keeps the
durations exact (doubles near 1e12 are 1.2e-4 s apart), and the absolute times are put back once."""

from __future__ import annotations

from dataclasses import replace

from app.sched.dag.model import DagProblem, Placement, Plan, Step, Task, TaskStatus

# How a step's score moves with the clock: heft's is a finish time, mdl's has − max(t_d, t_a) in it.
SCORE_CLOCK = {"heft": 1.0, "mdl": -1.0}


def relative(p: DagProblem) -> DagProblem:
    """The same problem with `now` at 0: every time given minus `now`."""
    if p.now == 0:
        return p
    now = p.now
    tasks = tuple(replace(t, start=None if t.start is None else t.start - now,
                          finish=None if t.finish is None else t.finish - now) for t in p.tasks)
    groups = tuple(replace(g, free_at=g.free_at - now) for g in p.groups)
    return replace(p, tasks=tasks, groups=groups, now=0.0)


def absolute(plan: Plan, original: DagProblem) -> Plan:
    """A plan made relative to `now`, on the caller's clock; tasks that ran keep their times as given."""
    now = original.now
    if now == 0:
        return plan
    return Plan(plan.algorithm,
                [_shift(pl, original.tasks[pl.task], now) for pl in plan.placements],
                [_shift_step(s, now * SCORE_CLOCK.get(plan.algorithm, 0.0), now) for s in plan.steps])


def _shift(pl: Placement, task: Task, now: float) -> Placement:
    start = task.start if pl.status != TaskStatus.PENDING and task.start is not None else pl.start + now
    finish = task.finish if pl.status == TaskStatus.DONE and task.finish is not None else pl.finish + now
    return replace(pl, start=start, finish=finish)


def _shift_step(s: Step, by: float, now: float) -> Step:
    runner = None if s.runner_up_score is None else s.runner_up_score + by
    return replace(s, start=s.start + now, score=s.score + by, runner_up_score=runner)

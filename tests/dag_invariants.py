"""What every DAG plan must satisfy, checked from the problem and the placements alone."""

from __future__ import annotations

from collections import defaultdict

from app.sched.dag.graph import compile_problem
from app.sched.dag.model import DagProblem, Placement, TaskStatus

EPS = 1e-7


def close(a: float, b: float) -> bool:
    return abs(a - b) <= EPS * max(1.0, abs(a), abs(b))


def check_plan(p: DagProblem, placements: list[Placement], makespan: float | None = None) -> None:
    """Raise AssertionError naming the first broken rule."""
    c = compile_problem(p)
    assert [pl.task for pl in placements] == list(range(len(p.tasks))), "one placement per task, in order"
    for pl in placements:
        task, group = p.tasks[pl.task], p.groups[pl.group]
        if pl.status == TaskStatus.PENDING:
            assert c.cost[pl.task, pl.group] < float("inf"), f"{task.id} on {group.id}, which cannot run it"
            assert close(pl.finish - pl.start, c.cost[pl.task, pl.group]), f"{task.id} runs its cost"
            assert pl.start >= p.now - EPS, f"{task.id} starts before now"
            assert pl.start >= group.free_at - EPS, f"{task.id} starts before {group.id} is free"
        else:
            assert group.id == task.group, f"{task.id} moved from the group it ran on"
    index = {t.id: i for i, t in enumerate(p.tasks)}
    for e in p.edges:
        u, v = placements[index[e.src]], placements[index[e.dst]]
        arrive = u.finish + c.transfer(u.group, v.group, e.data)
        if v.status == TaskStatus.PENDING:
            assert v.start >= arrive - EPS * max(1.0, abs(arrive)), (
                f"{e.dst} starts at {v.start} before its input from {e.src} arrives at {arrive}")
    _check_capacity(p, placements)
    live = [pl.finish for pl in placements if pl.status != TaskStatus.DONE]
    if makespan is not None:
        assert close(makespan, max(live, default=p.now) - p.now if live else 0.0), "makespan = latest finish"


def _check_capacity(p: DagProblem, placements: list[Placement]) -> None:
    """No group runs more tasks than its slots at any instant; no slot runs two at once."""
    by_group: dict[int, list[Placement]] = defaultdict(list)
    by_slot: dict[tuple[int, int], list[Placement]] = defaultdict(list)
    for pl in placements:
        if pl.status == TaskStatus.DONE or pl.finish <= pl.start:
            continue
        by_group[pl.group].append(pl)
        by_slot[(pl.group, pl.slot)].append(pl)  # type: ignore[index]
    for r, pls in by_group.items():
        events = sorted([(pl.start, 1) for pl in pls] + [(pl.finish, -1) for pl in pls],
                        key=lambda e: (e[0], e[1]))
        running = 0
        for _, step in events:
            running += step
            assert running <= p.groups[r].slots, f"group {p.groups[r].id} runs more than its slots"
    for (r, k), pls in by_slot.items():
        pls.sort(key=lambda pl: pl.start)
        for a, b in zip(pls, pls[1:], strict=False):
            assert b.start >= a.finish - EPS * max(1.0, a.finish), (
                f"slot {k} of {p.groups[r].id} runs {p.tasks[a.task].id} and {p.tasks[b.task].id} at once")

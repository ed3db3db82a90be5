"""The critical path of a plan: the chain of constraints that sets its finish time.

Walking back from the last task to finish, each step follows what held the task's start: the input
that arrived last (a predecessor's finish plus the transfer) or the task before it on the same slot.
The walk stops at a task that starts when the plan does (`now`, a group's free time) or at a task
already running or done.
"""

from __future__ import annotations

from collections import defaultdict

from app.sched.dag.graph import Compiled
from app.sched.dag.model import Placement, TaskStatus


def _same(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))


def _lane_predecessors(placements: list[Placement]) -> dict[int, Placement]:
    by_lane: dict[tuple[int, int], list[Placement]] = defaultdict(list)
    for p in placements:
        if p.slot is not None:
            by_lane[(p.group, p.slot)].append(p)
    before: dict[int, Placement] = {}
    for lane in by_lane.values():
        lane.sort(key=lambda p: (p.start, p.finish))
        for prev, p in zip(lane, lane[1:], strict=False):
            before[p.task] = prev
    return before


def critical_path(c: Compiled, placements: list[Placement]) -> list[int]:
    live = [p for p in placements if p.status != TaskStatus.DONE]
    if not live:
        return []
    v = max(live, key=lambda p: (p.finish, -p.task)).task
    before = _lane_predecessors(placements)
    path, seen = [v], {v}
    while placements[v].status == TaskStatus.PENDING:
        v = _binding(c, placements, before, v)
        if v is None or v in seen:  # zero-length tasks could tie a loop; stop rather than spin
            break
        path.append(v)
        seen.add(v)
    return path[::-1]


def _binding(c: Compiled, placements: list[Placement], before: dict[int, Placement], v: int) -> int | None:
    p = placements[v]
    for u, data in c.preds[v]:
        q = placements[u]
        if _same(q.finish + c.transfer(q.group, p.group, data), p.start):
            return u
    prev = before.get(v)
    if prev is not None and _same(prev.finish, p.start):
        return prev.task
    return None

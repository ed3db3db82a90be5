"""Plain records of a DAG planning problem and its plan.

Times are seconds on the caller's clock (`now` is an argument, never read from a clock). A task's
cost on a group is `work / speed` when the group has every label the task requires, or the explicit
per-group cost the caller gave; a group that cannot run the task has no cost (infinite).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum


class TaskStatus(StrEnum):
    PENDING = "pending"  # to be planned
    RUNNING = "running"  # started for real on `group` at `start`; holds a slot until its expected end
    DONE = "done"  # finished for real at `finish`; its outputs sit on `group`


@dataclass(frozen=True, slots=True)
class Task:
    id: str
    work: float | None = None  # seconds on a group of speed 1
    costs: Mapping[str, float] | None = None  # seconds per group id; groups not named cannot run it
    requires: frozenset[str] = frozenset()
    status: TaskStatus = TaskStatus.PENDING
    group: str | None = None
    start: float | None = None
    finish: float | None = None


@dataclass(frozen=True, slots=True)
class Edge:
    src: str
    dst: str
    data: float = 0.0  # bytes sent from src to dst


@dataclass(frozen=True, slots=True)
class Group:
    id: str
    speed: float = 1.0
    labels: frozenset[str] = frozenset()
    free_at: float = 0.0  # its slots take no task of this workflow before then
    slots: int = 1  # tasks it runs at once


@dataclass(frozen=True, slots=True)
class Link:
    a: str
    b: str
    bandwidth: float  # bytes per second, both directions
    latency: float = 0.0  # seconds


@dataclass(frozen=True, slots=True)
class Network:
    bandwidth: float = 1.25e8  # bytes per second between two different groups (10 Gbit/s)
    latency: float = 0.0
    links: tuple[Link, ...] = ()


@dataclass(frozen=True, slots=True)
class DagProblem:
    tasks: tuple[Task, ...]
    edges: tuple[Edge, ...]
    groups: tuple[Group, ...]
    network: Network = Network()
    now: float = 0.0


@dataclass(frozen=True, slots=True)
class Placement:
    task: int  # index into DagProblem.tasks
    group: int  # index into DagProblem.groups
    slot: int | None  # None for a task done before this plan (which slot it used is not known)
    start: float
    finish: float
    status: TaskStatus


@dataclass(frozen=True, slots=True)
class Step:
    """One choice of a planner, for `explain`: the pair it took and the best pair it did not take."""

    task: int
    group: int
    score: float  # MDL for mdl (larger wins), finish time for heft (smaller wins)
    start: float
    runner_up_task: int | None = None
    runner_up_group: int | None = None
    runner_up_score: float | None = None


@dataclass(slots=True)
class Plan:
    algorithm: str
    placements: list[Placement]  # in task order
    steps: list[Step] = field(default_factory=list)

    @property
    def finish(self) -> float:
        return max((p.finish for p in self.placements), default=0.0)


Late = Callable[[float], bool]  # given the fraction of its tasks a planner has placed: whether to give up
CHECK_EVERY = 64  # placements between two questions to `Late` (a clock read each, on the caller's clock)


class Stopped(Exception):  # noqa: N818 (a planner's outcome, not a fault)
    """A planner gave up before its plan was whole, because its `Late` said it could not end in time."""


def check(late: Late | None, placed: int, total: int) -> None:
    """Every CHECK_EVERY placements, ask `late` whether to go on; raise Stopped if not."""
    if late is not None and placed % CHECK_EVERY == 0 and late(placed / max(total, 1)):
        raise Stopped

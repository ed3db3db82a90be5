"""POST /dag/plan: a workflow (native tasks and edges, or a WfCommons WfFormat 1.5 instance) and the
resource service groups in; a plan (group, slot, start and finish of every task) out."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from schemas.common import MAX_CPU, TIME_BOUND, Strict, Time

MAX_SECONDS = TIME_BOUND  # bounds that keep every sum of times and transfers finite
MAX_BYTES = 1e18


class TaskState(StrEnum):
    pending = "pending"
    running = "running"
    done = "done"


class TaskIn(Strict):
    id: str = Field(..., min_length=1)
    work: float | None = Field(
        None, ge=0, le=MAX_SECONDS,
        description="seconds on a group of speed 1; give `work` or `costs`, not both")
    costs: dict[str, Annotated[float, Field(ge=0, le=MAX_SECONDS)]] | None = Field(
        None, description="seconds on each group that can run it (group id -> seconds); "
        "groups not named cannot run it")
    requires: list[str] = Field(
        default_factory=list, description="libraries/labels a group must have to run it (with `work`)")
    status: TaskState = TaskState.pending
    group: str | None = Field(None, description="where it ran or runs (running and done tasks)")
    start: Time | None = Field(None, description="actual start (running; optional for done)")
    finish: Time | None = Field(None, description="actual finish (done)")


class EdgeIn(Strict):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    source: str = Field(..., alias="from", min_length=1)
    target: str = Field(..., alias="to", min_length=1)
    data: float = Field(0.0, ge=0, le=MAX_BYTES, description="bytes sent from `from` to `to`")


class GroupIn(Strict):
    id: str = Field(..., min_length=1)
    speed: float = Field(1.0, ge=1e-6, le=1e6, description="work units per second")
    labels: list[str] = Field(default_factory=list, description="libraries/labels it offers")
    free_at: Time | None = Field(None, description="when it is next free; default: now")
    slots: int = Field(1, ge=1, le=4096, description="tasks it runs at once")


class LinkIn(Strict):
    a: str = Field(..., min_length=1)
    b: str = Field(..., min_length=1)
    bandwidth: float = Field(..., ge=1.0, description="bytes per second, both ways")
    latency: float = Field(0.0, ge=0, le=MAX_SECONDS, description="seconds")


class NetworkIn(Strict):
    bandwidth: float = Field(1.25e8, ge=1.0, description="bytes per second between two groups")
    latency: float = Field(0.0, ge=0, le=MAX_SECONDS, description="seconds per transfer between two groups")
    links: list[LinkIn] = Field(default_factory=list, description="per-pair overrides")


class Foreign(BaseModel):
    """WfFormat is another project's format: the fields listed are read, the others are ignored."""

    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)


class WfFile(Foreign):
    id: str
    sizeInBytes: float = Field(0, ge=0, le=MAX_BYTES)


class WfSpecTask(Foreign):
    id: str = Field(..., min_length=1)
    parents: list[str] = Field(default_factory=list)
    children: list[str] = Field(default_factory=list)
    inputFiles: list[str] = Field(default_factory=list)
    outputFiles: list[str] = Field(default_factory=list)


class WfSpecification(Foreign):
    tasks: list[WfSpecTask]
    files: list[WfFile] = Field(default_factory=list)


class WfExecTask(Foreign):
    id: str
    runtimeInSeconds: float = Field(..., ge=0, le=MAX_SECONDS)


class WfCpu(Foreign):
    coreCount: int = Field(1, ge=1, le=MAX_CPU)


class WfMachine(Foreign):
    nodeName: str = Field(..., min_length=1)
    cpu: WfCpu = WfCpu()


class WfExecution(Foreign):
    tasks: list[WfExecTask]
    machines: list[WfMachine] = Field(default_factory=list)


class WfWorkflow(Foreign):
    specification: WfSpecification
    execution: WfExecution


class WfInstance(Foreign):
    """A WfCommons WfFormat 1.5 instance (https://github.com/wfcommons/WfFormat). A task's `work` is its
    recorded `runtimeInSeconds` (speed 1 = the machine it was recorded on); an edge's data is the total
    size of the files the parent writes and the child reads."""

    schemaVersion: Literal["1.5"]
    name: str = ""
    workflow: WfWorkflow


class ProgressIn(Strict):
    """Replanning a WfFormat workflow: what already ran."""

    id: str = Field(..., min_length=1)
    status: Literal["running", "done"]
    group: str = Field(..., min_length=1)
    start: float | None = None
    finish: float | None = None


EXAMPLE = {
    "now": 0,
    "tasks": [
        {"id": "split", "work": 30},
        {"id": "align_1", "work": 600, "requires": ["bwa"]},
        {"id": "align_2", "work": 650, "requires": ["bwa"]},
        {"id": "call", "work": 400, "requires": ["gatk"]},
        {"id": "report", "costs": {"login": 20, "bio-a": 30}},
    ],
    "edges": [
        {"from": "split", "to": "align_1", "data": 2.0e9},
        {"from": "split", "to": "align_2", "data": 2.0e9},
        {"from": "align_1", "to": "call", "data": 5.0e8},
        {"from": "align_2", "to": "call", "data": 5.0e8},
        {"from": "call", "to": "report", "data": 1.0e7},
    ],
    "groups": [
        {"id": "bio-a", "speed": 1.0, "labels": ["bwa", "gatk"], "slots": 2},
        {"id": "bio-b", "speed": 1.5, "labels": ["bwa"]},
        {"id": "login", "speed": 1.0},
    ],
    "network": {"bandwidth": 1.25e8, "latency": 0.001},
    "algorithm": "best",
}


class DagPlanRequest(Strict):
    model_config = {"extra": "forbid", "json_schema_extra": {"examples": [EXAMPLE]}}

    now: Time = Field(0.0, description="plan start; nothing pending starts before it")
    tasks: list[TaskIn] | None = Field(None, description="the workflow's tasks (or give `workflow`)")
    edges: list[EdgeIn] = Field(default_factory=list)
    workflow: WfInstance | None = Field(None, description="a WfFormat 1.5 instance instead of tasks/edges")
    progress: list[ProgressIn] = Field(
        default_factory=list, description="with `workflow`: tasks already running or done")
    groups: list[GroupIn] | None = Field(
        None, description="resource service groups; with `workflow` the default is one group per "
        "recorded machine, one slot per core, speed 1")
    network: NetworkIn = NetworkIn()
    algorithm: Literal["mdl", "heft", "peft", "best"] = "mdl"
    time_budget_s: float | None = Field(
        None, ge=0, le=600,
        description="seconds for improving the list plan (local search; for `best` also more task "
        "priorities, and every planner runs); 0: none; default: 3 × the list scheduling time, at least "
        "0.05 s, and the search stops sooner once it stops gaining (no shorter plan in the last "
        "max(100, 10⁶ / tasks) re-timings, or as many as the last gain took); an asked budget is "
        "searched to its end; never more than the service's HPCSCHED_DAG_MAX_SEARCH_S. `best` without "
        "it keeps as a "
        "whole (from the start of planning: parsing and checking the body are not counted, `timing_ms` "
        "reports them apart) within HPCSCHED_DAG_BEST_DEFAULT_S (and that ceiling): a planner "
        "after the first starts only when it is expected to end within it (see `skipped`), and the "
        "search has what is left")
    explain: bool = Field(
        False, description="return each choice with its MDL (or finish time) and the runner-up")


class RunnerUpOut(BaseModel):
    task: str
    group: str
    score: float


class StepOut(BaseModel):
    task: str
    group: str
    score: float = Field(
        ..., description="MDL of the pair (mdl, larger wins) or finish time (heft, smaller wins)")
    start: float
    runner_up: RunnerUpOut | None = None


class TaskPlanOut(BaseModel):
    id: str
    group: str
    slot: int | None = Field(None, description="which of the group's slots; unknown for done tasks")
    start: float
    finish: float
    status: Literal["planned", "running", "done"]
    static_level: float
    critical: bool


class SearchOut(BaseModel):
    budget_s: float = Field(..., description="the time the search was given")
    ms: float = Field(..., description="the time it took")
    before: float = Field(..., description="makespan of the list plan it started from")
    after: float = Field(..., description="makespan after it (never more than `before`)")
    gain: float = Field(..., description="(before − after) / before")
    moves: int = Field(..., description="task moves kept")
    evaluations: int = Field(..., description="plans re-timed")
    restarts: int = Field(0, description="`best`: list plans tried under other task priorities")


class DagPlanResponse(BaseModel):
    plan_id: str | None = Field(
        None, description="GET /dag/plan/{plan_id} returns this plan until it expires")
    expires_in_s: int | None = None
    algorithm: str = Field(..., description="what was asked")
    used: str = Field(..., description="the list planner (or task priority, for best) whose plan the "
                      "search started from; differs from `algorithm` for best")
    now: float
    makespan: float = Field(..., description="latest finish of the running and planned tasks − now")
    search: SearchOut | None = Field(None, description="what the search after list scheduling gained")
    finish: float = Field(..., description="latest finish of any task")
    makespans: dict[str, float] = Field(
        ..., description="makespan of each planner run, in the order run (`best`: heft, peft, mdl)")
    skipped: dict[str, str] = Field(
        default_factory=dict, description="`best`: each planner it did not run, and why: "
        "`reached_bound` (a plan so far reached `lower_bound`: none is shorter) or `time_budget` (it "
        "could not be expected to end within `total_budget_s`, or started and gave up when it could not)")
    total_budget_s: float | None = Field(
        None, description="`best` without time_budget_s: the seconds its planners and search had in "
        "all, from the start of planning (HPCSCHED_DAG_BEST_DEFAULT_S, or the search ceiling if lower)")
    lower_bound: float | None = Field(
        None, description="no plan can have a shorter makespan: the larger of the longest chain of tasks "
        "(each on the group where it could finish first, every transfer at its cheapest, from when a slot "
        "is free) and the time all slots together need for the work. A plan that reaches it is optimal "
        "and `best` runs no more planners; on 100,000 tasks × groups or more, once a plan is within "
        "0.5 % of it, no search is begun or goes on. Computed for `best` (after its first planner, when "
        "its total leaves time for it: absent, no search ran either) and whenever the search runs")
    tasks: list[TaskPlanOut]
    groups: list[str]
    critical_path: list[str]
    steps: list[StepOut] | None = None
    warnings: list[str] = Field(default_factory=list)
    timing_ms: dict[str, float] = Field(default_factory=dict)

"""POST /schedule: a snapshot plus pending jobs plus a policy in; decisions with reasons out."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field, model_validator

from schemas.cluster import NodeIn, RunningJobIn, WindowIn
from schemas.common import (
    MAX_COUNT,
    MAX_CPU,
    MAX_GPU,
    MAX_MEM_MIB,
    MAX_NODES,
    NAME_PATTERN,
    NAME_RULE,
    TIME_BOUND,
    ReasonCode,
    StartKind,
    Strict,
    Time,
)
from schemas.policies import EasyPolicy, PolicySpec

MAX_FACTORS = 16
FactorName = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]{0,31}$")]


class PendingJobIn(Strict):
    id: str = Field(..., min_length=1)
    user: str = ""
    queue: str = Field("default", min_length=1)
    submit_time: Time = Field(..., description="epoch seconds")
    nodes: int = Field(1, ge=1, le=MAX_NODES, description="number of nodes")
    cpu: int = Field(1, ge=1, le=MAX_CPU, description="cpu cores per node")
    mem_mib: int = Field(0, ge=0, le=MAX_MEM_MIB, description="memory per node, MiB")
    mem_mib_per_cpu: int | None = Field(
        None, ge=0, le=MAX_MEM_MIB,
        description="memory per cpu, MiB (Slurm's --mem-per-cpu): per node, `cpu` times this "
        "(at most the bound of `mem_mib`); instead of `mem_mib`")
    gpu: int = Field(0, ge=0, le=MAX_GPU, description="gpus per node")
    walltime_s: float = Field(..., gt=0, le=TIME_BOUND, description="walltime estimate, seconds")
    exclusive: bool = Field(False, description="whole nodes: only an idle node holds it, and it "
                            "takes every cpu, all memory and every gpu of each node it gets")
    priority: float = Field(0.0, description="preset priority Y agreed with the administrator")
    priority_factors: dict[FactorName, float] = Field(
        default_factory=dict, max_length=MAX_FACTORS,
        description="the parts the preset `priority` is made of, as the resource manager weighed them "
        "(Slurm's `sprio`: age, fairshare, jobsize, partition, qos, nice, ...); shown in "
        "`priorities[].factors` as `preset_<name>`, never used in the order (`priority` is)")
    user_priority: float = 0.0
    queue_priority: float = 0.0
    vip: bool = False
    labels: list[str] = Field(default_factory=list, description="required node labels")
    promised_start: Time | None = Field(
        None, description="the start of the reservation a previous answer gave this job; with "
        "`promised_nodes`, `conservative` never plans it later (send back what `reservations` said)")
    promised_nodes: list[str] = Field(default_factory=list, max_length=MAX_NODES,
                                      description="that reservation's nodes")


EXAMPLE = {
    "now": 1_700_000_000,
    "nodes": [
        {"id": "n1", "queue": "batch", "capacity": {"cpu": 32, "mem_mib": 128_000}},
        {"id": "n2", "queue": "batch", "capacity": {"cpu": 32, "mem_mib": 128_000}},
        {"id": "n3", "queue": "batch", "labels": ["gpu"],
         "capacity": {"cpu": 16, "mem_mib": 256_000, "gpu": 4}},
    ],
    "running": [
        {"id": "r1", "queue": "batch", "start_time": 1_699_996_400, "walltime_s": 7200,
         "allocation": [{"node": "n1", "cpu": 32, "mem_mib": 64_000}]},
    ],
    "pending": [
        {"id": "align", "queue": "batch", "submit_time": 1_699_999_000, "nodes": 2, "cpu": 32,
         "mem_mib": 64_000, "walltime_s": 3600},
        {"id": "qc", "queue": "batch", "submit_time": 1_699_999_500, "cpu": 8,
         "mem_mib": 32_000, "walltime_s": 1800},
        {"id": "gpu-call", "queue": "batch", "submit_time": 1_699_999_600, "cpu": 4,
         "mem_mib": 16_000, "gpu": 1, "walltime_s": 600, "labels": ["gpu"]},
    ],
    "policy": {"name": "easy"},
}


class BudgetIn(Strict):
    """Limits this decision asks for; the service's own limits (settings) cap them."""

    time_s: float | None = Field(
        None, gt=0, le=3600, description="seconds this decision may take, from the body's arrival; "
        "jobs not looked at by then are `not_evaluated` (like Slurm's bf_max_time)")
    max_jobs: int | None = Field(
        None, ge=1, le=MAX_COUNT, description="jobs the pass may look at; the rest are `not_evaluated` "
        "(like Slurm's bf_max_job_test)")


class ScheduleRequest(Strict):
    now: Time = Field(..., description="epoch seconds")
    cluster_id: str | None = Field(
        None, pattern=NAME_PATTERN,
        description="a cluster cached by PUT /clusters/{id}, instead of `nodes`/`running` "
        f"({NAME_RULE})")
    nodes: list[NodeIn] | None = Field(None, min_length=1, description="the inline snapshot's nodes")
    running: list[RunningJobIn] = Field(default_factory=list)
    windows: list[WindowIn] = Field(
        default_factory=list, max_length=MAX_COUNT,
        description="maintenance windows / advance reservations: nothing starts or is reserved on "
        "their nodes over them; with `cluster_id`, added to the cached ones")
    pending: list[PendingJobIn] = Field(default_factory=list)
    policy: PolicySpec = Field(default_factory=EasyPolicy)
    examine: Literal["index", "all"] | None = Field(
        None, description="`index`: the pass sees only the candidate nodes the label-partition index "
        "finds (docs/methods.md §5); `all`: every node. Default: `index` for a `cluster_id`, `all` for "
        "an inline snapshot")
    budget: BudgetIn | None = Field(
        None, description="a smaller budget than the service's (HPCSCHED_DECISION_TIME_S, "
        "HPCSCHED_DECISION_MAX_JOBS); a larger one is capped to the service's")

    model_config = {"json_schema_extra": {"examples": [EXAMPLE]}}

    @model_validator(mode="after")
    def _one_snapshot(self) -> ScheduleRequest:
        if (self.nodes is None) == (self.cluster_id is None):
            raise ValueError("give an inline snapshot (`nodes`, `running`) or a `cluster_id`, exactly one")
        if self.cluster_id is not None and self.running:
            raise ValueError("with `cluster_id`, the running jobs are the cached ones: send none")
        return self


class StartOut(BaseModel):
    job_id: str
    node_ids: list[str]
    kind: StartKind
    queue: str
    expected_end: float


class ReservationOut(BaseModel):
    job_id: str
    node_ids: list[str]
    queue: str
    start_time: float
    end_time: float


class MigrationOut(BaseModel):
    job_id: str
    from_queue: str
    to_queue: str
    reason: str
    figures: dict[str, float]


class PendingOut(BaseModel):
    job_id: str
    queue: str
    reason: ReasonCode
    estimated_start: float | None
    detail: str


class PriorityOut(BaseModel):
    job_id: str
    priority: float
    rank: int
    factors: dict[str, float]


class BudgetOut(BaseModel):
    time_s: float | None = Field(description="the time budget applied (null: none)")
    max_jobs: int | None = Field(description="the cap on jobs looked at applied (null: none)")
    jobs_considered: int = Field(description="jobs the pass looked at")
    hit: Literal["time", "max_jobs", "depth", "stopped"] | None = Field(
        description="the limit that left jobs `not_evaluated`: `time` (the time budget), `max_jobs` "
        "(the cap on jobs looked at), `depth` (the policy's `queue_depth`: jobs ranked below it), "
        "`stopped` (the service was shutting down or the client left); null: every job was looked at")


class SummaryOut(BaseModel):
    policy: str
    started: int
    backfilled: int
    reserved: int
    migrated: int
    pending: int
    not_evaluated: int
    nodes_total: int
    nodes_examined: int
    queue_load: dict[str, float]
    timing_ms: dict[str, float]
    cluster_version: int | None = Field(
        None, description="with `cluster_id`: the version of the cached cluster this pass read, "
        "whole (as in its ETag); null for an inline snapshot")
    budget: BudgetOut | None = None


class ScheduleResponse(BaseModel):
    starts: list[StartOut]
    reservations: list[ReservationOut]
    migrations: list[MigrationOut]
    pending: list[PendingOut]
    priorities: list[PriorityOut]
    summary: SummaryOut

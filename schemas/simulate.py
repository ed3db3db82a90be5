"""POST /simulate: a small trace (SWF text or a job list), a policy and a machine in; the metrics out."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field, model_validator

from schemas.common import MAX_CPU, MAX_MEM_MIB, MAX_NODES, TIME_BOUND, Strict
from schemas.policies import EasyPolicy, PolicySpec


class MachineIn(Strict):
    nodes: int | None = Field(None, ge=1, le=MAX_NODES,
                              description="default: the trace's MaxProcs / cores_per_node")
    cores_per_node: int = Field(1, ge=1, le=MAX_CPU, description="1 = the classic processor-count model")
    mem_mib_per_node: int = Field(0, ge=0, le=MAX_MEM_MIB, description="0 = memory not modelled")
    split_queues: bool = Field(
        False, description="split the nodes among the trace's queues (for the multi-queue balancing of "
        "`policy.params.migration`): each queue gets its median job width, the rest by its share of the "
        "work; jobs wider than their queue's partition are left out and counted in `notes`")
    queue_nodes: dict[str, Annotated[int, Field(ge=1, le=MAX_NODES)]] | None = Field(
        None, min_length=1, description="nodes per trace queue (implies split_queues; every queue of the "
        "trace must be named); `nodes`, if given, must be their sum")


class SwfReadingIn(Strict):
    """How the trace's jobs are read; by default the scheduler is told only what it knows at submit time,
    after SchedGym's conventions."""

    size: Literal["larger", "allocated", "requested"] = Field(
        "larger", description="which processor count sizes a job: the larger of allocated and requested "
        "(SchedGym's rule), or the one named (the other one when it is missing)")
    kill_at_request: bool = Field(
        False, description="a job that ran past its requested time is killed there; by default the "
        "scheduler is told the request and the job runs its recorded time")
    raise_to_run: bool = Field(
        False, description="tell the scheduler the run time of a job that ran past its request (the "
        "request raised to it): a knowledge of the future no scheduler has")
    unknown_runtime: Literal["ten_seconds", "drop"] = Field(
        "ten_seconds", description="jobs whose run time is -1 (cancelled while waiting) count as 10 s jobs, "
        "or are left out")
    zero_runtime: Literal["drop", "keep"] = Field("drop", description="jobs whose run time is 0 s")

    @model_validator(mode="after")
    def _one_overrun_rule(self) -> SwfReadingIn:
        if self.kill_at_request and self.raise_to_run:
            raise ValueError("kill_at_request and raise_to_run exclude each other: a job killed at its "
                             "request never runs past it")
        return self


class SimJobIn(Strict):
    id: str = Field(..., min_length=1)
    submit: float = Field(..., ge=0, le=TIME_BOUND, description="seconds from the trace start")
    run: float = Field(..., ge=0, le=TIME_BOUND, description="real run time, seconds")
    procs: int = Field(..., ge=1, le=MAX_NODES * MAX_CPU, description="processors (cores)")
    estimate: float | None = Field(
        None, gt=0, le=TIME_BOUND, description="requested time; default: the run time")
    mem_kb_per_proc: float = Field(0, ge=0, le=MAX_MEM_MIB * 1024, description="KiB per processor")
    queue: str = ""
    user: str = ""


EXAMPLE = {
    "swf": "; MaxProcs: 4\n"
           "1 0 -1 10 3 -1 -1 3 10 -1 1 1 1 -1 0 -1 -1 -1\n"
           "2 1 -1 5 2 -1 -1 2 5 -1 1 1 1 -1 0 -1 -1 -1\n"
           "3 2 -1 5 4 -1 -1 4 5 -1 1 1 1 -1 0 -1 -1 -1\n"
           "4 3 -1 20 1 -1 -1 1 20 -1 1 1 1 -1 0 -1 -1 -1\n",
    "policy": {"name": "easy", "params": {"time_grain_s": 1}},
}


class SimulateRequest(Strict):
    model_config = {"extra": "forbid", "json_schema_extra": {"examples": [EXAMPLE]}}

    swf: str | None = Field(None, description="the trace in Standard Workload Format (give `swf` or `jobs`)")
    jobs: list[SimJobIn] | None = Field(None, description="the trace as a job list")
    policy: PolicySpec = Field(default_factory=EasyPolicy)
    machine: MachineIn = MachineIn()
    reading: SwfReadingIn = Field(
        default_factory=SwfReadingIn, description="how the trace's jobs are read; every adjustment is "
        "counted in `notes`")
    predict_runtimes: bool = Field(
        False, description="tell the scheduler predicted run times (the request scaled by the mean of the "
        "user's last two run/request ratios, at most the request) instead of the requests")
    correction: Literal["request", "stepwise"] = Field(
        "request", description="with predicted run times, what a job still running when its prediction "
        "is up is told: its request, or `stepwise`: its told time plus the next step of a ladder (1 min, "
        "5 min, 15 min, 30 min, 1 h, 2 h, 5 h, 10 h, 20 h, 50 h, 100 h), at most its request, again each "
        "time that is up (Tsafrir, Etsion & Feitelson 2007)")


class SimulateResponse(BaseModel):
    jobs: int
    machine: MachineIn
    metrics: dict[str, float]
    per_queue: dict[str, dict[str, float]]
    notes: list[str]
    timing_ms: dict[str, float]

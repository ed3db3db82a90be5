"""The cluster snapshot on the wire: nodes and the jobs running on them."""

from __future__ import annotations

from pydantic import Field

from schemas.common import TIME_BOUND, Capacity, Cpu, Gpu, MemMib, NodeState, Resources, Strict, Time

Id = str


class NodeIn(Strict):
    id: Id = Field(..., min_length=1)
    queue: str = Field("default", min_length=1, description="the queue (partition) it serves")
    labels: list[str] = Field(default_factory=list, description="hardware features, e.g. gpu")
    capacity: Capacity
    allocated: Resources | None = Field(
        None, description="in use now; omitted = the sum of the running jobs on it"
    )
    cpu_load: float = Field(0.0, ge=0.0, le=1.0, description="current cpu load, 0..1")
    cpu_ghz: float = Field(1.0, gt=0.0, description="cpu speed, GHz")
    state: NodeState = NodeState.up


class NodeAllocIn(Strict):
    node: Id = Field(..., min_length=1)
    cpu: Cpu = 0
    mem_mib: MemMib = 0
    gpu: Gpu = 0


class RunningJobIn(Strict):
    id: Id = Field(..., min_length=1)
    queue: str = Field("default", min_length=1)
    allocation: list[NodeAllocIn] = Field(..., min_length=1, description="what it holds, per node")
    start_time: Time = Field(..., description="epoch seconds")
    walltime_s: float = Field(..., gt=0, le=TIME_BOUND, description="walltime estimate, seconds")
    migrated: bool = False

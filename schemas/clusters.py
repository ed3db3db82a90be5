"""The cluster cache on the wire: PUT a snapshot, PATCH changes with If-Match, GET its summary."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field

from schemas.cluster import NodeIn, RunningJobIn, WindowIn
from schemas.common import MAX_COUNT, NodeState, Strict

EXAMPLE_PUT = {
    "nodes": [
        {"id": "n1", "queue": "batch", "capacity": {"cpu": 32, "mem_mib": 128_000}},
        {"id": "n2", "queue": "batch", "capacity": {"cpu": 32, "mem_mib": 128_000}},
        {"id": "g1", "queue": "batch", "capacity": {"cpu": 16, "mem_mib": 256_000, "gpu": 4}},
    ],
    "running": [{"id": "r1", "queue": "batch", "start_time": 1_700_000_000, "walltime_s": 3600,
                 "allocation": [{"node": "n1", "cpu": 16, "mem_mib": 64_000}]}],
}
EXAMPLE_PATCH = {"changes": [
    {"op": "job_started", "job": {"id": "r2", "queue": "batch", "start_time": 1_700_000_100,
                                  "walltime_s": 600, "allocation": [{"node": "n2", "cpu": 8}]}},
    {"op": "job_ended", "job_id": "r1"},
    {"op": "node_state", "node_id": "g1", "state": "drain"},
]}


class ClusterPut(Strict):
    """A full snapshot. Node allocations are what the running jobs hold (`allocated` is not kept)."""

    model_config = {"extra": "forbid", "json_schema_extra": {"examples": [EXAMPLE_PUT]}}

    nodes: list[NodeIn] = Field(..., min_length=1)
    running: list[RunningJobIn] = Field(default_factory=list)
    windows: list[WindowIn] = Field(default_factory=list, max_length=MAX_COUNT,
                                    description="maintenance windows / "
                                    "advance reservations")


class JobStarted(Strict):
    op: Literal["job_started"] = "job_started"
    job: RunningJobIn


class JobEnded(Strict):
    op: Literal["job_ended"] = "job_ended"
    job_id: str = Field(..., min_length=1)


class NodeAdded(Strict):
    op: Literal["node_added"] = "node_added"
    node: NodeIn


class NodeRemoved(Strict):
    op: Literal["node_removed"] = "node_removed"
    node_id: str = Field(..., min_length=1)


class NodeStateChanged(Strict):
    op: Literal["node_state"] = "node_state"
    node_id: str = Field(..., min_length=1)
    state: NodeState


class WindowAdded(Strict):
    op: Literal["window_added"] = "window_added"
    window: WindowIn


class WindowRemoved(Strict):
    op: Literal["window_removed"] = "window_removed"
    window_id: str = Field(..., min_length=1)


Change = Annotated[JobStarted | JobEnded | NodeAdded | NodeRemoved | NodeStateChanged | WindowAdded
                   | WindowRemoved,
                   Field(discriminator="op")]


class ClusterPatch(Strict):
    model_config = {"extra": "forbid", "json_schema_extra": {"examples": [EXAMPLE_PATCH]}}

    changes: list[Change] = Field(..., min_length=1, description="applied in order, all or none")


class PartitionOut(BaseModel):
    label: str
    nodes: int
    score_min: float
    score_max: float


class ClusterOut(BaseModel):
    cluster_id: str
    version: int
    nodes: int
    running: int
    partitions: list[PartitionOut] | None = Field(
        None, description="each label partition now (GET only: PUT and PATCH answer without it)")

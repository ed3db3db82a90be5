"""The cluster snapshot on the wire: nodes and the jobs running on them."""

from __future__ import annotations

from typing import Annotated, NotRequired

from pydantic import Field
from typing_extensions import TypedDict  # pydantic needs this one on Python < 3.12

from schemas.common import (
    MAX_NODES,
    STRICT_ITEM,
    TIME_BOUND,
    Capacity,
    Cpu,
    Gpu,
    MemMib,
    NodeState,
    Resources,
    Strict,
    Time,
)

Id = str
MAX_WEIGHT = 2**32 - 1  # Slurm's node weight is a 32-bit unsigned number


class NodeIn(Strict):
    id: Id = Field(..., min_length=1)
    queue: str = Field("default", min_length=1, description="the queue (partition) it serves; "
                       "the shorthand for `queues` of one name (with `queues`, omit it or give one "
                       "of them)")
    queues: list[Annotated[str, Field(min_length=1)]] = Field(
        default_factory=list, max_length=1024,
        description="every queue (partition) it serves, for overlapping partitions; a pending job "
        "of any of them may use it")
    weight: int = Field(1, ge=0, le=MAX_WEIGHT, description="preference, lower first (Slurm's node "
                        "weight): `first_fit` takes nodes by (weight, id), the other selectors break "
                        "ties by it")
    labels: list[str] = Field(default_factory=list, description="hardware features, e.g. gpu")
    capacity: Capacity
    allocated: Resources | None = Field(
        None, description="in use now; omitted = the sum of the running jobs on it"
    )
    cpu_load: float = Field(0.0, ge=0.0, le=1.0, description="current cpu load, 0..1")
    cpu_ghz: float = Field(1.0, gt=0.0, description="cpu speed, GHz")
    state: NodeState = NodeState.up

    def queue_names(self) -> tuple[str, tuple[str, ...]]:
        """(the queue it is listed under, every queue it serves when more than one, sorted):
        `queue` if given, else the first of `queues`."""
        if not self.queues:
            return self.queue, ()
        primary = self.queue if "queue" in self.model_fields_set else self.queues[0]
        every = tuple(sorted(set(self.queues)))
        return primary, every if len(every) > 1 else ()

    def queue_conflict(self) -> str | None:
        """Why `queue` and `queues` disagree (None: they do not)."""
        if self.queues and "queue" in self.model_fields_set and self.queue not in self.queues:
            return f"queue {self.queue!r} is not one of queues {self.queues}"
        return None


# What a running job holds on one node, and the running job. Typed dicts rather than models: a
# snapshot carries several running jobs per node, and pydantic validates one into a plain dict (every
# default filled in) in half the time it takes to build model instances. Same rules as `Strict`
# (STRICT_ITEM), and the same JSON schema. (Comments, not docstrings: those would enter the schema.)
class NodeAllocIn(TypedDict):
    __pydantic_config__ = STRICT_ITEM  # type: ignore[misc]
    node: Annotated[Id, Field(min_length=1)]
    cpu: NotRequired[Annotated[Cpu, Field(0)]]
    mem_mib: NotRequired[Annotated[MemMib, Field(0)]]
    gpu: NotRequired[Annotated[Gpu, Field(0)]]


class RunningJobIn(TypedDict):
    __pydantic_config__ = STRICT_ITEM  # type: ignore[misc]
    id: Annotated[Id, Field(min_length=1)]
    queue: NotRequired[Annotated[str, Field("default", min_length=1)]]
    allocation: Annotated[list[NodeAllocIn], Field(min_length=1, description="what it holds, per node")]
    start_time: Annotated[Time, Field(description="epoch seconds")]
    walltime_s: Annotated[float, Field(gt=0, le=TIME_BOUND, description="walltime estimate, seconds")]
    migrated: NotRequired[Annotated[bool, Field(False)]]


class WindowIn(Strict):
    """A maintenance window or advance reservation: its nodes take nothing from start to end."""

    id: Id = Field(..., min_length=1)
    nodes: list[Annotated[Id, Field(min_length=1)]] = Field(..., min_length=1, max_length=MAX_NODES,
                                                            description="node ids it covers")
    start: Time = Field(..., description="epoch seconds")
    end: Time = Field(..., description="epoch seconds, after `start`")

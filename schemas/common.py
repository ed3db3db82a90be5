"""Shared wire types: resources, enums, the error body."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field


class Strict(BaseModel):
    """Base of every request model: unknown fields are refused, never silently dropped; so are
    infinities and NaN, which no scheduler arithmetic survives."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


STRICT_ITEM = ConfigDict(extra="forbid", allow_inf_nan=False)  # Strict's rules, for typed dicts


# Bounds on times (epoch or plan seconds) and durations: far beyond any real value, and small enough
# that every sum the schedulers make stays finite.
TIME_BOUND = 1e12
Time = Annotated[float, Field(ge=-TIME_BOUND, le=TIME_BOUND)]  # an instant, seconds


# Bounds on counts of things: physical maxima far beyond any real machine, small enough that the
# scheduler's int64 arrays hold any sum of them over every node a body can carry (2**21 nodes at most
# under the body limit: 2**21 * 2**32 MiB < 2**63).
MAX_CPU = 2**20  # cores per node
MAX_MEM_MIB = 2**32  # MiB per node (4 PiB)
MAX_GPU = 2**16  # gpus per node
MAX_NODES = 2**20  # nodes a job asks for, or a machine has
MAX_COUNT = 10_000_000  # jobs, reservations and the like counted in one pass
Cpu = Annotated[int, Field(ge=0, le=MAX_CPU, description="cpu cores")]
MemMib = Annotated[int, Field(ge=0, le=MAX_MEM_MIB, description="memory, MiB")]
Gpu = Annotated[int, Field(ge=0, le=MAX_GPU, description="gpus")]


# Names that reach the store's keys (tenants, cluster ids, plan ids): letters, digits, `.`, `_`, `-`,
# starting with a letter or digit. No separator (`:`), no glob character, no `%`: one tenant's key can
# never spell another tenant's, whatever either is called.
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"
NAME_RULE = "1 to 128 letters, digits, '.', '_' or '-', starting with a letter or digit"
Name = Annotated[str, Field(pattern=NAME_PATTERN, description=NAME_RULE)]


class Resources(Strict):
    cpu: Cpu = 0
    mem_mib: MemMib = 0
    gpu: Gpu = 0


class Capacity(Strict):
    cpu: int = Field(..., ge=1, le=MAX_CPU, description="cpu cores (at least 1)")
    mem_mib: MemMib = 0
    gpu: Gpu = 0


class NodeState(StrEnum):
    up = "up"
    down = "down"
    drain = "drain"


class StartKind(StrEnum):
    start = "start"
    backfill = "backfill"


class ReasonCode(StrEnum):
    """Why a pending job was neither started nor reserved."""

    resources = "resources"
    priority = "priority"
    blocked_by_reservation = "blocked_by_reservation"
    queue_overloaded = "queue_overloaded"
    never_fits = "never_fits"
    node_down = "node_down"
    not_evaluated = "not_evaluated"


class ErrorDetail(BaseModel):
    loc: list[str | int]
    msg: str
    type: str


class ErrorBody(BaseModel):
    detail: list[ErrorDetail]

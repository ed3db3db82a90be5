"""Shared wire types: resources, enums, the error body."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field


class Strict(BaseModel):
    """Base of every request model: unknown fields are refused, never silently dropped; so are
    infinities and NaN, which no scheduler arithmetic survives."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


# Bounds on times (epoch or plan seconds) and durations: far beyond any real value, and small enough
# that every sum the schedulers make stays finite.
TIME_BOUND = 1e12
Time = Annotated[float, Field(ge=-TIME_BOUND, le=TIME_BOUND)]  # an instant, seconds


class Resources(Strict):
    cpu: int = Field(0, ge=0, description="cpu cores")
    mem_mib: int = Field(0, ge=0, description="memory, MiB")
    gpu: int = Field(0, ge=0, description="gpus")


class Capacity(Strict):
    cpu: int = Field(..., ge=1, description="cpu cores (at least 1)")
    mem_mib: int = Field(0, ge=0, description="memory, MiB")
    gpu: int = Field(0, ge=0, description="gpus")


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

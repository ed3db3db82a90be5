"""The service's wire contract (pydantic v2). Importable alone: a Python client can reuse it."""

from schemas.cluster import NodeAllocIn, NodeIn, RunningJobIn, WindowIn
from schemas.common import (
    Capacity,
    ErrorBody,
    ErrorDetail,
    NodeState,
    ReasonCode,
    Resources,
    StartKind,
)
from schemas.policies import PolicySpec
from schemas.schedule import (
    MigrationOut,
    PendingJobIn,
    PendingOut,
    PriorityOut,
    ReservationOut,
    ScheduleRequest,
    ScheduleResponse,
    StartOut,
    SummaryOut,
)

__all__ = [
    "Capacity", "ErrorBody", "ErrorDetail", "MigrationOut", "NodeAllocIn", "NodeIn", "NodeState",
    "PendingJobIn", "PendingOut", "PolicySpec", "PriorityOut", "ReasonCode", "ReservationOut",
    "Resources", "RunningJobIn", "ScheduleRequest", "ScheduleResponse", "StartKind", "StartOut",
    "SummaryOut", "WindowIn",
]

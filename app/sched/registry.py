"""Policy name -> (params type, policy class). One line per policy."""

from __future__ import annotations

from collections.abc import Sequence

from app.sched.model import Decision, Job, Snapshot
from app.sched.params import CommonParams
from app.sched.policies.base import BasePolicy
from app.sched.policies.conservative import ConservativePolicy
from app.sched.policies.easy import EasyPolicy
from app.sched.policies.fcfs import FcfsPolicy
from app.sched.policies.firstfit import FirstfitPolicy
from app.sched.policies.memory_backfill import MemoryBackfillPolicy
from app.sched.policies.priority import PriorityPolicy

_CLASSES: tuple[type[BasePolicy], ...] = (
    FcfsPolicy, FirstfitPolicy, EasyPolicy, ConservativePolicy, MemoryBackfillPolicy,
    PriorityPolicy,
)
POLICIES: dict[str, tuple[type[CommonParams], type[BasePolicy]]] = {
    cls.NAME: (cls.Params, cls) for cls in _CLASSES  # type: ignore[attr-defined]
}


def decide(
    snapshot: Snapshot, pending: Sequence[Job], policy: str, params: CommonParams | None = None
) -> Decision:
    """The one scheduling function: every caller (HTTP, simulator, bench) goes through here."""
    params_type, policy_type = POLICIES[policy]
    return policy_type(params if params is not None else params_type()).decide(snapshot, pending)

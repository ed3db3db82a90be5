"""Policy choice on the wire: `{"name": ..., "params": {...}}`, one params model per policy.

Fields and defaults mirror app/sched/params.py (tests/test_params_mirror.py checks it).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from schemas.common import MAX_COUNT, Strict

UNLIMITED = 1_000_000
FIT_MAX = 1e6  # a fitted weight's bound: the score stays finite (no inf - inf)
_FIT = ("order=fitted: the weight of {} in the job's score; the lowest score runs first "
        "(fit_r·log10(r) + fit_n·log10(n) + fit_rn·log10(r)·log10(n) + fit_s·s/3600)")
SelectorName = Literal["first_fit", "least_load", "evaluation", "fragment"]


class MigrationParams(Strict):
    """Multi-queue load balancing: static threshold, or migration cost vs waiting cost."""

    mode: Literal["static", "dynamic"] = "static"
    threshold: float = Field(0.85, gt=0.0, lt=1.0, description="L_thres (static mode)")
    weight: float = Field(1.0, ge=0.0, description="w, weight of the migration cost (dynamic)")


class EvaluationParams(Strict):
    """Node evaluation E = W_cpu·(1−load)·ghz/ghz_min + W_ram·(1−ram_usage)·ram/ram_min."""

    cpu_weight: float = Field(0.6, ge=0.0)
    ram_weight: float = Field(0.4, ge=0.0)
    cpu_ghz_min: float = Field(1.0, gt=0.0)
    ram_min_mib: float = Field(1024.0, gt=0.0)


class CommonParams(Strict):
    selector: SelectorName = "first_fit"
    time_grain_s: int = Field(60, ge=1, le=86_400, description="starts are aligned to it")
    queue_depth: int = Field(100_000, ge=1, le=MAX_COUNT, description="jobs past it are not_evaluated")
    reservation_depth: int = Field(1, ge=0, le=MAX_COUNT, description="reservations per queue and pass")
    migration: MigrationParams | None = None
    evaluation: EvaluationParams = Field(default_factory=EvaluationParams)


class FcfsParams(CommonParams):
    pass


class FirstfitParams(CommonParams):
    starvation_s: float = Field(86_400.0, ge=0.0, description="wait after which it is reserved")
    reservation_depth: int = Field(UNLIMITED, ge=0, le=MAX_COUNT)


class EasyParams(CommonParams):
    pass


class ConservativeParams(CommonParams):
    reservation_depth: int = Field(UNLIMITED, ge=0, le=MAX_COUNT)


class MemoryBackfillParams(CommonParams):
    selector: SelectorName = "least_load"
    reservation_depth: int = Field(UNLIMITED, ge=0, le=MAX_COUNT)


class PriorityParams(CommonParams):
    selector: SelectorName = "evaluation"
    reservation_depth: int = Field(UNLIMITED, ge=0, le=MAX_COUNT)
    order: Literal["weighted", "fcfs", "sjf", "f1", "fitted"] = "weighted"
    backfill_order: Literal["priority", "sjf"] = Field(
        "priority",
        description="once a queue's reservations are made, try the jobs left to backfill in priority "
        "order or shortest estimate first (EASY-SJBF; with predicted run times, Tsafrir's EASY++)",
    )
    preset_weight: float = 1.0
    user_weight: float = Field(1.0, description="k1")
    queue_weight: float = Field(1.0, description="k2")
    age_weight: float = Field(1.0, description="k3, per minute of waiting")
    resource_evaluation: float | None = Field(
        1.0, gt=0.0, description="E; null = the best E among the job's eligible nodes"
    )
    max_priority: float = Field(55.0, description="P_max: reaching it gets a reservation")
    reserve_after_wait_s: float = Field(86_400.0, ge=0.0)
    wait_cap_s: float | None = Field(
        None, ge=0.0, allow_inf_nan=False,
        description="aging: a job that has waited at least this many seconds ranks ahead of every job "
        "that has not, first come first served among them (VIP jobs still first); null = no aging",
    )
    reserve_xfactor: float | None = Field(
        None, ge=1.0, le=1e6, allow_inf_nan=False,
        description="selective reservation (Srinivasan et al. 2002): a blocked job takes a reservation only "
        "once its expansion factor (wait + walltime) / walltime reaches this; null = as the order says",
    )
    fit_r: float = Field(1.0, ge=-FIT_MAX, le=FIT_MAX, allow_inf_nan=False,
                         description=_FIT.format("log10(r), r the walltime in s"))
    fit_n: float = Field(0.0, ge=-FIT_MAX, le=FIT_MAX, allow_inf_nan=False,
                         description=_FIT.format("log10(n), n the cores"))
    fit_rn: float = Field(0.0, ge=-FIT_MAX, le=FIT_MAX, allow_inf_nan=False,
                          description=_FIT.format("log10(r)·log10(n)"))
    fit_s: float = Field(0.0, ge=-FIT_MAX, le=FIT_MAX, allow_inf_nan=False,
                         description=_FIT.format("s/3600, s the submit time in s: hours of aging"))


class FcfsPolicy(Strict):
    name: Literal["fcfs"]
    params: FcfsParams = Field(default_factory=FcfsParams)


class FirstfitPolicy(Strict):
    name: Literal["firstfit"]
    params: FirstfitParams = Field(default_factory=FirstfitParams)


class EasyPolicy(Strict):
    name: Literal["easy"] = "easy"
    params: EasyParams = Field(default_factory=EasyParams)


class ConservativePolicy(Strict):
    name: Literal["conservative"]
    params: ConservativeParams = Field(default_factory=ConservativeParams)


class MemoryBackfillPolicy(Strict):
    name: Literal["memory_backfill"]
    params: MemoryBackfillParams = Field(default_factory=MemoryBackfillParams)


class PriorityPolicy(Strict):
    name: Literal["priority"]
    params: PriorityParams = Field(default_factory=PriorityParams)


PolicySpec = Annotated[
    FcfsPolicy | FirstfitPolicy | EasyPolicy | ConservativePolicy | MemoryBackfillPolicy
    | PriorityPolicy,
    Field(discriminator="name"),
]

"""Parameters of every policy, as the core sees them (the wire mirrors them in schemas/policies.py).

Defaults are the ones that work without tuning; `tests/test_params_mirror.py` checks that the wire
models carry the same fields with the same defaults.
"""

from __future__ import annotations

from dataclasses import dataclass, field

UNLIMITED = 1_000_000


@dataclass(frozen=True, slots=True)
class MigrationParams:
    """Multi-queue load balancing (docs/methods.md §2)."""

    mode: str = "static"  # "static" threshold or "dynamic" (migration cost vs waiting cost)
    threshold: float = 0.85  # L_thres: a queue above it takes no new jobs (static mode)
    weight: float = 1.0  # w: weight of the migration cost (dynamic mode)


@dataclass(frozen=True, slots=True)
class EvaluationParams:
    """Node evaluation E (docs/methods.md §4)."""

    cpu_weight: float = 0.6
    ram_weight: float = 0.4
    cpu_ghz_min: float = 1.0
    ram_min_mib: float = 1024.0


@dataclass(frozen=True, slots=True)
class CommonParams:
    selector: str = "first_fit"  # first_fit | least_load | evaluation | fragment
    time_grain_s: int = 60  # estimated and reserved starts are aligned to this grain
    queue_depth: int = 100_000  # jobs past this rank are reported not_evaluated
    reservation_depth: int = 1  # reservations per queue in one pass
    migration: MigrationParams | None = None
    evaluation: EvaluationParams = field(default_factory=EvaluationParams)


@dataclass(frozen=True, slots=True)
class FcfsParams(CommonParams):
    pass


@dataclass(frozen=True, slots=True)
class FirstfitParams(CommonParams):
    starvation_s: float = 86_400.0  # a job waiting longer gets its resources reserved from now on
    reservation_depth: int = UNLIMITED


@dataclass(frozen=True, slots=True)
class EasyParams(CommonParams):
    pass


@dataclass(frozen=True, slots=True)
class ConservativeParams(CommonParams):
    reservation_depth: int = UNLIMITED


@dataclass(frozen=True, slots=True)
class MemoryBackfillParams(CommonParams):
    selector: str = "least_load"
    reservation_depth: int = UNLIMITED


@dataclass(frozen=True, slots=True)
class PriorityParams(CommonParams):
    """Seeds 001/002: P = min(Y·w_preset + k1·p_user + k2·p_queue + k3·t_wait(min)·E, P_max)."""

    selector: str = "evaluation"
    reservation_depth: int = UNLIMITED
    order: str = "weighted"  # weighted | fcfs | sjf | f1 | fitted
    backfill_order: str = "priority"  # priority | sjf: the order of the jobs left to backfill
    preset_weight: float = 1.0
    user_weight: float = 1.0  # k1
    queue_weight: float = 1.0  # k2
    age_weight: float = 1.0  # k3, per minute of waiting
    resource_evaluation: float | None = 1.0  # E; None: the best E among the job's eligible nodes
    max_priority: float = 55.0  # P_max: a job reaching it gets a reservation
    reserve_after_wait_s: float = 86_400.0  # a job waiting longer gets a reservation too
    wait_cap_s: float | None = None  # aging: a job waiting this long ranks first (fcfs among them)
    # selective reservation (Srinivasan et al. 2002): a blocked job reserves only once its expansion
    # factor (wait + told) / told reaches this (`order.expansion_factor`); None: as the order says
    reserve_xfactor: float | None = None
    # order=fitted (docs/methods.md §3): the lowest fit_r·log10(r) + fit_n·log10(n)
    # + fit_rn·log10(r)·log10(n) + fit_s·s/3600 runs first (r told time, n cores, s submit time)
    fit_r: float = 1.0
    fit_n: float = 0.0
    fit_rn: float = 0.0
    fit_s: float = 0.0

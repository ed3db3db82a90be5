"""Queue orders: who goes first, and the priority breakdown reported for every job (like `sprio`).

Migrated jobs always rank below jobs submitted to their queue directly (docs/methods.md §2).
Ties are broken by submit time, then by job id, so the order never depends on input order.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from app.sched.model import Job, PriorityInfo
from app.sched.params import PriorityParams

VIP_PRIORITY = 1e12  # P_vip: above any weighted priority


@dataclass(slots=True)  # not frozen: made per job at every decision (see model.Pending)
class Scored:
    job: Job
    priority: float
    factors: dict[str, float]
    aged: bool = False  # past the wait cap (`aged`): ranks ahead of every job that is not


def age_s(job: Job, now: float) -> float:
    return max(0.0, now - job.submit_time)


def expansion_factor(job: Job, now: float) -> float:
    """(wait + told time) / told time: how much longer than its run the job will have taken if it
    started now (selective reservation, Srinivasan et al. 2002; the compiled replay's `_may_reserve`
    computes it operation for operation)."""
    return (now - job.submit_time + job.walltime_s) / max(job.walltime_s, 1.0)


def fcfs_scores(jobs: Sequence[Job], now: float) -> list[Scored]:
    """First come, first served: each job's priority is its wait so far, in seconds. One loop for
    all (no call per job): the default order scores every pending job at every decision."""
    out = []
    for job in jobs:
        wait = now - job.submit_time
        if wait < 0.0:
            wait = 0.0
        out.append(Scored(job, wait, {"age_s": wait}))
    return out


def each(score: ScoreFn) -> ScoreAll:
    """Score a list of jobs one by one."""
    def score_all(jobs: Sequence[Job], now: float) -> list[Scored]:
        return [score(job, now) for job in jobs]
    return score_all


def weighted_score(job: Job, now: float, p: PriorityParams, e: float) -> Scored:
    """Seeds 001/002: P = min(w·Y + k1·p_user + k2·p_queue + k3·t_wait(min)·E, P_max); VIP first."""
    factors = {
        "preset": p.preset_weight * job.priority,
        "user": p.user_weight * job.user_priority,
        "queue": p.queue_weight * job.queue_priority,
        "age": p.age_weight * age_s(job, now) / 60.0 * e,
        "evaluation": e,
    }
    raw = factors["preset"] + factors["user"] + factors["queue"] + factors["age"]
    factors["capped"] = 1.0 if raw >= p.max_priority else 0.0
    if job.vip:
        factors["vip"] = 1.0
        return Scored(job, VIP_PRIORITY, factors)
    return Scored(job, min(raw, p.max_priority), factors)


def sjf_score(job: Job, now: float) -> Scored:
    """Shortest (estimated) job first: the priority is minus the walltime estimate."""
    return Scored(job, -job.walltime_s, {"walltime_s": job.walltime_s, "age_s": age_s(job, now)})


def f1_score(job: Job, now: float) -> Scored:
    """F1 of Carastan-Neto et al. (2017): the lowest log10(r)·n + 870·log10(s) runs first.

    r = walltime estimate (s), n = cores requested, s = submit time in seconds as the trace counts
    it (the simulator's clock starts at 0, as in the paper); the priority reported is minus F1.
    """
    cores = job.nodes * job.cpu
    score = math.log10(max(job.walltime_s, 1.0)) * cores + 870.0 * math.log10(
        max(job.submit_time, 1.0)
    )
    return Scored(job, -score, {"f1_score": score, "cores": float(cores)})


def fitted_score(job: Job, p: PriorityParams) -> Scored:
    """The fitted order (docs/methods.md §3): the lowest
    S = fit_r·log10(r) + fit_n·log10(n) + fit_rn·log10(r)·log10(n) + fit_s·s/3600 runs first, with
    r the walltime estimate (s, at least 1), n the cores requested (at least 1) and s the submit time
    (s). Every term is fixed when the job arrives, so its rank never moves; a positive fit_s makes an
    earlier submission worth fit_s per hour (aging). The priority reported is minus S, the factors
    are the four terms and S (`app.sim.compiled._key` computes S operation for operation)."""
    lr = math.log10(max(job.walltime_s, 1.0))
    ln = math.log10(max(job.nodes * job.cpu, 1))
    terms = {"fit_r_term": p.fit_r * lr, "fit_n_term": p.fit_n * ln, "fit_rn_term": p.fit_rn * lr * ln,
             "fit_s_term": p.fit_s * (job.submit_time / 3600.0)}
    score = terms["fit_r_term"] + terms["fit_n_term"] + terms["fit_rn_term"] + terms["fit_s_term"]
    return Scored(job, -score, {**terms, "fitted_score": score})


def aged(inner: ScoreAll, cap_s: float) -> ScoreAll:
    """The aging term (docs/methods.md §3): a job that has waited at least `cap_s` seconds ranks ahead
    of every job that has not, whatever the order's own priority, and the aged jobs rank among
    themselves first come, first served (`rank_key`). Its reported priority stays the order's own;
    the factors say `aged` (1 or 0), its wait `age_s` and the cap `wait_cap_s`. A job's rank moves
    with time (it jumps ahead once it has waited the cap): the order is not standing."""
    def score_all(jobs: Sequence[Job], now: float) -> list[Scored]:
        out = inner(jobs, now)
        for s in out:
            wait = max(0.0, now - s.job.submit_time)
            s.aged = wait >= cap_s
            s.factors["age_s"] = wait
            s.factors["wait_cap_s"] = cap_s
            s.factors["aged"] = 1.0 if s.aged else 0.0
        return out
    return score_all


def rank_key(s: Scored) -> tuple[bool, float, float, str]:
    """Natives before migrated jobs; then aged jobs (`aged`), by submit time; then highest priority;
    then submit time, then id."""
    return (s.job.migrated, -math.inf if s.aged else -s.priority, s.job.submit_time, s.job.id)


def rank(scored: Sequence[Scored]) -> list[Scored]:
    """Highest priority first; natives before migrated jobs; then submit time, then id."""
    return sorted(scored, key=rank_key)


def priority_infos(ranked: Sequence[Scored]) -> tuple[PriorityInfo, ...]:
    return tuple([
        PriorityInfo(s.job.id, s.priority, i + 1, s.factors) for i, s in enumerate(ranked)
    ])


ScoreFn = Callable[[Job, float], Scored]
ScoreAll = Callable[[Sequence[Job], float], list[Scored]]

"""What every policy shares: build the index, balance queues, order, run one backfill pass, report.

A policy says three things: how jobs are scored (`scorer`), which pass rules apply (`rules`), and its
params type. Everything pass-local is created inside `decide` and dropped after.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from app.errors import InputError
from app.sched.budget import Budget, BudgetHit
from app.sched.cluster import ClusterIndex
from app.sched.core import CorePass, PassResult, PassRules
from app.sched.migration import Balanced, balance, queue_loads
from app.sched.model import Decision, Job, Pending, Reason, Snapshot, StartKind, Summary
from app.sched.order import ScoreAll, Scored, fcfs_scores, priority_infos, rank, rank_key
from app.sched.params import CommonParams
from app.sched.selectors import SELECTORS, NodeView
from app.sched.timeline import Profile, Releases, align_up, release_times


class BasePolicy:
    NAME = ""

    def __init__(self, params: CommonParams) -> None:
        if params.selector not in SELECTORS:
            raise InputError.single(
                ("policy", "params", "selector"),
                f"unknown selector {params.selector!r}; one of {sorted(SELECTORS)}",
            )
        self.params = params
        self.selector = SELECTORS[params.selector]()

    # --- what a policy overrides --------------------------------------------------------------
    def rules(self, now: float, ranked: Sequence[Scored]) -> PassRules:
        """How the pass treats blocked jobs; `ranked`: the jobs in order, with their priorities."""
        return PassRules(reservation_depth=self.params.reservation_depth)

    def scorer(self, cluster: ClusterIndex, view: NodeView) -> ScoreAll:
        """How this decision scores the pending jobs (one call for all: see `fcfs_scores`)."""
        return fcfs_scores

    def standing_key(self) -> StandingKey | None:
        """For a caller deciding many times (the replay's `app.sim.shortlist`): a job's place in
        this policy's order as a key that stays right at every later decision, when (1) the rank
        of a job among those submitted by then moves neither with time nor with the cluster, and
        (2) the pass answers every job that lacks free room, past the first `reservation_depth`
        of them that could ever fit, with a plain wait that changes nothing for the other jobs
        (no promise held for it, no reservation refused for want of a node). None otherwise, and
        by default: a policy says so itself (a new order or rule must not inherit a shortlist it
        breaks)."""
        return None

    # --- the shared skeleton -------------------------------------------------------------------
    def decide(self, snapshot: Snapshot, pending: Sequence[Job], budget: Budget | None = None) -> Decision:
        budget = budget if budget is not None else Budget()
        now, grain = snapshot.now, self.params.time_grain_s
        cluster = ClusterIndex(snapshot)
        balanced = self._balance(cluster, snapshot, pending)
        profile = Profile(cluster.free_now(), _releases(cluster, now, grain), now, grain)
        if cluster.windows_ahead:
            _block_windows(cluster, profile, grain)
        view = NodeView(cluster, profile, self.params.evaluation)
        ranked = rank(self.scorer(cluster, view)(balanced.jobs, now))
        depth = self.params.queue_depth
        result = CorePass(
            cluster, profile, self.params.selector, self.params.evaluation,
            self.rules(now, ranked), balanced.overloaded, budget
        ).run([s.job for s in ranked[:depth]])
        skipped = [
            Pending(s.job.id, s.job.queue, Reason.not_evaluated, None,
                    f"rank {depth + i + 1} is past the queue depth {depth} of this pass")
            for i, s in enumerate(ranked[depth:])
        ]
        if skipped and budget.hit is None:
            budget.hit = BudgetHit.depth  # the answer says why these were not looked at
        return _decision(cluster, result, skipped, balanced, ranked, budget)

    def _balance(self, cluster: ClusterIndex, snapshot: Snapshot, pending: Sequence[Job]) -> Balanced:
        mig = self.params.migration
        if mig is None:
            return Balanced(list(pending), [], frozenset())
        return balance(cluster, pending, snapshot.running, snapshot.now,
                       self.params.time_grain_s, mig)


StandingKey = Callable[[Job], tuple[bool, float, float, str]]


def standing(score_all: ScoreAll) -> StandingKey:
    """The rank key of a job scored alone; right for ranking jobs scored at any later decision when
    `score_all` gives every submitted job a priority that keeps its order with time (fcfs: the
    wait; sjf, f1: no time at all). fcfs scores a job at its submit time as 0; its order by
    (submit time, id) is `rank`'s at any later time (waits keep the submit order)."""
    def key(job: Job) -> tuple[bool, float, float, str]:
        return rank_key(score_all([job], job.submit_time)[0])
    return key


def _releases(cluster: ClusterIndex, now: float, grain: int) -> Releases:
    """Every running job's per-node holding, released at its (grain-aligned) expected end; so is
    a maintenance window in progress (what it holds: the whole node)."""
    xs, ends, amounts = cluster.held
    if cluster.window_now is not None:
        wx, wends, wamounts = cluster.window_now
        xs, ends = np.concatenate((xs, wx)), np.concatenate((ends, wends))
        amounts = np.concatenate((amounts, wamounts), axis=1)
    return xs, release_times(ends, now, grain), amounts


def _block_windows(cluster: ClusterIndex, profile: Profile, grain: int) -> None:
    """Each later maintenance window takes its nodes' whole capacity, from its start (down to the
    grain) to its end (up to the grain): no start, backfill or reservation runs into it."""
    for nodes, start, end in cluster.windows_ahead:
        t0 = max(profile.now, math.floor(start / grain) * grain)
        profile.block(nodes, float(t0), align_up(end, grain), cluster.cap[:, nodes])


def _decision(
    cluster: ClusterIndex, result: PassResult, skipped: list[Pending], balanced: Balanced,
    ranked: list[Scored], budget: Budget,
) -> Decision:
    pending = result.pending + skipped
    past_budget = sum(1 for p in result.pending if p.reason == Reason.not_evaluated)
    backfilled = sum(1 for s in result.starts if s.kind == StartKind.BACKFILL)
    summary = Summary(
        started=len(result.starts) - backfilled,
        backfilled=backfilled,
        reserved=len(result.reservations),
        migrated=len(balanced.migrations),
        pending=len(pending),
        not_evaluated=len(skipped) + past_budget,
        nodes_total=cluster.nodes_total,
        nodes_examined=cluster.examined(result.examined),
        queue_load=queue_loads(cluster),
        budget_hit=budget.hit,
        jobs_considered=budget.considered,
    )
    return Decision(
        starts=tuple(result.starts),
        reservations=tuple(result.reservations),
        migrations=tuple(balanced.migrations),
        pending=tuple(pending),
        priorities=priority_infos(ranked),
        summary=summary,
    )

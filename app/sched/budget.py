"""How much work one decision may do: a time budget per pass and a cap on the jobs it looks at
(Slurm's `bf_max_time` and `bf_max_job_test`), and a way to stop early (shutdown, client gone).

The core reads no clock of its own: the caller hands it one (`clock`, monotonic seconds) with a
deadline on that clock, so a test drives a decision with a fake clock and gets the same answer
every time. Past the budget, the jobs not looked at are reported `not_evaluated`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from app.sched.model import Decision, Job, Pending, Reason, Snapshot, Summary

INF = float("inf")


class BudgetHit(StrEnum):
    """Which limit ended a pass early."""

    time = "time"  # the clock passed the deadline
    max_jobs = "max_jobs"  # the pass looked at as many jobs as it may (the service's or the request's cap)
    depth = "depth"  # the policy's queue_depth left the jobs ranked below it out of the pass
    stopped = "stopped"  # the caller asked it to stop (the service shutting down, the client gone)


def _never() -> bool:
    return False


def _no_clock() -> float:
    return 0.0


@dataclass(slots=True)
class Budget:
    """Limits of one decision; `check()` is called once before each job the pass looks at."""

    clock: Callable[[], float] = _no_clock
    deadline: float = INF  # on `clock`'s scale
    max_jobs: int | None = None  # None: no cap
    stop: Callable[[], bool] = _never
    time_s: float | None = None  # the time budget the deadline was set from, for the report
    considered: int = 0
    hit: BudgetHit | None = field(default=None)

    @classmethod
    def starting_now(cls, clock: Callable[[], float], time_s: float | None,
                     max_jobs: int | None = None, stop: Callable[[], bool] = _never) -> Budget:
        """A budget of `time_s` seconds from the clock's current reading (None: no time limit)."""
        deadline = INF if time_s is None else clock() + time_s
        return cls(clock, deadline, max_jobs, stop, time_s)

    def limited(self) -> bool:
        """Whether anything may end the pass early: a job cap, a deadline or a stop flag."""
        return self.max_jobs is not None or self.deadline != INF or self.stop is not _never

    def keep_for_answer(self, seconds: float) -> None:
        """End the pass `seconds` earlier, so writing the answer fits the budget too (at most half
        of the time budget is kept back: the pass always has the other half)."""
        if self.deadline != INF and self.time_s is not None:
            self.deadline -= min(max(seconds, 0.0), self.time_s / 2)

    def check(self) -> BudgetHit | None:
        """None while the pass may look at one more job (counting it); else the limit it hit."""
        if self.hit is None:
            if self.max_jobs is not None and self.considered >= self.max_jobs:
                self.hit = BudgetHit.max_jobs
            elif self.stop():
                self.hit = BudgetHit.stopped
            elif self.deadline != INF and self.clock() >= self.deadline:
                self.hit = BudgetHit.time
            else:
                self.considered += 1
        return self.hit

    def grant(self, jobs: int) -> int:
        """How many of `jobs` the pass may answer in one step (counting them): as many `check()`
        calls would let it look at, except that the clock and the stop flag are read once for
        all of them (answering them takes microseconds each)."""
        if self.hit is not None or jobs <= 0:
            return 0
        if self.max_jobs is not None and self.considered + jobs > self.max_jobs:
            jobs = max(self.max_jobs - self.considered, 0)
        if self.stop():
            self.hit = BudgetHit.stopped
            return 0
        if self.deadline != INF and self.clock() >= self.deadline:
            self.hit = BudgetHit.time
            return 0
        self.considered += jobs
        return jobs

    def spent(self) -> bool:
        """Whether the time is up or a stop was asked for already (before the pass looks at any job)."""
        if self.hit is None:
            if self.stop():
                self.hit = BudgetHit.stopped
            elif self.deadline != INF and self.clock() >= self.deadline:
                self.hit = BudgetHit.time
        return self.hit is not None

    def detail(self) -> str:
        """Why a job past the budget was not looked at."""
        if self.hit == BudgetHit.max_jobs:
            return f"past the budget of {self.max_jobs} jobs this pass may look at"
        if self.hit == BudgetHit.time:
            within = f" of {self.time_s:g} s" if self.time_s is not None else ""
            return f"past the time budget{within} of this decision"
        return "the decision was stopped early (the service is shutting down or the client left)"



def unevaluated(snapshot: Snapshot, pending: Sequence[Job], budget: Budget) -> Decision:
    """The answer when the budget was spent before the pass began (parsing and checking a very deep
    queue can take it all): every job `not_evaluated`, in the order given, and nothing ranked, scored
    or balanced (`priorities` and `queue_load` empty), which would cost seconds more at 10^5 jobs."""
    detail = budget.detail()
    waiting = tuple([Pending(j.id, j.queue, Reason.not_evaluated, None, detail) for j in pending])
    total = snapshot.whole.nodes if snapshot.whole is not None else len(snapshot.nodes)
    summary = Summary(started=0, backfilled=0, reserved=0, migrated=0, pending=len(waiting),
                      not_evaluated=len(waiting), nodes_total=total, nodes_examined=0, queue_load={},
                      budget_hit=budget.hit, jobs_considered=0)
    return Decision((), (), (), waiting, (), summary)

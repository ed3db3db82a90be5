"""Instants whose decision is known without asking: arrivals behind a settled queue.

After the replay applied a decision at t0, suppose that until t1 only jobs arrived (no job ended, no
told run time ran out) and none of the new jobs finds enough free nodes at t1. Then, under the rules
below, the pass at t1 starts nothing and records no new reservation, so the replay need not ask:

- the order is fcfs (`easy`, `fcfs`, or `priority` with order=fcfs) with one reservation: the new
  jobs were submitted after t0, so they rank behind every job that waited at t0, and the head (the
  first of those) keeps the reservation it was given at t0, whose start is a multiple of the grain
  counted from epoch 0 and depends only on the running jobs (t0's starts were admitted because they
  do not delay it);
- each job that waited at t0 failed there either for want of free nodes (free nodes only shrank
  since: t0's starts took some, nothing ended) or because it would delay the head's reservation
  (it would end later now, and with one-core nodes the head's reservation holds every free node);
- a new job cannot start: it finds too few free nodes (the condition);
- no time-dependent input: run times are not predicted and no job runs past what it is told (a told
  time running out changes what the pass sees, and an overrunning job's nodes are expected free at
  the next grain, a time that moves with the instant asked), the machine is one partition without
  balancing, of one-core nodes without memory (the node evaluation and fragment selectors read loads
  that t0's starts changed: first_fit only).
At least one job that waited at t0 must still wait: otherwise a new job would become the head and be
given its first reservation, which the replay records. Exactness is tested against full replays.
"""

from __future__ import annotations

import numpy as np

from app.sched.params import CommonParams, PriorityParams
from app.sim.workload import SimJob, Workload


def applies(w: Workload, policy: str, params: CommonParams | None, predict: bool) -> bool:
    """Whether the rule above holds for this replay."""
    m = w.machine
    if predict or m.queues or m.cores_per_node != 1 or m.mem_mib_per_node or params is None:
        return False
    if any(j.run > j.estimate for j in w.jobs):
        return False
    if params.migration is not None or params.selector != "first_fit" or params.reservation_depth != 1:
        return False
    if policy in ("easy", "fcfs"):
        return True
    return (policy == "priority" and isinstance(params, PriorityParams) and params.order == "fcfs"
            and params.wait_cap_s is None  # (a wait cap moves ranks with time: not a settled order,
            and params.reserve_xfactor is None)  # nor who may reserve under selective reservation)


class Settled:
    """What the replay saw since its last decision: whether anything but arrivals happened, and the
    jobs that arrived."""

    def __init__(self, on: bool) -> None:
        self.on = on
        self.settled = False  # a decision was applied and nothing but arrivals happened since
        self.fresh: list[SimJob] = []  # jobs that arrived since the last decision
        self.skipped = 0

    def decided(self) -> None:
        self.settled, self.fresh = True, []

    def changed(self) -> None:
        """A job ended or a told time ran out: the next instant is asked."""
        self.settled = False

    def arrived(self, j: SimJob) -> None:
        if self.on:
            self.fresh.append(j)

    def unchanged(self, free: np.ndarray, pending: int) -> bool:
        """True when the decision now is known to start nothing and reserve nothing new.
        `free`: free cores per node (one-core nodes); `pending`: jobs waiting now."""
        if not (self.on and self.settled) or pending <= len(self.fresh):
            return False
        idle = int(np.count_nonzero(free >= 1))
        if any(j.nodes <= idle for j in self.fresh):
            return False
        self.skipped += 1
        return True

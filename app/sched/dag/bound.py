"""A lower bound on the makespan of any valid plan: once a plan reaches it, nothing can be gained.

In any plan, a pending task v placed on group R starts no earlier than a slot of R is free, nor
before each input has arrived there; it then runs for its cost on R. An input from a task u whose
group is fixed (running or done) arrives at the earliest at u's finish plus the transfer from that
group to R; from a pending task, at the earliest at u's earliest finish plus the cheapest latency and
per-byte time of any link into R (a group's link to itself included). Taking, in topological order,
the group where these optimistic times make v finish first gives each task a finish no plan beats;
the bound is the latest of them and of the running tasks' expected ends. Every value is an actual
start or transfer computed as a plan computes it, so a plan whose tasks all make the optimistic choices
(a chain on the one fastest group) reaches the bound exactly.

That bound ignores that tasks compete for slots, so on a wide DAG it is far below any plan. A second
one counts the work: call w(v) a pending task's least cost over the groups, and α(R) the least ratio
C(v, R) / w(v) over the pending tasks R can run (R runs none of them faster than α(R) times their
best). By the makespan M a slot of R free from f has M − f seconds, in which it does at most
(M − f) / α(R) of that work; M is at least the first time the slots together could have done all of
it. The bound is the larger of the two.
"""

from __future__ import annotations

import numpy as np

from app.sched.dag import list_kernel
from app.sched.dag.graph import Compiled
from app.sched.dag.model import TaskStatus
from app.sched.dag.state import PlanState

TOLERANCE = 1e-9  # relative: a makespan within this of the bound is taken as reaching it


def lower_bound(c: Compiled) -> float:
    """No plan of `c` has a makespan (latest finish of the running and pending tasks − now) below this."""
    state = PlanState(c)
    return max(_path_bound(c, state), _work_bound(c, state))


def _path_bound(c: Compiled, state: PlanState) -> float:
    now = state.now
    free = np.array([min(lane.tail for lane in lanes) if lanes else np.inf for lanes in state.lanes])
    lat_in, per_byte_in = c.lat.min(axis=0), c.inv_bw.min(axis=0)  # cheapest way into each group
    finish = state.finish.copy()  # fixed tasks' finishes; NaN for the pending ones until reached
    fixed = state.group_of >= 0
    latest = max((p.finish for p in state.placements if p is not None and p.status == TaskStatus.RUNNING),
                 default=now)
    # tasks with no input need only a free slot: all at once
    first = np.array([v for v in range(c.n_tasks) if not fixed[v] and not c.preds[v]], dtype=np.int64)
    finish[first] = (np.maximum(free, now) + c.cost[first]).min(axis=1)
    latest = max(latest, float(finish[first].max(initial=now)))
    if list_kernel.COMPILED:
        args = (*list_kernel.graph_arrays(c)[:3], finish, state.group_of, c.lat, c.inv_bw, lat_in,
                per_byte_in, free, c.cost, float(now), float(latest))
        latest = list_kernel.path_bound(np.array(c.topo, dtype=np.int64), fixed, *args)
    else:
        latest = _path_loop(c, state, finish, fixed, lat_in, per_byte_in, free, latest)
    return float(latest - now) if np.isfinite(latest) else 0.0  # (a task no group runs: no bound)


def _path_loop(c: Compiled, state: PlanState, finish: np.ndarray, fixed: np.ndarray, lat_in: np.ndarray,
               per_byte_in: np.ndarray, free: np.ndarray, latest: float) -> float:
    """Each pending task with inputs, in topological order: its earliest finish (into `finish`);
    the latest of them and `latest`. (`list_kernel.path_bound` is the same loop compiled.)"""
    now = state.now
    for v in c.topo:
        if fixed[v] or not c.preds[v]:
            continue
        arrive = np.full(c.n_groups, now)
        for u, data in c.preds[v]:
            if fixed[u]:
                g = state.group_of[u]
                np.maximum(arrive, finish[u] + c.lat[g] + data * c.inv_bw[g], out=arrive)
            else:
                np.maximum(arrive, finish[u] + lat_in + data * per_byte_in, out=arrive)
        finish[v] = float((np.maximum(arrive, free) + c.cost[v]).min())
        latest = max(latest, finish[v])
    return latest


def _work_bound(c: Compiled, state: PlanState) -> float:
    pending = state.group_of < 0
    cost = c.cost[pending]
    least = cost.min(axis=1, initial=np.inf)
    work = float(least[np.isfinite(least)].sum())
    if work <= 0:
        return 0.0
    some = np.isfinite(least) & (least > 0)
    with np.errstate(invalid="ignore"):  # inf / inf where a group cannot run a task: not a ratio
        ratio = np.where(np.isfinite(cost[some]), cost[some] / least[some, None], np.inf)
    alpha = ratio.min(axis=0, initial=np.inf)  # per group; inf: it runs none of these tasks
    tails, rates = [], []
    for r, lanes in enumerate(state.lanes):
        if np.isfinite(alpha[r]):
            tails += [lane.tail for lane in lanes]
            rates += [1.0 / alpha[r]] * len(lanes)
    done = _first_time_done(work, np.array(tails), np.array(rates))
    return done - state.now if np.isfinite(done) else 0.0  # (no slot runs them: no bound)


def _first_time_done(work: float, tails: np.ndarray, rates: np.ndarray) -> float:
    """The least M with sum(rates × max(0, M − tails)) >= work (inf if no slot works)."""
    order = np.argsort(tails, kind="stable")
    tails, rates = tails[order], rates[order]
    rate = done_by = 0.0  # slots started so far: summed rate, and sum of rate × tail
    for k in range(len(tails)):
        rate += rates[k]
        done_by += rates[k] * tails[k]
        m = (work + done_by) / rate  # when the slots up to k would finish it
        if k + 1 == len(tails) or m <= tails[k + 1]:
            return float(m)
    return float("inf")


def reaches(makespan: float, bound: float | None) -> bool:
    """Whether a plan of this makespan is as short as any can be (to rounding)."""
    return bound is not None and makespan <= bound + TOLERANCE * max(1.0, abs(bound))

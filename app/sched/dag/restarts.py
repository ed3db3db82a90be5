"""More list plans for `best`: HEFT's placement under other task priorities, then under seeded
random perturbations of the upward rank, until a time budget or a number of plans is spent.

Named priorities: the upward rank with the mean transfer over every pair of groups, each group with
itself included (`heft-every-pair`, saga's reading of HEFT); with each task's fastest (`heft-min`),
slowest (`heft-max`) or median cost (`heft-median`) in place of the mean; CPOP's upward + downward
rank (`heft-cpop`). Then `heft-noise-k`: the upward rank times a seeded lognormal factor per task
(σ growing from 0.05 to 0.3). All go through `list_schedule`, so every plan is valid whatever the priority.
Given a `patience`, the variants stop once they stop gaining (`search.stalled`, counted in plans).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from app.sched.dag import list_kernel
from app.sched.dag.best import makespan
from app.sched.dag.bound import reaches
from app.sched.dag.graph import Compiled
from app.sched.dag.heft import list_schedule, mean_transfer, upward_rank
from app.sched.dag.model import Plan
from app.sched.dag.search import stalled


def _finite(c: Compiled, stat: Callable[[np.ndarray], float]) -> np.ndarray:
    """Per task, `stat` (np.min, np.max or np.median) of its finite costs; 0 where it has none. The
    same numbers as applying `stat` row by row (tests/dag/test_list_kernel.py), without the loop."""
    finite = np.isfinite(c.cost)
    ordered = np.sort(np.where(finite, c.cost, np.inf), axis=1)  # the finite costs first, ascending
    k = finite.sum(axis=1)
    rows = np.arange(c.n_tasks)
    if stat is np.min:
        out = ordered[:, 0]
    elif stat is np.max:
        out = ordered[rows, np.maximum(k - 1, 0)]
    else:  # the median: the middle cost, or the mean of the middle two, as np.median computes it
        lo, hi = ordered[rows, np.maximum((k - 1) // 2, 0)], ordered[rows, np.maximum(k // 2, 0)]
        out = np.where(k % 2 == 1, lo, (lo + hi) / 2)
    return np.where(k > 0, out, 0.0)


def rank_with(c: Compiled, work: np.ndarray, every_pair: bool = False) -> np.ndarray:
    """Upward rank with `work` as each task's cost; `every_pair`: the mean transfer over every pair
    of groups, a group with itself included (as saga's HEFT ranks), not only distinct ones."""
    lat, per_byte = _every_pair(c) if every_pair else mean_transfer(c)
    if list_kernel.COMPILED:
        return list_kernel.upward(np.ascontiguousarray(work, dtype=float), lat, per_byte,
                                  *list_kernel.topo_succs(c))
    rank = work.astype(float)
    for u in reversed(c.topo):
        if c.succs[u]:
            rank[u] = work[u] + max(lat + data * per_byte + rank[v] for v, data in c.succs[u])
    return rank


def _every_pair(c: Compiled) -> tuple[float, float]:
    """Mean latency and seconds per byte over the unordered pairs of groups, each group with itself too."""
    upper = np.triu_indices(c.n_groups)
    return float(c.lat[upper].mean()), float(c.inv_bw[upper].mean())


def downward_rank(c: Compiled) -> np.ndarray:
    lat, per_byte = mean_transfer(c)
    rank = np.zeros(c.n_tasks)
    for v in c.topo:
        if c.preds[v]:
            rank[v] = max(rank[u] + c.mean_cost[u] + lat + data * per_byte for u, data in c.preds[v])
    return rank


def named_priorities(c: Compiled) -> list[tuple[str, Callable[[], np.ndarray]]]:
    """The named priorities, each computed when it is tried."""
    return [
        ("heft-every-pair", lambda: rank_with(c, c.mean_cost, every_pair=True)),
        ("heft-min", lambda: rank_with(c, _finite(c, np.min))),
        ("heft-max", lambda: rank_with(c, _finite(c, np.max))),
        ("heft-median", lambda: rank_with(c, _finite(c, np.median))),
        ("heft-cpop", lambda: upward_rank(c) + downward_rank(c)),
    ]


def restart(c: Compiled, plan: Plan, budget_s: float, max_plans: int | None = None,
            seed: int = 0, clock: Callable[[], float] = lambda: 0.0,
            estimate_s: float = 0.0, bound: float | None = None,
            patience: int | None = None) -> tuple[Plan, int]:
    """The shortest of `plan` and the variants tried within the budget (on the caller's clock);
    (plan, variants tried). A variant starts only when it can end within the budget, judged by the
    slowest variant so far (before the first, by `estimate_s`, the caller's time for one list plan):
    on a large DAG one list plan can take a good part of a second, and starting one just before the
    budget ends would overrun it by that much. None is tried once the best plan reaches `bound`, a
    makespan no plan can beat (`app.sched.dag.bound`), nor once `patience` says they stopped gaining."""
    t0 = clock()
    best, span = plan, makespan(plan, 0.0)
    rng = np.random.default_rng(seed)
    up = np.empty(0)
    tried, slowest, gained_at = 0, estimate_s, 0

    def spent() -> bool:
        return (reaches(span, bound) or (max_plans is not None and tried >= max_plans)
                or stalled(tried, gained_at, patience) or clock() - t0 + slowest > budget_s)

    named = named_priorities(c)
    k = 0
    while not spent():
        t1 = clock()
        if tried < len(named):
            name, priority = named[tried][0], named[tried][1]()
        else:
            k += 1
            up = up if up.size else upward_rank(c)
            sigma = min(0.3, 0.05 * (1 + k // 4))
            name, priority = f"heft-noise-{k}", up * rng.lognormal(0.0, sigma, size=c.n_tasks)
        candidate = list_schedule(c, priority, name)
        tried += 1
        slowest = max(slowest, clock() - t1)
        if (m := makespan(candidate, 0.0)) < span:
            best, span, gained_at = candidate, m, tried
    return best, tried

"""The standard measures of a schedule (docs/methods.md, "Measures"): wait, turnaround, bounded slowdown
(10 s bound), utilisation, makespan; over all jobs and per trace queue."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from app.sim.replay import JobRecord, ReplayResult
from app.sim.workload import Machine

BSLD_BOUND_S = 10.0
PERCENTILES = (50, 90, 99)


def _summary(name: str, values: np.ndarray) -> dict[str, float]:
    if values.size == 0:
        return {}
    out = {f"{name}_mean": float(values.mean())}
    for p, v in zip(PERCENTILES, np.percentile(values, PERCENTILES), strict=True):
        out[f"{name}_p{p}"] = float(v)
    return out


def job_metrics(records: Sequence[JobRecord]) -> dict[str, float]:
    submit = np.array([r.job.submit for r in records])
    start = np.array([r.start for r in records])
    end = np.array([r.end for r in records])
    run = end - start
    wait = start - submit
    bsld = np.maximum(1.0, (wait + run) / np.maximum(run, BSLD_BOUND_S))
    out: dict[str, float] = {"jobs": float(len(records))}
    out |= _summary("wait", wait) | _summary("turnaround", end - submit) | _summary("bsld", bsld)
    return out


def run_metrics(result: ReplayResult, machine: Machine) -> dict[str, float]:
    recs = result.records
    if not recs:
        return {"jobs": 0.0}
    first = min(r.job.submit for r in recs)
    last = max(r.end for r in recs)
    busy = sum((r.end - r.start) * r.job.cpu * len(r.nodes) for r in recs)
    out = job_metrics(recs)
    out["utilisation"] = busy / (machine.cores * (last - first)) if last > first else 0.0
    out["makespan"] = last - first
    out["backfills"] = float(sum(r.backfilled for r in recs))
    if result.reservations:  # else none was recorded: no count rather than a false 0
        out["reserved"] = float(sum(r.reserved_start is not None for r in recs))
    out["migrated"] = float(sum(r.migrated for r in recs))
    out["unstarted"] = float(len(result.unstarted))
    out["decisions"] = float(result.decisions)
    return out


def per_queue(result: ReplayResult) -> dict[str, dict[str, float]]:
    groups: dict[str, list[JobRecord]] = defaultdict(list)
    for r in result.records:
        groups[r.job.trace_queue or "-"].append(r)
    return {q: job_metrics(rs) for q, rs in sorted(groups.items())}

"""Run the replays of a sweep on Dask, each result written as it comes so a stopped run resumes.

Every replay is independent: the workloads are scattered to the workers once, each (part, setting)
is one task, and each finished task appends one JSON line to the results file (flushed at once).
A rerun reads that file first and submits only what is missing; lines made on another workload
(another trace, split, reading or machine: the `stamp`) are ignored, not reused.

The cluster: a `LocalCluster` of this machine's cores by default (one single-threaded worker process
per core: a replay is pure Python and holds the GIL), or an existing Dask scheduler by address (for
example one that dask-jobqueue's SLURMCluster started as jobs on the site's own cluster).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.sim.tune import Setting, evaluate, read_done
from app.sim.workload import Workload


@dataclass(frozen=True, slots=True)
class Task:
    part: str  # which workload: a fold's train or held-out window ("train1", "held_out1", ...)
    setting: Setting
    detail: bool = False  # also return each job's wait (for the plots)


@contextmanager
def dask_client(scheduler: str | None = None, workers: int | None = None) -> Iterator[Any]:
    """A client of the scheduler at `scheduler`, or of a LocalCluster of `workers` processes (default:
    every core), closed on exit (the local cluster with it)."""
    from distributed import Client, LocalCluster

    if scheduler:
        with Client(scheduler) as client:  # type: ignore[no-untyped-call]
            yield client
        return
    n = workers or os.cpu_count() or 1
    cluster = LocalCluster(  # type: ignore[no-untyped-call]
        n_workers=n, threads_per_worker=1, processes=True, dashboard_address=":0")
    with cluster, Client(cluster) as client:  # type: ignore[no-untyped-call]
        yield client


OnResult = Callable[[Task, dict[str, Any], bool], None]


def run_sweep(client: Any, tasks: Sequence[Task], workloads: Mapping[str, Workload],
              stamps: Mapping[str, str], results: Path,
              on_result: OnResult | None = None) -> dict[tuple[str, str], Any]:
    """Every task's result by (part, setting key): read from `results` when an earlier run on the same
    workloads finished it, else computed on the cluster and appended to `results` as it comes.
    `on_result(task, record, reused)` is told each one (the progress bar)."""
    from distributed import as_completed

    done = _earlier(results, stamps)
    out: dict[tuple[str, str], Any] = {}
    todo = []
    for task in tasks:
        rec = done.get((task.part, task.setting.key))
        if rec is not None and (rec.get("waits") is not None or not task.detail):
            out[(task.part, task.setting.key)] = rec
            if on_result:
                on_result(task, rec, True)
        else:
            todo.append(task)
    if not todo:
        return out
    # hash=False: a fresh key per run, never one an interrupted run's clean-up is about to release
    shared = {part: client.scatter(w, broadcast=True, hash=False) for part, w in workloads.items()
              if any(t.part == part for t in todo)}
    futures = {client.submit(evaluate, shared[t.part], t.setting, t.detail, pure=False): t for t in todo}
    try:
        with results.open("a") as f:
            for future in as_completed(futures):  # type: ignore[no-untyped-call]
                task = futures[future]
                rec = {"stamp": stamps[task.part], "part": task.part, "key": task.setting.key,
                       **future.result()}
                f.write(json.dumps(rec) + "\n")
                f.flush()
                out[(task.part, task.setting.key)] = rec
                if on_result:
                    on_result(task, rec, False)
    finally:  # stopped (Ctrl-C, an error): leave no replay running on a shared cluster
        client.cancel([f for f in futures if not f.done()])
    return out


def _earlier(results: Path, stamps: Mapping[str, str]) -> dict[tuple[str, str], dict[str, Any]]:
    if not results.exists():
        return {}
    lines = results.read_text().splitlines()
    done: dict[tuple[str, str], dict[str, Any]] = {}
    for part, stamp in stamps.items():
        done |= {k: v for k, v in read_done(lines, stamp).items() if k[0] == part}
    return done

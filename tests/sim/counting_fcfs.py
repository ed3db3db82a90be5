"""An independent checker: strict FCFS without backfilling as RLScheduler's SchedGym counts it.

Written from SchedGym's conventions (its `job.py`, `cluster.py` and the FCFS path of
`HPCSimPickJobs.py`), not from its code, and sharing nothing with `app.sim`: it reads the SWF lines
itself, so it checks the project's reading of a log as well as its replay.

SchedGym's reading: a job's size is the larger of its allocated and requested processors; a run
time of -1 counts as 10 s and a job of 0 s is left out; jobs are taken in job-number order. Its
machine: MaxNodes nodes of MaxProcs / MaxNodes processors (MaxProcs = MaxNodes when missing), a job
holding ceil(size / per node) whole nodes. Its strict FCFS: the queue head (earliest submit) starts
as soon as enough nodes are free; nothing behind it starts first; a job runs its recorded run time.
"""

from __future__ import annotations

import gzip
import heapq
import math
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class GymJob:
    number: int
    submit: int
    run: int
    procs: int


def read_gym(path: Path) -> tuple[list[GymJob], int, int]:
    """The jobs as SchedGym loads them, and its machine (nodes, processors per node)."""
    opener = gzip.open if path.read_bytes()[:2] == b"\x1f\x8b" else open
    jobs, max_nodes, max_procs = [], 0, 0
    with opener(path, "rt") as f:  # type: ignore[operator]
        for line in f:
            if line.startswith(";"):
                key, _, value = line[1:].partition(":")
                if key.strip() == "MaxNodes":
                    max_nodes = int(value)
                elif key.strip() == "MaxProcs":
                    max_procs = int(value)
                continue
            v = line.split()
            if len(v) < 18:
                continue
            run = int(v[3]) if int(v[3]) >= 0 else 10
            if run > 0:
                jobs.append(GymJob(int(v[0]), int(v[1]), run, max(int(v[4]), int(v[7]))))
    jobs.sort(key=lambda j: j.number)
    max_procs = max_procs or max_nodes
    return jobs, max_nodes, max_procs // max_nodes


def fcfs_waits(jobs: list[GymJob], nodes: int, per_node: int) -> list[int]:
    """Each job's wait under strict FCFS on an empty machine, counting whole nodes."""
    free, running, now, waits = nodes, [], 0, []
    for job in sorted(jobs, key=lambda j: j.submit):  # stable: job-number order among equal submits
        need = math.ceil(job.procs / per_node)
        now = max(now, job.submit)
        while running and running[0][0] <= now:
            free += heapq.heappop(running)[1]
        while free < need:
            end, held = heapq.heappop(running)
            now, free = max(now, end), free + held
        heapq.heappush(running, (now + job.run, need))
        free -= need
        waits.append(now - job.submit)
    return waits

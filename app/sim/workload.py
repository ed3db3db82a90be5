"""From a trace to the simulator's jobs and machine: what is modelled, and what stands in for what is missing.

Machine: `nodes` nodes of `cores_per_node` cores (and `mem_mib_per_node` MiB when memory is modelled).
cores_per_node = 1 reproduces the processor-count simulations of the literature. A job of p
processors gets ceil(p / cores_per_node) nodes, each with ceil(p / nodes) cores.

The reading of a log (`Reading`) tells the scheduler only what a scheduler knows at submit time, and
follows RLScheduler's SchedGym (`job.py`) where a log leaves a choice; each departure is an option,
and every adjustment is counted in the notes:
- size: the larger of the allocated and requested processors (SchedGym's rule: logs mix the two
  fields), the one known when the other is missing;
- run: the job runs its recorded run time, and the scheduler is told its request. A job that ran past
  its request is not killed there (SchedGym lets it run: the log shows it did run that long); the
  scheduler, told the request, sees it overrun and counts its nodes as freed at the next instant
  (the core's rule for any overrunning job). Options: killing it at the request
  (`kill_at_request`), or telling the scheduler the request raised to the run time (`raise_to_run`:
  knowledge of the future no scheduler has, the reading before issue 33); a log without requested
  times tells the run time;
- a run time of -1 (unknown: in cleaned logs, jobs cancelled while they waited) counts as 10 s; a
  run time of 0 s, or no processor count at all, leaves the job out;
- jobs arrive in submit order, ties in job-number order (numbers compared as numbers).
Queues: by default every job shares one partition. `partitioned` splits the nodes among the trace's
queues (docs/methods.md §2: nodes are split among queues), for the multi-queue balancing policies.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

from app.sim.swf import SwfJob, SwfTrace


@dataclass(frozen=True, slots=True)
class Machine:
    nodes: int
    cores_per_node: int = 1
    mem_mib_per_node: int = 0  # 0: memory not modelled
    # (queue, nodes) in node order; empty: one partition of every node that every job shares
    queues: tuple[tuple[str, int], ...] = ()

    @property
    def cores(self) -> int:
        return self.nodes * self.cores_per_node


@dataclass(frozen=True, slots=True)
class SimJob:
    id: str
    submit: float
    run: float  # how long it runs in the replay (its recorded run time; its request if killed there)
    estimate: float  # what the scheduler is told; shorter than `run` for a job that overruns it
    procs: int
    nodes: int
    cpu: int  # per node
    mem_mib: int  # per node
    trace_queue: str = ""  # the trace's queue name: metrics are also given per trace queue
    user: str = ""


@dataclass(slots=True)
class Workload:
    machine: Machine
    jobs: list[SimJob]
    notes: list[str] = field(default_factory=list)


def default_machine(trace: SwfTrace, cores_per_node: int = 1, mem_mib_per_node: int = 0) -> Machine:
    procs = trace.header_int("MaxProcs") or trace.header_int("MaxNodes")
    if procs is None:
        procs = max((j.procs for j in trace.jobs), default=1)
    return Machine(max(1, procs // cores_per_node), cores_per_node, mem_mib_per_node)


UNKNOWN_RUN_S = 10.0  # what a run time of -1 counts as, after SchedGym


@dataclass(frozen=True, slots=True)
class Reading:
    """How a log's jobs become the replay's; the defaults are the conventional reading."""

    size: str = "larger"  # larger | allocated | requested: which processor count sizes a job
    kill_at_request: bool = False  # a job that ran past its request is killed there
    raise_to_run: bool = False  # ... or the scheduler is told its run time (tells the future)
    unknown_runtime: str = "ten_seconds"  # ten_seconds | drop: jobs whose run time is -1
    zero_runtime: str = "drop"  # drop | keep: jobs whose run time is 0 s


SIZES = ("larger", "allocated", "requested")
UNKNOWN_RUNTIMES = ("ten_seconds", "drop")
ZERO_RUNTIMES = ("drop", "keep")


def workload(trace: SwfTrace, machine: Machine, reading: Reading = Reading()) -> Workload:
    """The jobs the replay can run, in submit order (ties by job number); every job left out and
    every adjustment is counted in `notes`."""
    _check(reading)
    jobs: list[tuple[float, int, int, SimJob]] = []
    n: Counter[str] = Counter()
    for k, j in enumerate(trace.jobs):
        run = _run_time(j, reading, n)
        procs = _size(j, reading, n)
        if run is None or procs is None:
            continue
        nodes = math.ceil(procs / machine.cores_per_node)
        if nodes > machine.nodes:
            n["too_big"] += 1
            continue
        cpu = math.ceil(procs / nodes)
        mem = 0
        if machine.mem_mib_per_node and j.req_mem_kb > 0:
            mem = math.ceil(j.req_mem_kb * cpu / 1024)
            if mem > machine.mem_mib_per_node:
                mem = machine.mem_mib_per_node
                n["capped"] += 1
        estimate = _estimate(j, run, reading, n)
        if reading.kill_at_request:
            run = min(run, estimate)
        queue = trace.queues.get(j.queue, f"q{j.queue}") if j.queue >= 0 else ""
        job = SimJob(j.job_id, j.submit, run, estimate, procs, nodes, cpu, mem, queue, str(j.user))
        jobs.append((j.submit, _number(j.job_id), k, job))
    jobs.sort(key=lambda x: x[:3])
    return Workload(machine, [x[3] for x in jobs], _notes(n, reading))


def _check(reading: Reading) -> None:
    for name, value, allowed in (("size", reading.size, SIZES),
                                 ("unknown_runtime", reading.unknown_runtime, UNKNOWN_RUNTIMES),
                                 ("zero_runtime", reading.zero_runtime, ZERO_RUNTIMES)):
        if value not in allowed:
            raise ValueError(f"{name} is one of {', '.join(allowed)}, not {value!r}")
    if reading.kill_at_request and reading.raise_to_run:
        raise ValueError("kill_at_request and raise_to_run exclude each other: a job killed at its request "
                         "never runs past it")


def _run_time(j: SwfJob, reading: Reading, n: Counter[str]) -> float | None:
    """The run time the replay gives the job, or None to leave it out (counted)."""
    if j.run < 0:
        n["unknown_run"] += 1
        return UNKNOWN_RUN_S if reading.unknown_runtime == "ten_seconds" else None
    if j.run == 0:
        n["zero_run"] += 1
        return 0.0 if reading.zero_runtime == "keep" else None
    return j.run


def _size(j: SwfJob, reading: Reading, n: Counter[str]) -> int | None:
    """Processors: the larger of allocated and requested (or the one `reading.size` names), the other
    one when it is missing."""
    if reading.size == "larger":
        procs = max(j.alloc_procs, j.req_procs)
    else:
        first, second = ((j.alloc_procs, j.req_procs) if reading.size == "allocated"
                         else (j.req_procs, j.alloc_procs))
        procs = first if first > 0 else second
    if procs <= 0:
        n["no_procs"] += 1
        return None
    if j.alloc_procs > 0 and j.req_procs > 0 and j.alloc_procs != j.req_procs:
        n["alloc_differs"] += 1
    return procs


def _estimate(j: SwfJob, run: float, reading: Reading, n: Counter[str]) -> float:
    """What the scheduler is told: the request (raised to the run time with `raise_to_run`); the run
    time when the log has no request."""
    if j.req_time <= 0:
        n["stand_in"] += 1
        return max(run, 1.0)
    if run > j.req_time:
        n["overran"] += 1
        if reading.raise_to_run:
            return run
    return j.req_time


def _number(job_id: str) -> int:
    return int(job_id) if job_id.lstrip("-").isdigit() else 0


def _notes(n: Counter[str], reading: Reading) -> list[str]:
    said = {
        "unknown_run": (f"run time -1 (cancelled while waiting): counted as {UNKNOWN_RUN_S:g} s jobs"
                        if reading.unknown_runtime == "ten_seconds" else "run time -1: left out"),
        "zero_run": ("run time 0 s: kept, ending as they start" if reading.zero_runtime == "keep"
                     else "run time 0 s: left out"),
        "no_procs": "no processor count: left out",
        "too_big": "more processors than the machine has: left out",
        "alloc_differs": f"allocated and requested processors differ: sized by the {reading.size} count",
        "overran": _overran(reading),
        "stand_in": "no requested time: the scheduler is told the run time",
        "capped": ("asked more memory per node than a node has: they get the whole node's memory (the "
                   "log shows they ran, so the request overstated the need)"),
    }
    return [f"{n[key]} jobs: {text}" for key, text in said.items() if n[key]]


def _overran(reading: Reading) -> str:
    said = "ran past their requested time: "
    if reading.kill_at_request:
        return said + "killed at the request (kill_at_request)"
    if reading.raise_to_run:
        return said + ("they run their recorded time and the scheduler is told it (raise_to_run: a "
                       "knowledge of the future no scheduler has)")
    return said + ("the scheduler is told the request and they run their recorded time, not killed "
                   "(SchedGym's rule)")


def work_split(jobs: list[SimJob], nodes: int) -> dict[str, int]:
    """Nodes per trace queue: each queue first gets its median job width (so its common jobs fit),
    the rest goes by the queue's share of the work (nodes x run time), largest remainders first."""
    width: dict[str, list[int]] = {}
    work: dict[str, float] = {}
    for j in jobs:
        width.setdefault(j.trace_queue, []).append(j.nodes)
        work[j.trace_queue] = work.get(j.trace_queue, 0.0) + j.nodes * max(j.run, 1.0)
    base = {q: sorted(ws)[len(ws) // 2] for q, ws in width.items()}
    left = nodes - sum(base.values())
    if left < 0:
        raise ValueError(f"{nodes} nodes cannot hold each queue's median job ({sum(base.values())} nodes)")
    total = sum(work.values())
    exact = {q: left * work[q] / total for q in work}
    sizes = {q: base[q] + math.floor(exact[q]) for q in work}
    short = nodes - sum(sizes.values())
    for q in sorted(work, key=lambda q: (math.floor(exact[q]) - exact[q], q))[:short]:
        sizes[q] += 1
    return sizes


def partitioned(w: Workload, sizes: dict[str, int] | None = None) -> Workload:
    """The workload on its machine split among the trace's queues (`sizes`: nodes per queue, by
    default `work_split`). A job wider than its own queue's partition is left out and counted: it
    could only ever run by migrating, so it would stall any comparison with balancing turned off."""
    names = sorted({j.trace_queue for j in w.jobs})
    if len(names) < 2 or "" in names:
        raise ValueError("the trace does not give every job a queue, or has only one: "
                         "there is nothing to split the machine among")
    sizes = sizes or work_split(w.jobs, w.machine.nodes)
    missing = sorted(set(names) - set(sizes))
    if missing:
        raise ValueError(f"no nodes given for queue(s) {', '.join(missing)}")
    if any(n <= 0 for n in sizes.values()):
        raise ValueError("every queue needs at least one node")
    kept = [j for j in w.jobs if j.nodes <= sizes[j.trace_queue]]
    notes = list(w.notes)
    wide = len(w.jobs) - len(kept)
    if wide:
        share = 1 - sum(j.nodes * j.run for j in kept) / max(sum(j.nodes * j.run for j in w.jobs), 1e-9)
        notes.append(f"{wide} jobs left out: wider than their queue's partition ({share:.1%} of the work)")
    split = tuple(sorted(sizes.items()))
    machine = Machine(sum(sizes.values()), w.machine.cores_per_node, w.machine.mem_mib_per_node, split)
    return Workload(machine, kept, notes)

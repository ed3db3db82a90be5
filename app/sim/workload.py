"""From a trace to the simulator's jobs and machine: what is modelled, and what stands in for what is missing.

Machine: `nodes` nodes of `cores_per_node` cores (and `mem_mib_per_node` MiB when memory is modelled).
cores_per_node = 1 reproduces the processor-count simulations of the literature. A job asking p
processors gets ceil(p / cores_per_node) nodes, each with ceil(p / nodes) cores.
Estimate: the requested time; where the trace has none, the job's real run time (a perfect estimate),
and the replay says how many jobs needed that stand-in.
Queues: by default every job shares one partition. `partitioned` splits the nodes among the trace's
queues (algorithms.md §2: nodes are split among queues), for the multi-queue balancing policies.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from app.sim.swf import SwfTrace


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
    run: float  # real run time
    estimate: float  # what the scheduler is told (the job is killed there)
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


def workload(trace: SwfTrace, machine: Machine) -> Workload:
    """The jobs the replay can run, in submit order; every job left out is counted in `notes`."""
    jobs, notes = [], []
    not_run = too_big = stand_in = capped = 0
    for j in trace.jobs:
        procs = j.procs
        if j.run < 0 or procs <= 0:
            not_run += 1
            continue
        nodes = math.ceil(procs / machine.cores_per_node)
        if nodes > machine.nodes:
            too_big += 1
            continue
        cpu = math.ceil(procs / nodes)
        mem = 0
        if machine.mem_mib_per_node and j.req_mem_kb > 0:
            mem = math.ceil(j.req_mem_kb * cpu / 1024)
            if mem > machine.mem_mib_per_node:
                mem, capped = machine.mem_mib_per_node, capped + 1
        estimate = j.req_time
        if estimate <= 0:
            estimate, stand_in = max(j.run, 1.0), stand_in + 1
        queue = trace.queues.get(j.queue, f"q{j.queue}") if j.queue >= 0 else ""
        jobs.append(SimJob(j.job_id, j.submit, j.run, estimate, procs, nodes, cpu, mem, queue,
                           str(j.user)))
    jobs.sort(key=lambda x: x.submit)
    if not_run:
        notes.append(f"{not_run} jobs left out: no run time or no processor count (cancelled before start)")
    if too_big:
        notes.append(f"{too_big} jobs left out: more processors than the machine has")
    if capped:
        notes.append(f"{capped} jobs asked more memory per node than a node has: they get the whole node's "
                     "memory (the log shows they ran, so the request overstated the need)")
    if stand_in:
        notes.append(f"{stand_in} jobs have no requested time: their real run time stands in as the estimate")
    return Workload(machine, jobs, notes)



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

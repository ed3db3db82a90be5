"""A synthetic but realistic cluster and queue for benchmarks (seeded, so runs compare).

Four partitions of unequal size; standard, bigmem and gpu node types; ~2 % of nodes down or
draining; running jobs filling most cores (whole-node MPI jobs and genomics-like serial or
multithreaded, memory-hungry jobs, several per node); pending jobs mostly single-node and
memory-heavy, some multi-node, some needing gpu or bigmem (thousands of distinct shapes: memory
demands vary per job).

`production` is a second workload on top of it: a fifth of the nodes also serve another queue
(overlapping partitions), 5 % of the nodes in maintenance windows (half under way, half starting in an
hour), and 5 % of the jobs exclusive (whole nodes).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from app.sched.model import Job, Node, NodeState, RunningJob, Snapshot

NOW = 1_750_000_000.0
QUEUES = (("batch", 0.50), ("long", 0.25), ("short", 0.15), ("gpu", 0.10))
TYPES = {  # cpu, mem MiB, gpu, label
    "std": (64, 256 * 1024, 0, None),
    "bigmem": (64, 1024 * 1024, 0, "bigmem"),
    "gpu": (32, 512 * 1024, 4, "gpu"),
}


def _node_type(rng: np.random.Generator, queue: str) -> str:
    if queue == "gpu":
        return "gpu"
    return "bigmem" if rng.random() < 0.1 else "std"


def _fill(rng: np.random.Generator, node_id: str, cap: tuple[int, int, int], queue: str,
          k: int) -> tuple[list[RunningJob], tuple[int, int, int]]:
    """Running jobs on one node, filling ~85-95 % of its cores."""
    target = int(cap[0] * rng.uniform(0.85, 1.0))
    jobs: list[RunningJob] = []
    used = [0, 0, 0]
    while used[0] < target:
        cpu = min(int(rng.choice([1, 2, 4, 8, 16, 32])), target - used[0])
        mem = min(int(cpu * rng.uniform(2_000, 7_000)), cap[1] - used[1])
        gpu = 1 if cap[2] - used[2] > 0 and rng.random() < 0.5 else 0
        start = NOW - float(rng.integers(0, 40 * 3600))
        wall = float(rng.choice([600, 3600, 4 * 3600, 12 * 3600, 48 * 3600]))
        jobs.append(RunningJob(f"r{node_id}-{len(jobs)}", queue, ((node_id, (cpu, mem, gpu)),),
                               start, wall))
        used = [used[0] + cpu, used[1] + mem, used[2] + gpu]
    return jobs, (used[0], used[1], used[2])


def cluster(n_nodes: int, seed: int = 1) -> Snapshot:
    rng = np.random.default_rng(seed)
    nodes: list[Node] = []
    running: list[RunningJob] = []
    bounds = np.cumsum([share for _, share in QUEUES]) * n_nodes
    for i in range(n_nodes):
        queue = QUEUES[int(np.searchsorted(bounds, i, side="right"))][0]
        kind = _node_type(rng, queue)
        cpu, mem, gpu, label = TYPES[kind]
        node_id = f"{queue}-{i:06d}"
        jobs, alloc = _fill(rng, node_id, (cpu, mem, gpu), queue, i)
        running += jobs
        state = NodeState.UP
        if rng.random() < 0.02:
            state = NodeState.DOWN if rng.random() < 0.5 else NodeState.DRAIN
        nodes.append(Node(node_id, queue, (cpu, mem, gpu), alloc,
                          frozenset({label} if label else ()), float(rng.random()),
                          float(rng.choice([2.2, 2.6, 3.0])), state))
    return Snapshot(NOW, tuple(nodes), tuple(running))


def pending(n_jobs: int, seed: int = 2) -> list[Job]:
    rng = np.random.default_rng(seed)
    jobs = []
    for i in range(n_jobs):
        queue = QUEUES[int(rng.choice(4, p=[0.55, 0.2, 0.15, 0.1]))][0]
        labels: frozenset[str] = frozenset()
        nodes, gpu = 1, 0
        cpu = int(rng.choice([1, 1, 2, 4, 8, 16, 32]))
        mem = int(cpu * rng.uniform(2_000, 16_000))
        if queue == "gpu":
            labels, gpu, cpu = frozenset({"gpu"}), int(rng.integers(1, 5)), min(cpu, 16)
        elif rng.random() < 0.08:
            nodes, cpu, mem = int(rng.integers(2, 65)), 64, 200 * 1024
        elif rng.random() < 0.05:
            labels, mem = frozenset({"bigmem"}), int(rng.uniform(300, 900) * 1024)
        jobs.append(Job(
            f"j{i:06d}", queue, NOW - float(rng.integers(0, 2 * 86_400)),
            float(rng.choice([300, 1800, 3600, 4 * 3600, 12 * 3600, 48 * 3600])),
            nodes=nodes, cpu=cpu, mem_mib=mem, gpu=gpu, user=f"u{int(rng.integers(0, 50))}",
            user_priority=float(rng.integers(0, 5)), queue_priority=float(rng.integers(0, 5)),
            labels=labels,
        ))
    return jobs


def production(n_nodes: int, n_jobs: int, seed: int = 7) -> tuple[Snapshot, list[Job]]:
    """`cluster` and `pending` with overlapping partitions, maintenance windows and exclusive jobs."""
    from app.sched.model import Window  # here: bench_against runs `cluster` under trees without it
    snap, jobs = cluster(n_nodes), pending(n_jobs)
    rng = np.random.default_rng(seed)
    names = [q for q, _ in QUEUES]
    nodes = []
    for n in snap.nodes:
        other = names[int(rng.integers(len(names)))]
        both = tuple(sorted({n.queue, other}))
        nodes.append(replace(n, queues=both) if rng.random() < 0.2 and len(both) > 1 else n)
    picked = rng.choice(n_nodes, n_nodes // 20, replace=False)
    windows = []
    for k, at in enumerate(range(0, len(picked), 50)):
        ids = tuple(nodes[i].id for i in picked[at:at + 50])
        start, end = (NOW - 600, NOW + 3600) if k % 2 == 0 else (NOW + 3600, NOW + 10_800)
        windows.append(Window(f"w{k}", ids, start, end))
    jobs = [replace(j, exclusive=True) if rng.random() < 0.05 else j for j in jobs]
    return replace(snap, nodes=tuple(nodes), windows=tuple(windows)), jobs


def request_body(snap: Snapshot, jobs: list[Job], policy: str) -> dict[str, Any]:
    """The same problem as the JSON body of POST /schedule."""
    return {
        "now": snap.now,
        "nodes": [{"id": n.id, "queue": n.queue, **({"queues": list(n.queues)} if n.queues else {}),
                   "labels": sorted(n.labels),
                   "capacity": dict(zip(("cpu", "mem_mib", "gpu"), n.cap, strict=True)),
                   "allocated": dict(zip(("cpu", "mem_mib", "gpu"), n.alloc, strict=True)),
                   "cpu_load": n.cpu_load, "cpu_ghz": n.cpu_ghz, "state": n.state.value}
                  for n in snap.nodes],
        "running": [{"id": r.id, "queue": r.queue, "start_time": r.start_time,
                     "walltime_s": r.walltime_s,
                     "allocation": [{"node": nid, "cpu": a[0], "mem_mib": a[1], "gpu": a[2]}
                                    for nid, a in r.alloc]}
                    for r in snap.running],
        "pending": [{"id": j.id, "user": j.user, "queue": j.queue, "submit_time": j.submit_time,
                     "nodes": j.nodes, "cpu": j.cpu, "mem_mib": j.mem_mib, "gpu": j.gpu,
                     "walltime_s": j.walltime_s, "user_priority": j.user_priority,
                     "queue_priority": j.queue_priority, "labels": sorted(j.labels),
                     **({"exclusive": True} if j.exclusive else {})}
                    for j in jobs],
        **({"windows": [{"id": w.id, "nodes": list(w.node_ids), "start": w.start, "end": w.end}
                        for w in snap.windows]} if snap.windows else {}),
        "policy": {"name": policy},
    }

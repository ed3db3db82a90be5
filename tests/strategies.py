"""Hypothesis strategies: random clusters, running jobs, pending queues, policies."""

from __future__ import annotations

from hypothesis import strategies as st

from app.sched import params as P
from app.sched.model import Job, Node, NodeState, RunningJob, Snapshot

NOW = 600_000.0
LABELS = ("gpu", "bigmem", "ssd")
QUEUES = ("qa", "qb", "qc")


@st.composite
def nodes(draw: st.DrawFn, n_queues: int) -> list[Node]:
    count = draw(st.integers(1, 12))
    out = []
    for i in range(count):
        gpu = draw(st.sampled_from([0, 0, 2, 4]))
        labels = set(draw(st.sets(st.sampled_from(LABELS[1:]), max_size=2)))
        if gpu:
            labels.add("gpu")
        state = draw(st.sampled_from([NodeState.UP] * 6 + [NodeState.DOWN, NodeState.DRAIN]))
        out.append(Node(
            f"n{i:02d}", QUEUES[draw(st.integers(0, n_queues - 1))],
            (draw(st.sampled_from([1, 2, 4, 8, 64])), draw(st.sampled_from([1024, 8192, 512_000])),
             gpu),
            (0, 0, 0), frozenset(labels), draw(st.floats(0, 1)), draw(st.sampled_from([1.0, 2.5])),
            state,
        ))
    return out


@st.composite
def running_on(draw: st.DrawFn, cluster: list[Node]) -> tuple[list[Node], list[RunningJob]]:
    """Running jobs within each node's capacity; some overrun; some nodes have unmanaged usage."""
    free = {n.id: list(n.cap) for n in cluster}
    jobs = []
    for k in range(draw(st.integers(0, 14))):
        width = draw(st.integers(1, min(2, len(cluster))))
        picked = draw(st.lists(st.sampled_from(cluster), min_size=width, max_size=width,
                               unique_by=lambda n: n.id))
        alloc = []
        for n in picked:
            f = free[n.id]
            amount = (draw(st.integers(0, f[0])), draw(st.integers(0, f[1])),
                      draw(st.integers(0, f[2])))
            if amount == (0, 0, 0):
                continue
            free[n.id] = [a - b for a, b in zip(f, amount, strict=True)]
            alloc.append((n.id, amount))
        if alloc:
            start = NOW - draw(st.integers(0, 40_000))
            jobs.append(RunningJob(f"r{k}", picked[0].queue, tuple(alloc), start,
                                   float(draw(st.integers(60, 50_000)))))
    out = []
    for n in cluster:
        f = free[n.id]
        extra = draw(st.integers(0, f[0])) if draw(st.booleans()) else 0
        alloc = (n.cap[0] - f[0] + extra, n.cap[1] - f[1], n.cap[2] - f[2])
        out.append(Node(n.id, n.queue, n.cap, alloc, n.labels, n.cpu_load, n.cpu_ghz, n.state))
    return out, jobs


@st.composite
def pending_jobs(draw: st.DrawFn, n_queues: int, n_nodes: int) -> list[Job]:
    out = []
    for i in range(draw(st.integers(0, 25))):
        labels = frozenset(draw(st.sets(st.sampled_from(LABELS), max_size=1)))
        out.append(Job(
            f"j{i:02d}", QUEUES[draw(st.integers(0, n_queues - 1))],
            NOW - draw(st.integers(0, 200_000)), float(draw(st.integers(60, 86_400))),
            nodes=draw(st.integers(1, min(3, n_nodes))),
            cpu=draw(st.sampled_from([1, 1, 2, 4, 8, 128])),
            mem_mib=draw(st.sampled_from([0, 512, 4096, 600_000])),
            gpu=1 if "gpu" in labels and draw(st.booleans()) else 0,
            user=f"u{draw(st.integers(0, 3))}",
            priority=float(draw(st.integers(0, 60))), user_priority=float(draw(st.integers(0, 5))),
            queue_priority=float(draw(st.integers(0, 5))), vip=draw(st.integers(0, 9)) == 0,
            labels=labels,
        ))
    return out


@st.composite
def snapshots_and_jobs(draw: st.DrawFn) -> tuple[Snapshot, list[Job]]:
    n_queues = draw(st.integers(1, 3))
    cluster, running = draw(running_on(draw(nodes(n_queues))))
    jobs = draw(pending_jobs(n_queues, len(cluster)))
    return Snapshot(NOW, tuple(cluster), tuple(running)), jobs


@st.composite
def common_params(draw: st.DrawFn) -> dict[str, object]:
    mig = draw(st.sampled_from([None, "static", "dynamic"]))
    return {
        "selector": draw(st.sampled_from(["first_fit", "least_load", "evaluation", "fragment"])),
        "time_grain_s": draw(st.sampled_from([1, 60, 300])),
        "queue_depth": draw(st.sampled_from([100_000, 100_000, 5])),
        "order": draw(st.sampled_from(["weighted", "fcfs", "sjf", "f1"])),  # priority only
        "backfill_order": draw(st.sampled_from(["priority", "sjf"])),  # priority only
        "migration": None if mig is None else P.MigrationParams(
            mode=mig, threshold=draw(st.sampled_from([0.3, 0.85])),
            weight=draw(st.sampled_from([0.0, 1.0]))),
    }

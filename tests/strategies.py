"""Hypothesis strategies: random clusters, running jobs, pending queues, policies."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import strategies as st

from app.sched import params as P
from app.sched.model import Job, Node, NodeState, RunningJob, Snapshot, Window

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
        queue = QUEUES[draw(st.integers(0, n_queues - 1))]
        # overlapping partitions: some nodes serve other queues too
        also = draw(st.sets(st.sampled_from(QUEUES[:n_queues]), max_size=2)) if draw(st.booleans()) else set()
        every = tuple(sorted(also | {queue}))
        out.append(Node(
            f"n{i:02d}", queue,
            (draw(st.sampled_from([1, 2, 4, 8, 64])), draw(st.sampled_from([1024, 8192, 512_000])),
             gpu),
            (0, 0, 0), frozenset(labels), draw(st.floats(0, 1)), draw(st.sampled_from([1.0, 2.5])),
            state, draw(st.sampled_from([1, 1, 0, 5])), every if len(every) > 1 else (),
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
        out.append(replace(n, alloc=alloc))
    return out, jobs


@st.composite
def pending_jobs(draw: st.DrawFn, n_queues: int, n_nodes: int) -> list[Job]:
    out = []
    for i in range(draw(st.integers(0, 25))):
        labels = frozenset(draw(st.sets(st.sampled_from(LABELS), max_size=1)))
        cpu = draw(st.sampled_from([1, 1, 2, 4, 8, 128]))
        if draw(st.integers(0, 3)) == 0:  # memory asked per cpu (Slurm's --mem-per-cpu)
            mem = cpu * draw(st.sampled_from([0, 256, 2048]))
        else:
            mem = draw(st.sampled_from([0, 512, 4096, 600_000]))
        out.append(Job(
            f"j{i:02d}", QUEUES[draw(st.integers(0, n_queues - 1))],
            NOW - draw(st.integers(0, 200_000)), float(draw(st.integers(60, 86_400))),
            nodes=draw(st.integers(1, min(3, n_nodes))),
            cpu=cpu,
            mem_mib=mem,
            gpu=1 if "gpu" in labels and draw(st.booleans()) else 0,
            user=f"u{draw(st.integers(0, 3))}",
            priority=float(draw(st.integers(0, 60))), user_priority=float(draw(st.integers(0, 5))),
            queue_priority=float(draw(st.integers(0, 5))), vip=draw(st.integers(0, 9)) == 0,
            labels=labels,
            exclusive=draw(st.integers(0, 5)) == 0,
        ))
    return out


@st.composite
def windows_on(draw: st.DrawFn, cluster: list[Node]) -> list[Window]:
    """Maintenance windows: some in progress, some ahead, some over already."""
    out = []
    for k in range(draw(st.integers(0, 2))):
        picked = draw(st.lists(st.sampled_from(cluster), min_size=1, max_size=3, unique_by=lambda n: n.id))
        start = NOW + draw(st.sampled_from([-5_000, -30, 0, 45, 600, 3_600, 20_000]))
        length = draw(st.sampled_from([30, 600, 7_200, 100_000]))
        out.append(Window(f"w{k}", tuple(n.id for n in picked), float(start), float(start + length)))
    return out


@st.composite
def snapshots_and_jobs(draw: st.DrawFn) -> tuple[Snapshot, list[Job]]:
    n_queues = draw(st.integers(1, 3))
    cluster, running = draw(running_on(draw(nodes(n_queues))))
    jobs = draw(pending_jobs(n_queues, len(cluster)))
    windows = draw(windows_on(cluster))
    return Snapshot(NOW, tuple(cluster), tuple(running), windows=tuple(windows)), jobs


@st.composite
def common_params(draw: st.DrawFn) -> dict[str, object]:
    mig = draw(st.sampled_from([None, "static", "dynamic"]))
    return {
        "selector": draw(st.sampled_from(["first_fit", "least_load", "evaluation", "fragment"])),
        "time_grain_s": draw(st.sampled_from([1, 60, 300])),
        "queue_depth": draw(st.sampled_from([100_000, 100_000, 5])),
        "order": draw(st.sampled_from(["weighted", "fcfs", "sjf", "f1"])),  # priority only
        "backfill_order": draw(st.sampled_from(["priority", "sjf"])),  # priority only
        # priority only: selective reservation, and the aging term (who may reserve, and the order,
        # move with the wait)
        "reserve_xfactor": draw(st.sampled_from([None, None, 1.0, 1.5, 4.0])),
        "wait_cap_s": draw(st.sampled_from([None, None, 600.0, 7_200.0])),
        "migration": None if mig is None else P.MigrationParams(
            mode=mig, threshold=draw(st.sampled_from([0.3, 0.85])),
            weight=draw(st.sampled_from([0.0, 1.0]))),
    }

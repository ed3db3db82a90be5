"""Seeded workloads for the DAG benchmark: random layered DAGs and heterogeneous group sets."""

from __future__ import annotations

import numpy as np

from app.sched.dag.model import DagProblem, Edge, Group, Network, Task

LIBRARIES = ("bwa", "gatk", "samtools")
BANDWIDTH = 1.25e8  # 10 Gbit/s


def groups(n: int, seed: int = 0, slots: int = 1) -> tuple[Group, ...]:
    """Speeds 0.5–2 (uniform), each library present with probability 0.7 (the first group has all)."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        has = [lib for lib in LIBRARIES if i == 0 or rng.random() < 0.7]
        out.append(Group(f"g{i}", speed=float(rng.uniform(0.5, 2.0)), labels=frozenset(has), slots=slots))
    return tuple(out)


def layered_dag(n: int, gs: tuple[Group, ...], ccr: float = 1.0, seed: int = 0) -> DagProblem:
    """n tasks in about sqrt(n) layers of random width; each task has 1–3 parents in the two layers
    above; work lognormal (mean ~100 s); edge data sized so that a transfer takes `ccr` × the mean
    work on average; 30 % of tasks need one library."""
    rng = np.random.default_rng(seed)
    depth = max(1, int(round(np.sqrt(n))))
    cuts = np.sort(rng.choice(np.arange(1, n), size=min(depth - 1, n - 1), replace=False)) if n > 1 else []
    layers = np.split(np.arange(n), cuts)
    work = rng.lognormal(mean=np.log(100) - 0.5, sigma=1.0, size=n)
    tasks = []
    for i in range(n):
        needs = frozenset({LIBRARIES[rng.integers(len(LIBRARIES))]}) if rng.random() < 0.3 else frozenset()
        tasks.append(Task(f"t{i}", work=float(work[i]), requires=needs))
    edges = []
    mean_bytes = ccr * float(work.mean()) * BANDWIDTH
    for k in range(1, len(layers)):
        above = np.concatenate(layers[max(0, k - 2):k])
        for v in layers[k]:
            for u in rng.choice(above, size=min(len(above), int(rng.integers(1, 4))), replace=False):
                edges.append(Edge(f"t{u}", f"t{v}", float(rng.exponential(mean_bytes))))
    return DagProblem(tuple(tasks), tuple(edges), gs, Network(bandwidth=BANDWIDTH))


def shaped_dag(shape: str, n: int, gs: tuple[Group, ...], seed: int = 0) -> DagProblem:
    """n tasks of one shape: `chain` (each needs the one before), `fanout` (a root feeding n − 1
    leaves), `independent` (no edge), `layered` (as `layered_dag`, ccr 1). Work lognormal, ~100 s."""
    if shape == "layered":
        return layered_dag(n, gs, ccr=1.0, seed=seed)
    rng = np.random.default_rng(seed)
    work = rng.lognormal(mean=np.log(100) - 0.5, sigma=1.0, size=n)
    tasks = tuple(Task(f"t{i}", work=float(w)) for i, w in enumerate(work))
    data = rng.exponential(float(work.mean()) * BANDWIDTH, size=n)
    if shape == "chain":
        pairs = [(i - 1, i) for i in range(1, n)]
    elif shape == "fanout":
        pairs = [(0, i) for i in range(1, n)]
    elif shape == "independent":
        pairs = []
    else:
        raise ValueError(f"unknown shape {shape!r}")
    edges = tuple(Edge(f"t{u}", f"t{v}", float(data[v])) for u, v in pairs)
    return DagProblem(tasks, edges, gs, Network(bandwidth=BANDWIDTH))

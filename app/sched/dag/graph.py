"""A DAG problem compiled to index arrays: costs, precedence lists, network matrices, static levels.

Everything a planner reads and nothing it writes. Problems reaching here are valid (the adapter
checks ids, cycles and runnable groups first); `topological_order` and `find_cycle` are also what
the adapter uses for those checks.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from app.sched.dag.model import DagProblem, Group, Network, Task

INF = float("inf")


def topological_order(n: int, succs: Sequence[Sequence[int]]) -> list[int] | None:
    """Kahn's order, smallest index first among the ready; None when there is a cycle."""
    indeg = [0] * n
    for out in succs:
        for v in out:
            indeg[v] += 1
    ready = deque(v for v in range(n) if indeg[v] == 0)
    order = []
    while ready:
        u = ready.popleft()
        order.append(u)
        for v in succs[u]:
            indeg[v] -= 1
            if indeg[v] == 0:
                ready.append(v)
    return order if len(order) == n else None


def find_cycle(n: int, succs: Sequence[Sequence[int]]) -> list[int]:
    """The tasks of one cycle, in edge order (empty when the graph is acyclic). Iterative DFS."""
    colour = [0] * n  # 0 unseen, 1 on the stack, 2 finished
    parent = [-1] * n
    for root in range(n):
        if colour[root]:
            continue
        stack = [(root, iter(succs[root]))]
        colour[root] = 1
        while stack:
            u, it = stack[-1]
            v = next(it, None)
            if v is None:
                colour[u] = 2
                stack.pop()
            elif colour[v] == 1:
                cycle = [u]
                while cycle[-1] != v:
                    cycle.append(parent[cycle[-1]])
                return cycle[::-1]
            elif colour[v] == 0:
                colour[v], parent[v] = 1, u
                stack.append((v, iter(succs[v])))
    return []


def cost_row(task: Task, groups: Sequence[Group]) -> np.ndarray:
    """C(v, R) for every group: work / speed where the labels cover the needs, else the explicit cost."""
    if task.costs is not None:
        return np.array([task.costs.get(g.id, INF) for g in groups], dtype=float)
    return np.array(
        [task.work / g.speed if task.requires <= g.labels else INF for g in groups], dtype=float
    )


def cost_matrix(tasks: Sequence[Task], groups: Sequence[Group]) -> np.ndarray:
    """Every task's `cost_row`, (T, G): tasks given by `work` in one division per set of requirements."""
    cost = np.empty((len(tasks), len(groups)))
    speed = np.array([g.speed for g in groups], dtype=float)
    by_needs: dict[frozenset[str], list[int]] = {}
    for v, t in enumerate(tasks):
        if t.costs is not None:
            cost[v] = cost_row(t, groups)
        else:
            by_needs.setdefault(t.requires, []).append(v)
    for needs, rows in by_needs.items():
        able = np.array([needs <= g.labels for g in groups])
        work = np.array([tasks[v].work for v in rows], dtype=float)
        cost[rows] = np.where(able, work[:, None] / speed, INF)
    return cost


def network_matrices(groups: Sequence[Group], net: Network) -> tuple[np.ndarray, np.ndarray]:
    """(latency, 1/bandwidth) between every two groups. Within a group a transfer is free unless a
    link from the group to itself says what it costs (saga's instances give it a finite speed)."""
    g = len(groups)
    lat = np.full((g, g), net.latency, dtype=float)
    inv_bw = np.full((g, g), 1.0 / net.bandwidth, dtype=float)
    np.fill_diagonal(lat, 0.0)
    np.fill_diagonal(inv_bw, 0.0)
    index = {grp.id: i for i, grp in enumerate(groups)}
    for link in net.links:
        a, b = index[link.a], index[link.b]
        lat[a, b] = lat[b, a] = link.latency
        inv_bw[a, b] = inv_bw[b, a] = 1.0 / link.bandwidth
    return lat, inv_bw


@dataclass(slots=True)
class Compiled:
    problem: DagProblem
    cost: np.ndarray  # (T, G), inf where the group cannot run the task
    mean_cost: np.ndarray  # (T,) C̄(v): mean of the finite costs
    preds: list[list[tuple[int, float]]]  # per task: (predecessor, bytes)
    succs: list[list[tuple[int, float]]]
    topo: list[int]
    lat: np.ndarray  # (G, G)
    inv_bw: np.ndarray  # (G, G)
    static_level: np.ndarray  # (T,) SL(v): largest sum of C̄ on a path from v to an exit task
    csr: tuple[np.ndarray, ...] | None = None  # preds and succs as arrays (`list_kernel.graph_arrays`)

    @property
    def n_tasks(self) -> int:
        return len(self.problem.tasks)

    @property
    def n_groups(self) -> int:
        return len(self.problem.groups)

    def transfer(self, a: int, b: int, data: float) -> float:
        """Seconds to move `data` bytes from group a to group b (0 within a group without a self-link)."""
        return float(self.lat[a, b] + data * self.inv_bw[a, b])


def compile_problem(problem: DagProblem) -> Compiled:
    t_index = {t.id: i for i, t in enumerate(problem.tasks)}
    n = len(problem.tasks)
    preds: list[list[tuple[int, float]]] = [[] for _ in range(n)]
    succs: list[list[tuple[int, float]]] = [[] for _ in range(n)]
    for e in problem.edges:
        u, v = t_index[e.src], t_index[e.dst]
        succs[u].append((v, e.data))
        preds[v].append((u, e.data))
    topo = topological_order(n, [[v for v, _ in out] for out in succs])
    if topo is None:
        raise ValueError("the task graph has a cycle")
    cost = cost_matrix(problem.tasks, problem.groups)
    finite = np.isfinite(cost)
    mean_cost = np.where(finite, cost, 0.0).sum(axis=1) / np.maximum(finite.sum(axis=1), 1)
    lat, inv_bw = network_matrices(problem.groups, problem.network)
    return Compiled(problem, cost, mean_cost, preds, succs, topo, lat, inv_bw,
                    _static_levels(mean_cost, succs, topo))


def _static_levels(
    mean_cost: np.ndarray, succs: list[list[tuple[int, float]]], topo: list[int]
) -> np.ndarray:
    level = mean_cost.astype(float)
    for u in reversed(topo):
        if succs[u]:
            level[u] = mean_cost[u] + max(level[v] for v, _ in succs[u])
    return level

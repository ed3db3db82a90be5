"""The CPUs Slurm will give a job on each of the nodes it is pinned to.

A job asked with `-n P` over k nodes and no `--ntasks-per-node` is laid out by Slurm's default
block distribution: in Slurm's node order each node takes as many whole tasks as it has free CPUs
for, leaving one task for each node after it (`-n 20` on three idle 8-CPU nodes: 8+8+4; `-n 12`:
8+3+1). The bridge predicts that layout from the CPUs free on each node, so what it tells the
service a released job holds is what Slurm will give it, and a start whose layout would not fit
beside the cycle's other starts is deferred rather than left pending on its pin.
"""

from __future__ import annotations

from app.bridges.slurm.read import Ask


def block_fill(ask: Ask, nodes: list[str], free: dict[str, int]) -> dict[str, int] | None:
    """CPUs per node under block distribution over `nodes` (in Slurm's order); None when the free
    CPUs cannot hold the job with at least one task on every node."""
    tasks = -(-ask.total // ask.per_task)
    out: dict[str, int] = {}
    for i, node in enumerate(nodes):
        take = min(max(0, free.get(node, 0)) // ask.per_task, tasks - (len(nodes) - i - 1))
        if take < 1:
            return None
        out[node] = take * ask.per_task
        tasks -= take
    return out if tasks == 0 else None


def layout(ask: Ask | None, cpu: int, nodes: list[str], order: dict[str, int],
           free: dict[str, int]) -> dict[str, int] | None:
    """The CPUs Slurm will give on each node: `cpu` on each when the layout is fixed, the block fill
    otherwise; None when that does not fit the free CPUs."""
    if ask is None or ask.fixed:
        out = {n: cpu for n in nodes}
        return out if all(free.get(n, 0) >= cpu for n in nodes) else None
    return block_fill(ask, sorted(nodes, key=lambda n: order.get(n, len(order))), free)

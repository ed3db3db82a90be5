"""What the snapshot fields a resource manager like Slurm sends cost a decision: the same cluster and
jobs (bench/workload.py) plain, then with node weights, overlapping queues, maintenance windows,
whole-node jobs, and all of them; medians in process, and each as a ratio to the plain case of the
same run (the machine is noisy: compare ratios, not milliseconds across runs).

    python bench/bench_slurm_fields.py                          # 10,000 nodes x 5,000 jobs, easy
    python bench/bench_slurm_fields.py --nodes 2000 --jobs 1000 --policies easy,conservative
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import typer
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.sched.model import Job, Snapshot, Window  # noqa: E402
from app.sched.registry import decide  # noqa: E402
from bench.common import median_ms  # noqa: E402
from bench.workload import cluster, pending  # noqa: E402

console = Console(width=140)
cli = typer.Typer(add_completion=False)


def weights(snap: Snapshot, jobs: list[Job], rng: np.random.Generator) -> tuple[Snapshot, list[Job]]:
    nodes = tuple(replace(n, weight=int(w)) for n, w in zip(snap.nodes, rng.integers(1, 4, len(snap.nodes)),
                                                             strict=True))
    return replace(snap, nodes=nodes), jobs


def overlap(snap: Snapshot, jobs: list[Job], rng: np.random.Generator) -> tuple[Snapshot, list[Job]]:
    """A fifth of the nodes also serve one other queue."""
    queues = sorted({n.queue for n in snap.nodes})
    nodes = []
    for n in snap.nodes:
        other = queues[int(rng.integers(len(queues)))]
        both = tuple(sorted({n.queue, other}))
        nodes.append(replace(n, queues=both) if rng.random() < 0.2 and len(both) > 1 else n)
    return replace(snap, nodes=tuple(nodes)), jobs


def windows(snap: Snapshot, jobs: list[Job], rng: np.random.Generator) -> tuple[Snapshot, list[Job]]:
    """5 % of the nodes in windows of 50 nodes: half under way (1 h left), half from in 1 h for 2 h."""
    picked = rng.choice(len(snap.nodes), len(snap.nodes) // 20, replace=False)
    out = []
    for k, at in enumerate(range(0, len(picked), 50)):
        ids = tuple(snap.nodes[i].id for i in picked[at:at + 50])
        start = snap.now - 600 if k % 2 == 0 else snap.now + 3600
        end = snap.now + 3600 if k % 2 == 0 else snap.now + 10_800
        out.append(Window(f"w{k}", ids, start, end))
    return replace(snap, windows=tuple(out)), jobs


def exclusive(snap: Snapshot, jobs: list[Job], rng: np.random.Generator) -> tuple[Snapshot, list[Job]]:
    """5 % of the jobs take whole nodes."""
    return snap, [replace(j, exclusive=True) if rng.random() < 0.05 else j for j in jobs]


VARIANTS = {"weights": [weights], "overlapping queues": [overlap], "windows": [windows],
            "exclusive 5%": [exclusive], "all four": [weights, overlap, windows, exclusive]}


def _rows(n: int, j: int, policy: str, repeat: int) -> list[dict[str, Any]]:
    base_snap, base_jobs = cluster(n), pending(j)
    rows = []
    plain_ms = 0.0
    for name, steps in [("plain", []), *VARIANTS.items()]:
        snap, jobs, rng = base_snap, base_jobs, np.random.default_rng(7)
        for step in steps:
            snap, jobs = step(snap, jobs, rng)
        ms, d = median_ms(lambda s=snap, js=jobs: decide(s, js, policy), repeat)
        plain_ms = plain_ms or ms
        rows.append({"nodes": n, "jobs": j, "policy": policy, "variant": name, "decide_ms": ms,
                     "ratio": ms / plain_ms, "starts": d.summary.started + d.summary.backfilled,
                     "reserved": d.summary.reserved})
    return rows


@cli.command()
def main(nodes: int = typer.Option(10_000, help="cluster size"),
         jobs: int = typer.Option(5_000, help="pending jobs"),
         policies: str = typer.Option("easy", help="policies, comma-separated"),
         repeat: int = typer.Option(3, help="timed runs per cell (after one warm-up)")) -> None:
    t = Table(title="decision time with the Slurm snapshot fields (median, in process)")
    for col in ("nodes", "jobs", "policy", "variant", "decide_ms", "ratio", "starts", "reserved"):
        t.add_column(col, justify="left" if col in ("policy", "variant") else "right")
    for policy in policies.split(","):
        for r in _rows(nodes, jobs, policy, repeat):
            t.add_row(str(r["nodes"]), str(r["jobs"]), r["policy"], r["variant"], f"{r['decide_ms']:.1f}",
                      f"{r['ratio']:.2f}", str(r["starts"]), str(r["reserved"]))
    console.print(t)


if __name__ == "__main__":
    cli()

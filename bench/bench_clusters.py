"""Cluster cache: PUT time and PATCH throughput (changes per second), in process and on real Redis.

    python bench/bench_clusters.py --nodes 1000,10000 --patches 200
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Annotated, Any

import redis
import typer
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app import service  # noqa: E402
from app.store.clusters import MemoryClusterStore, RedisClusterStore  # noqa: E402
from bench.common import finish  # noqa: E402
from schemas.clusters import ClusterPatch, ClusterPut  # noqa: E402

console = Console(width=140)
cli = typer.Typer(add_completion=False)


def snapshot(n: int) -> ClusterPut:
    nodes = [{"id": f"n{i}", "queue": "batch", "capacity": {"cpu": 64, "mem_mib": 256_000}} for i in range(n)]
    running = [{"id": f"r{i}", "queue": "batch", "start_time": 0, "walltime_s": 3600,
                "allocation": [{"node": f"n{i}", "cpu": 32, "mem_mib": 64_000}]} for i in range(n)]
    return ClusterPut.model_validate({"nodes": nodes, "running": running})


def change(k: int) -> ClusterPatch:
    return ClusterPatch.model_validate({"changes": [{"op": "job_started", "job": {
        "id": f"x{k}", "queue": "batch", "start_time": 1, "walltime_s": 60,
        "allocation": [{"node": f"n{k}", "cpu": 1}]}}]})


def row(store: Any, name: str, n: int, patches: int) -> dict[str, Any]:
    state = snapshot(n)
    t0 = time.perf_counter()
    version = service.put_cluster(store, "bench", "c", state).version
    put_ms = (time.perf_counter() - t0) * 1e3
    t0 = time.perf_counter()
    for k in range(patches):
        version = service.patch_cluster(store, "bench", "c", version, change(k % n)).version
    seconds = time.perf_counter() - t0
    return {"store": name, "nodes": n, "put_ms": put_ms, "patches": patches,
            "changes_per_s": patches / seconds, "patch_ms": seconds / patches * 1e3}


@cli.command()
def main(nodes: str = "1000,10000", patches: int = 200,
         redis_url: Annotated[str, typer.Option(help="a Redis to use (db flushed)")] = "redis://127.0.0.1:6379/14",
         json_out: Annotated[Path | None, typer.Option("--json")] = None) -> None:
    client = redis.Redis.from_url(redis_url)
    client.flushdb()
    rows = []
    for n in [int(x) for x in nodes.split(",") if x]:
        rows.append(row(MemoryClusterStore(), "memory", n, patches))
        rows.append(row(RedisClusterStore(client), "redis", n, patches))
    client.flushdb()
    table = Table(title="Cluster cache: PUT and one-change PATCHes (each PATCH re-checks the whole snapshot)")
    for c in rows[0]:
        table.add_column(c, justify="left" if c == "store" else "right")
    for r in rows:
        table.add_row(*[f"{v:,.1f}" if isinstance(v, float) else str(v) for v in r.values()])
    finish(console, [table], rows, json_out)


if __name__ == "__main__":
    cli()

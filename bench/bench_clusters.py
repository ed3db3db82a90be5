"""Cluster cache: decision time from the index at two cluster sizes, PUT time, PATCH throughput,
in process and on a real Redis.

    python bench/bench_clusters.py                       # 10,000 and 100,000 nodes, 2,000 jobs
    python bench/bench_clusters.py --nodes 1000,10000 --jobs 500

The cluster and queue are bench/workload.py's (four queues, std/bigmem/gpu nodes, ~6 running jobs
per node). The issue's target: the 100,000-node decision time <= 2 x the 10,000-node one.
"""

from __future__ import annotations

import gc
import json
import random
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Annotated, Any

import redis
import typer
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app import service  # noqa: E402
from app.api.routes.schedule import BYTES_PER_OBJECT  # noqa: E402
from app.main import warm  # noqa: E402
from app.sched.collector import rare_collections  # noqa: E402
from app.sched.model import RunningJob  # noqa: E402
from app.settings import Settings  # noqa: E402
from app.store.index import ClusterCache  # noqa: E402
from app.store.kv import MemoryKv, RedisKv  # noqa: E402
from bench.common import finish  # noqa: E402
from bench.workload import cluster, pending, request_body  # noqa: E402
from schemas.clusters import ClusterPatch  # noqa: E402
from schemas.schedule import ScheduleRequest  # noqa: E402
from tests.redis_server import RedisServer  # noqa: E402

console = Console(width=160)
cli = typer.Typer(add_completion=False)
KEY = "bench:c"


def decision_times(cache: ClusterCache, jobs_body: list[dict[str, Any]], policy: str,
                   repeat: int) -> tuple[float, float, int, int]:
    """Median (index read + checks ms, decision ms), nodes examined, jobs started."""
    wire = {"now": 1_750_000_000.0, "cluster_id": "c", "pending": jobs_body, "policy": {"name": policy}}
    req = ScheduleRequest.model_validate(wire)
    body_bytes = len(json.dumps(wire))
    reads, decides = [], []
    for _ in range(repeat):
        with rare_collections(body_bytes // BYTES_PER_OBJECT):  # as POST /schedule runs a decision
            out = service.schedule(req, clusters=cache, tenant="bench")
        reads.append(out.summary.timing_ms["validate"])
        decides.append(out.summary.timing_ms["schedule"])
    return statistics.median(reads), statistics.median(decides), out.summary.nodes_examined, \
        out.summary.started + out.summary.backfilled


def patch_rate(cache: ClusterCache, running: list[RunningJob], patches: int, batch: int) -> float:
    """Changes per second: PATCHes of `batch` changes, half of them running jobs ending, half the same
    holdings started again as new jobs (the churn of a busy cluster; nodes do move)."""
    rng = random.Random(7)
    live = list(running)
    version = cache.summary(KEY)[0]
    t0 = time.perf_counter()
    for p in range(patches):
        ended = [live.pop(rng.randrange(len(live))) for _ in range(batch // 2)]
        changes: list[dict[str, Any]] = [{"op": "job_ended", "job_id": j.id} for j in ended]
        for k, j in enumerate(ended):
            again = RunningJob(f"x{p}-{k}", j.queue, j.alloc, 1_750_000_000.0, j.walltime_s)
            changes.append({"op": "job_started", "job": {
                "id": again.id, "queue": again.queue, "start_time": again.start_time,
                "walltime_s": again.walltime_s,
                "allocation": [{"node": n, "cpu": a[0], "mem_mib": a[1], "gpu": a[2]}
                               for n, a in again.alloc]}})
            live.append(again)
        body = ClusterPatch.model_validate({"changes": changes})
        version = service.patch_cluster(cache, "bench", "c", version, body).version
    return patches * batch / (time.perf_counter() - t0)


def rows_for(store: str, cache: ClusterCache, n: int, jobs_body: list[dict[str, Any]], policy: str,
             repeat: int, patches: int, batch: int) -> dict[str, Any]:
    snap = cluster(n)
    t0 = time.perf_counter()
    cache.put(KEY, snap.nodes, snap.running)
    put_s = time.perf_counter() - t0
    read_ms, decide_ms, examined, started = decision_times(cache, jobs_body, policy, repeat)
    rate = patch_rate(cache, list(snap.running), patches, batch)
    cache.delete(KEY)
    return {"store": store, "nodes": n, "running": len(snap.running), "jobs": len(jobs_body),
            "put_s": put_s, "index_read_ms": read_ms, "decide_ms": decide_ms,
            "total_ms": read_ms + decide_ms, "examined": examined,
            "examined_%": 100 * examined / n, "started": started, "patch_changes_per_s": rate}


@cli.command()
def main(nodes: str = "10000,100000", jobs: int = 2000, policy: str = "easy", repeat: int = 3,
         patches: int = 50, batch: int = 20,
         redis_url: Annotated[str | None, typer.Option(
             help="a Redis you give to be wiped (FLUSHDB); default: a redis-server of its own on a "
                  "free port, stopped at the end")] = None,
         json_out: Annotated[Path | None, typer.Option("--json")] = None) -> None:
    _, gen1, gen2 = gc.get_threshold()  # as the service sets it (HPCSCHED_GC_GEN0_THRESHOLD)
    gc.set_threshold(Settings().gc_gen0_threshold, gen1, gen2)
    warm()  # as the service does before it listens: no clock may include numba compiling its loops
    with ExitStack() as stack:
        if redis_url is None:
            server = RedisServer(Path(stack.enter_context(tempfile.TemporaryDirectory()))).start()
            stack.callback(server.stop)
            redis_url = server.url
        rows = measure(redis_url, nodes, jobs, policy, repeat, patches, batch)
    report(rows, policy, jobs, batch, json_out)


def measure(redis_url: str, nodes: str, jobs: int, policy: str, repeat: int, patches: int,
            batch: int) -> list[dict]:  # type: ignore[type-arg]
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    client.flushdb()
    snap = cluster(10)
    jobs_body = request_body(snap, pending(jobs), policy)["pending"]
    rows = []
    sizes = [int(x) for x in nodes.split(",") if x]
    for store, make in (("memory", lambda: ClusterCache(MemoryKv())),
                        ("redis", lambda: ClusterCache(RedisKv(client)))):
        for n in sizes:
            rows.append(rows_for(store, make(), n, jobs_body, policy, repeat, patches, batch))
            console.log(rows[-1])
    client.flushdb()
    return rows


def report(rows: list[dict], policy: str, jobs: int, batch: int,  # type: ignore[type-arg]
           json_out: Path | None) -> None:
    table = Table(title=f"Decisions from the cluster index ({policy}, {jobs} pending jobs), PUT, PATCH "
                        f"({batch} changes each)")
    for c in rows[0]:
        table.add_column(c, justify="left" if c == "store" else "right")
    for r in rows:
        table.add_row(*[f"{v:,.1f}" if isinstance(v, float) else f"{v:,}" if isinstance(v, int) else v
                        for v in r.values()])
    ratios = Table(title="Largest over smallest cluster, decision time (index read + decide)")
    for c in ("store", "sizes", "ratio"):
        ratios.add_column(c)
    for store in ("memory", "redis"):
        mine = [r for r in rows if r["store"] == store]
        ratios.add_row(store, f"{mine[-1]['nodes']:,} / {mine[0]['nodes']:,}",
                       f"{mine[-1]['total_ms'] / mine[0]['total_ms']:.2f}")
    finish(console, [table, ratios], rows, json_out)


if __name__ == "__main__":
    cli()

"""Decision time of POST /schedule: in process and end to end over HTTP, by size and policy.

    python bench/bench_schedule.py                    # the full matrix
    python bench/bench_schedule.py --quick            # 1k/10k nodes x 1k/5k jobs
    python bench/bench_schedule.py --nodes 10000 --jobs 5000 --profile easy
    python bench/bench_schedule.py --nodes 10000 --jobs 5000 --policies easy --workload production

`--workload production` is bench/workload.py's second problem (overlapping partitions, maintenance
windows, exclusive jobs) instead of `cluster` + `pending`.
"""

from __future__ import annotations

import cProfile
import json
import pstats
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import track
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.sched.model import Job, Snapshot  # noqa: E402
from app.sched.registry import POLICIES, decide  # noqa: E402
from bench.common import Server, finish, median_ms  # noqa: E402
from bench.workload import cluster, pending, production, request_body  # noqa: E402

console = Console(width=160)
cli = typer.Typer(add_completion=False)


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def _problem(workload: str, n: int, j: int) -> tuple[Snapshot, list[Job]]:
    return production(n, j) if workload == "production" else (cluster(n), pending(j))


def _row(n: int, j: int, policy: str, repeat: int, server: Server | None,
         workload: str = "bench") -> dict[str, Any]:
    snap, jobs = _problem(workload, n, j)
    decide_ms, d = median_ms(lambda: decide(snap, jobs, policy), repeat)
    row: dict[str, Any] = {"workload": workload, "nodes": n, "running": len(snap.running), "jobs": j,
                           "policy": policy, "decide_ms": decide_ms, "starts": d.summary.started,
                           "backfills": d.summary.backfilled, "reserved": d.summary.reserved}
    if server is not None:
        raw = json.dumps(request_body(snap, jobs, policy)).encode()
        http_ms, out = median_ms(lambda: server.post("/schedule", raw), repeat)
        row.update(http_ms=http_ms, body_mb=len(raw) / 1e6, **{
            f"{k}_ms": v for k, v in out["summary"]["timing_ms"].items() if k != "total"})
    return row


def _table(rows: list[dict[str, Any]]) -> Table:
    cols = ["workload", "nodes", "running", "jobs", "policy", "decide_ms", "http_ms", "body_mb",
            "parse_ms", "validate_ms", "schedule_ms", "starts", "backfills", "reserved"]
    table = Table(title="POST /schedule decision time (median)")
    for c in cols:
        table.add_column(c, justify="left" if c in ("policy", "workload") else "right")
    for r in rows:
        table.add_row(*[f"{r[c]:.1f}" if isinstance(r.get(c), float) else str(r.get(c, "-"))
                        for c in cols])
    return table


@cli.command()
def main(
    nodes: str = typer.Option("1000,10000,50000", help="cluster sizes, comma-separated"),
    jobs: str = typer.Option("1000,5000,20000", help="pending job counts, comma-separated"),
    policies: str = typer.Option(",".join(POLICIES), help="policies, comma-separated"),
    repeat: int = typer.Option(3, help="timed runs per cell (after one warm-up)"),
    http: bool = typer.Option(True, help="also time end to end through uvicorn"),
    quick: bool = typer.Option(False, help="1k/10k nodes x 1k/5k jobs"),
    profile: str = typer.Option("", help="profile this policy on the first size instead"),
    workload: str = typer.Option("bench", help="bench (cluster + pending) or production"),
    json_out: Annotated[Path | None, typer.Option("--json", help="write the rows here")] = None,
) -> None:
    sizes = [(n, j) for n in ([1000, 10000] if quick else _ints(nodes))
             for j in ([1000, 5000] if quick else _ints(jobs))]
    if profile:
        snap, pend = _problem(workload, *sizes[0])
        decide(snap, pend, profile)
        cProfile.runctx("decide(snap, pend, profile)", globals(), locals(), "/tmp/bench.prof")
        pstats.Stats("/tmp/bench.prof").sort_stats("tottime").print_stats(25)
        return
    server = Server() if http else None
    rows = []
    try:
        cells = [(n, j, p) for n, j in sizes for p in policies.split(",")]
        for n, j, p in track(cells, description="benchmarking", console=console):
            rows.append(_row(n, j, p, repeat, server, workload))
    finally:
        if server is not None:
            server.close()
    finish(console, [_table(rows)], rows, json_out)


if __name__ == "__main__":
    cli()

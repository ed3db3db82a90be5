"""Parse and validate of a POST /schedule body, in process: the two first parts of the server's
`summary.timing_ms`, without uvicorn, the client or the decision around them.

    python bench/bench_parse.py                                   # 10k nodes x 5k jobs, both workloads
    python bench/bench_parse.py --nodes 1000,10000 --jobs 5000 --repeat 7

`parse` is what POST /schedule does with the body's bytes: the running jobs scanned into columns
(`app.running_scan`) and the rest parsed by pydantic, strict (on a tree from before the scan, all of it
by pydantic); `validate` is what `service.schedule_data` times as "validate" for an inline snapshot:
the policy's parameters, the cross-field checks and the conversion to the core's records (the running
jobs' columns). Each is timed as wall and as CPU time
of this process (the CPU time is the steadier figure on a shared machine); `--repeat` runs after one
warm-up, median and best shown. The collector runs as in the service: at the threshold it sets
(HPCSCHED_GC_GEN0_THRESHOLD), raised as POST /schedule raises it for a body of this size (a tree from
before that raise runs without it); its passes were a large part of both times.
"""

from __future__ import annotations

import contextlib
import gc
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.convert import check_snapshot, params_from_wire, snapshot_from_wire  # noqa: E402
from app.settings import Settings  # noqa: E402
from bench.common import finish  # noqa: E402
from bench.workload import cluster, pending, production, request_body  # noqa: E402
from schemas.schedule import ScheduleRequest  # noqa: E402

try:  # the collector's wait POST /schedule asks for around a body
    from app.api.routes.schedule import BYTES_PER_OBJECT
    from app.sched.collector import rare_collections

    def _as_served(raw: bytes) -> contextlib.AbstractContextManager[None]:
        return rare_collections(len(raw) // BYTES_PER_OBJECT)
except ImportError:  # a tree from before it
    def _as_served(raw: bytes) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()

try:  # the running jobs scanned into columns, as the route does
    from app.api.routes.schedule import parse_scanned

    def _parse(raw: bytes) -> tuple[ScheduleRequest, Any]:
        req, scanned, _ = parse_scanned(raw)
        return req, scanned

    def _check(req: ScheduleRequest, scanned: Any) -> Any:
        return check_snapshot(req, scanned)
except ImportError:  # a tree from before it: pydantic parses everything
    from app.api.raw_body import parse

    def _parse(raw: bytes) -> tuple[ScheduleRequest, Any]:
        return parse(ScheduleRequest, raw)[0], None

    def _check(req: ScheduleRequest, scanned: Any) -> Any:
        return check_snapshot(req)

console = Console(width=160)
cli = typer.Typer(add_completion=False)


def _body(workload: str, n: int, j: int) -> tuple[bytes, int]:
    snap, jobs = production(n, j) if workload == "production" else (cluster(n), pending(j))
    return json.dumps(request_body(snap, jobs, "easy")).encode(), len(snap.running)


def _once(raw: bytes) -> tuple[float, float, float, float]:
    """(parse wall, parse cpu, validate wall, validate cpu), ms."""
    with _as_served(raw):
        return _timed(raw)  # its objects freed before the collector's threshold comes down


def _timed(raw: bytes) -> tuple[float, float, float, float]:
    w0, c0 = time.perf_counter(), time.process_time()
    req, scanned = _parse(raw)
    w1, c1 = time.perf_counter(), time.process_time()
    params_from_wire(req.policy)
    snapshot_from_wire(req, _check(req, scanned))
    w2, c2 = time.perf_counter(), time.process_time()
    return (w1 - w0) * 1e3, (c1 - c0) * 1e3, (w2 - w1) * 1e3, (c2 - c1) * 1e3


def _row(workload: str, n: int, j: int, repeat: int) -> dict[str, Any]:
    raw, running = _body(workload, n, j)
    gc.collect()
    _once(raw)
    runs = [_once(raw) for _ in range(repeat)]
    row: dict[str, Any] = {"workload": workload, "nodes": n, "running": running, "jobs": j,
                           "body_mb": len(raw) / 1e6}
    for k, name in enumerate(("parse_wall", "parse_cpu", "validate_wall", "validate_cpu")):
        values = [r[k] for r in runs]
        row[f"{name}_ms"] = statistics.median(values)
        row[f"{name}_best_ms"] = min(values)
    row["total_cpu_ms"] = row["parse_cpu_ms"] + row["validate_cpu_ms"]
    return row


def _table(rows: list[dict[str, Any]], repeat: int) -> Table:
    table = Table(title=f"POST /schedule body: parse and validate in process (median of {repeat}; "
                  "best in brackets)")
    for c in ("workload", "nodes", "running", "jobs", "body_mb", "parse_wall_ms", "parse_cpu_ms",
              "validate_wall_ms", "validate_cpu_ms", "total_cpu_ms"):
        table.add_column(c, justify="left" if c == "workload" else "right")
    for r in rows:
        cells = [r["workload"], f"{r['nodes']:,}", f"{r['running']:,}", f"{r['jobs']:,}",
                 f"{r['body_mb']:.1f}"]
        for name in ("parse_wall", "parse_cpu", "validate_wall", "validate_cpu"):
            cells.append(f"{r[f'{name}_ms']:.0f} ({r[f'{name}_best_ms']:.0f})")
        cells.append(f"{r['total_cpu_ms']:.0f}")
        table.add_row(*cells)
    return table


@cli.command()
def main(
    nodes: str = typer.Option("10000", help="cluster sizes, comma-separated"),
    jobs: str = typer.Option("5000", help="pending job counts, comma-separated"),
    workloads: str = typer.Option("bench,production", help="bench/workload.py's problems"),
    repeat: int = typer.Option(5, help="timed runs per cell (after one warm-up)"),
    json_out: Annotated[Path | None, typer.Option("--json", help="write the rows here")] = None,
) -> None:
    threshold = Settings().gc_gen0_threshold
    if threshold:
        gc.set_threshold(threshold, *gc.get_threshold()[1:])
    rows = [_row(w, int(n), int(j), repeat) for w in workloads.split(",")
            for n in nodes.split(",") for j in jobs.split(",")]
    finish(console, [_table(rows, repeat)], rows, json_out)


if __name__ == "__main__":
    cli()

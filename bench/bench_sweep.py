"""A tuning sweep's wall time on 1, 2 and all workers of a local Dask cluster.

    python bench/bench_sweep.py                                  # SDSC-SP2 first 3,000 jobs, 12 settings
    python bench/bench_sweep.py --trace path/x.swf --jobs 5000 --settings 24 --workers 1,2,4

The same settings (the first N of `hpcsched tune`'s default space) are replayed on the same jobs
by a fresh LocalCluster of each size; the wall time counts the sweep (scatter, replays, results
written), not the cluster's start-up, which is shown apart. Each worker is one single-threaded
process, so the speed-up is bounded by the cores this machine really has free.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.sim import tune as t  # noqa: E402
from app.sim.sweep import Task, dask_client, run_sweep  # noqa: E402
from app.sim.swf import read_swf  # noqa: E402
from app.sim.workload import default_machine, workload  # noqa: E402
from bench.common import finish  # noqa: E402

DEFAULT_TRACE = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "traces" / \
    "SDSC-SP2-1998-4.2-cln.swf"
console = Console(width=140)
cli = typer.Typer(add_completion=False)


def sweep_row(workers: int, tasks: list[Task], w: Any, serial_s: float | None) -> dict[str, Any]:
    stamps = {"train": t.fingerprint(w, {})}
    t0 = time.perf_counter()
    with dask_client(None, workers) as client, tempfile.TemporaryDirectory() as tmp:
        client.wait_for_workers(workers)
        started = time.perf_counter()
        results = run_sweep(client, tasks, {"train": w}, stamps, Path(tmp) / "r.jsonl")
        wall = time.perf_counter() - started
    replay_s = sum(r["seconds"] for r in results.values())
    return {"workers": workers, "settings": len(tasks), "jobs": len(w.jobs), "startup_s": started - t0,
            "wall_s": wall, "replay_s_sum": replay_s, "speedup_vs_1": (serial_s / wall) if serial_s else 1.0}


@cli.command()
def main(trace: Annotated[Path, typer.Option(help="an SWF trace")] = DEFAULT_TRACE,
         jobs: Annotated[int, typer.Option(help="first N jobs")] = 3000,
         settings: Annotated[int, typer.Option(help="settings in the sweep")] = 12,
         workers: Annotated[str, typer.Option(help="worker counts; 0 = every core")] = "1,2,0",
         json_out: Annotated[Path | None, typer.Option("--json")] = None) -> None:
    tr = read_swf(trace, limit=jobs)
    w = workload(tr, default_machine(tr))
    tasks = [Task("train", s) for s in t.settings(t.DEFAULT_SPACE)[:settings]]
    rows: list[dict[str, Any]] = []
    for n in (int(x) or (os.cpu_count() or 1) for x in workers.split(",")):
        rows.append(sweep_row(n, tasks, w, rows[0]["wall_s"] if rows else None))
        console.print(f"  {n} workers: {rows[-1]['wall_s']:.1f} s")
    table = Table(title=f"Sweep wall time: {trace.name}, {len(w.jobs)} jobs, {len(tasks)} settings "
                        f"({os.cpu_count()} cores)")
    for c in rows[0]:
        table.add_column(c, justify="right")
    for r in rows:
        table.add_row(*[f"{v:,.2f}" if isinstance(v, float) else str(v) for v in r.values()])
    finish(console, [table], rows, json_out)


if __name__ == "__main__":
    cli()

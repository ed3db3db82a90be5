"""A whole default `hpcsched tune`: wall and CPU time, and how many replays of each kind it made.

    python bench/bench_tune.py                                   # all of SDSC-SP2 (59,705 jobs), 2 workers
    python bench/bench_tune.py --jobs 20000 --prune both         # pruned, then the full grid, in one sitting
    python bench/bench_tune.py --trace ../shared/data/traces/lublin_256.swf --workers 2

Each run is `run_tuning` as the command calls it (the default space, objective, folds and fitting)
with a fresh results file, so nothing is reused. `wall_s` counts the whole run from the trace read to
the report (the cluster's start included; the plots left out); `cpu_s`, this process's CPU time and
its reaped worker processes' (`parent_cpu_s`: this process alone: the reading, the Dask scheduler,
the choice and the report); `cpu_per_worker_s`, that over the workers: about what the run would
take on free cores (on a machine shared with other work the wall time is longer; the serial part is
counted as if shared); `replay_cpu_s`, the replays' own CPU time added up; `load`, the 1-minute load
average before and after. `--prune both` runs the pruned default and `--no-prune` alternately
(`--repeat` times each), and says whether they chose alike.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.cli import load, reading_of  # noqa: E402
from app.sim import tune as t  # noqa: E402
from app.tune_cli import run_tuning  # noqa: E402
from bench.common import finish  # noqa: E402

DEFAULT_TRACE = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "traces" / \
    "SDSC-SP2-1998-4.2-cln.swf"
console = Console(width=160)
cli = typer.Typer(add_completion=False)


def cpu_s() -> tuple[float, float]:
    """CPU time of this process, and of its reaped children (the local cluster's workers, once closed)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime


def run_row(trace: Path, jobs: int | None, folds: int, workers: int, prune: bool) -> dict[str, Any]:
    load_before, t0, c0 = os.getloadavg()[0], time.perf_counter(), cpu_s()
    w = load(trace, None, 1, 0, jobs, reading=reading_of())  # as `hpcsched tune` reads by default
    parts = t.rolling(w, folds)
    with tempfile.TemporaryDirectory() as tmp:
        results = Path(tmp) / "r.jsonl"
        report = run_tuning(parts, t.parse_objective("guarded"), t.settings(t.DEFAULT_SPACE), results,
                            workers=workers, prune=prune)
        lines = [json.loads(line) for line in results.read_text().splitlines()]
    wall, (me, kids) = time.perf_counter() - t0, (b - a for a, b in zip(c0, cpu_s(), strict=True))
    cpu = me + kids
    kinds = {"train": 0, "fit": 0, "held_out": 0}
    for r in lines:  # (fit: the fitted settings, on their own window and on earlier ones)
        kind = "held_out" if r["part"].startswith("held") else "fit" if '"fitted"' in r["key"] else "train"
        kinds[kind] += 1
    return {"prune": prune, "jobs": len(w.jobs), "window_jobs": len(parts[0][0].jobs),
            "settings": report["settings"], "train_replays": kinds["train"],
            "skipped": sum(f["skipped"] for f in report["folds"]), "fit_replays": kinds["fit"],
            "held_out_replays": kinds["held_out"], "wall_s": wall, "cpu_s": cpu,
            "parent_cpu_s": me,
            "replay_cpu_s": sum(r.get("cpu_seconds", 0.0) for r in lines), "cpu_per_worker_s": cpu / workers,
            "load": f"{load_before:.1f} -> {os.getloadavg()[0]:.1f}",
            "choices": [f["chosen"]["label"] for f in report["folds"]],
            "verdict": report["recommendation"]["why"]}


@cli.command()
def main(trace: Annotated[Path, typer.Option(help="an SWF trace")] = DEFAULT_TRACE,
         jobs: Annotated[int | None, typer.Option(help="first N jobs (default: all)")] = None,
         folds: Annotated[int, typer.Option(help="rolling folds")] = 3,
         workers: Annotated[int, typer.Option(help="local Dask workers")] = 2,
         prune: Annotated[str, typer.Option(help="on | off | both")] = "on",
         repeat: Annotated[int, typer.Option(help="runs of each")] = 1,
         json_out: Annotated[Path | None, typer.Option("--json")] = None) -> None:
    modes = {"on": [True], "off": [False], "both": [True, False]}[prune]
    rows = []
    for _ in range(repeat):
        for mode in modes:
            rows.append(run_row(trace, jobs, folds, workers, mode))
            console.print(f"  prune={mode}: {rows[-1]['wall_s']:.0f} s wall, {rows[-1]['cpu_s']:.0f} s CPU")
    if len({tuple(r["choices"]) for r in rows}) > 1:
        console.print("[red]the runs chose differently[/]")
    columns = [c for c in rows[0] if c not in ("choices", "verdict")]
    table = Table(title=f"hpcsched tune, default space: {trace.name}, {rows[0]['jobs']:,} jobs, "
                        f"{folds} folds, {workers} workers ({os.cpu_count()} cores)")
    for c in columns:
        table.add_column(c, justify="right")
    for r in rows:
        table.add_row(*[f"{r[c]:,.1f}" if isinstance(r[c], float) else f"{r[c]:,}" if isinstance(r[c], int)
                        and not isinstance(r[c], bool) else str(r[c]) for c in columns])
    console.print("choices: " + " | ".join(rows[0]["choices"]))
    console.print(rows[0]["verdict"])
    finish(console, [table], rows, json_out)


if __name__ == "__main__":
    cli()

"""A trace slice replayed into Slurm alone and into a bridge-run Slurm, side by side (issue 30).

    python bench/bench_side_by_side.py                 # one pair of runs (~3 min)
    python bench/bench_side_by_side.py --runs 3        # three pairs, the sides alternating first
    python bench/bench_side_by_side.py --first 1200 --factor 1800 --json out.json

The same slice, compression, 8 nodes of 8 CPUs and SchedulerParameters on both sides
(tests/bridges/side_by_side.py, which the slow e2e test tests/bridges/test_slurm_side_by_side.py
also runs): Slurm's own sched/backfill against the job_submit.lua recipe and `hpcsched slurm run`
(subprocess, service in process, `easy`). Waits are Slurm's StartTime - SubmitTime (whole
seconds); bounded slowdown with tau = 10 trace seconds, compressed but at least 1 s; `release`:
submit to the bridge's release, from its event log. Each run's invariants (ran once, no node
over-committed, exclusive alone, dependency, maintenance window, where the service chose) are
checked and shown.
"""

from __future__ import annotations

import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import finish  # noqa: E402

from tests.bridges.side_by_side import (  # noqa: E402
    SCHED,
    Side,
    Slice,
    dependency_broken,
    figures,
    into_window,
    not_alone,
    not_once,
    not_where_chosen,
    over_committed,
    run_side,
)
from tests.bridges.slurm_cluster import missing_binaries  # noqa: E402

console = Console(width=180)


def broken(side: Side) -> str:
    """Which invariants this run broke ('-' when none)."""
    checks = {"once": not_once, "over": over_committed, "exclusive": not_alone,
              "dependency": dependency_broken, "window": into_window,
              **({"where": not_where_chosen} if side.bridged else {})}
    bad = [name for name, check in checks.items() if check(side)]
    return ",".join(bad) if side.drained else ",".join(["drain", *bad])


def one_pair(s: Slice, run: int, bridge_first: bool) -> list[dict[str, Any]]:
    root = Path(tempfile.mkdtemp(prefix="bench-side-by-side-"))
    order = [("bridge", True), ("Slurm alone", False)]
    try:
        rows = []
        for label, bridged in order if bridge_first else order[::-1]:
            side = run_side(label, bridged, s, root / label.replace(" ", "-"))
            rows.append({"run": run, **figures(side, s), "broken": broken(side) or "-",
                         "took_s": side.took_s})
        return sorted(rows, key=lambda r: r["side"] != "Slurm alone")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _table(title: str, rows: list[dict[str, Any]]) -> Table:
    keys = list(dict.fromkeys(k for r in rows for k in r))
    t = Table(*keys, title=title)
    for r in rows:
        t.add_row(*[f"{v:.2f}" if isinstance(v, float) else "-" if v is None else str(v)
                    for v in (r.get(k) for k in keys)])
    return t


def _spread(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per side: the median and range over the runs of each figure."""
    out = []
    for side in dict.fromkeys(r["side"] for r in rows):
        mine = [r for r in rows if r["side"] == side]
        row: dict[str, Any] = {"side": side, "runs": len(mine)}
        for k in ("mean_wait_s", "median_wait_s", "p90_wait_s", "mean_bsld", "makespan_s"):
            v = [r[k] for r in mine]
            row[k] = f"{statistics.median(v):.2f} ({min(v):.2f}-{max(v):.2f})"
        out.append(row)
    return out


def main(runs: Annotated[int, typer.Option(help="pairs of runs (the side run first alternates)")] = 1,
         first: Annotated[int, typer.Option(help="the slice's first job (of those with a runtime)")] = 440,
         count: int = 80,
         factor: Annotated[float, typer.Option(help="trace seconds per test second")] = 1200,
         json_out: Annotated[Path | None, typer.Option("--json")] = None) -> None:
    if missing_binaries():
        console.print(f"skipped: {missing_binaries()} not installed")
        raise typer.Exit(0)
    s = Slice(first=first, count=count, factor=factor)
    rows = [r for i in range(runs) for r in one_pair(s, i + 1, bridge_first=bool(i % 2))]
    title = (f"SDSC SP2 jobs {first}-{first + count - 1} (array: +3 tasks), "
             f"1 trace-hour = {3600 / factor:.1f} s, 8 nodes x 8 CPUs, "
             f"SchedulerParameters={SCHED}; Slurm's records (whole seconds)")
    tables = [_table(title, rows)]
    if runs > 1:
        tables.append(_table("median (range) over the runs", _spread(rows)))
    finish(console, tables, {"slice": s.__dict__, "rows": rows}, json_out)


if __name__ == "__main__":
    typer.run(main)

"""The reading check on whole traces: strict FCFS without backfilling, per window, against an
independent counting FCFS written after RLScheduler's SchedGym conventions (tests/sim/counting_fcfs.py).

    python bench/check_schedgym.py                                   # every shared trace, 10 windows
    python bench/check_schedgym.py --traces path/a.swf --windows 30 --window-size 1024

One row per trace: the windows compared, how many jobs waited differently (0 is the check), the
mean over windows of each side's mean wait, and the same for the old reading (requested processors,
killed at the request, run time -1 left out) to show what the conventions change.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.sched.params import FcfsParams  # noqa: E402
from app.sim.replay import replay  # noqa: E402
from app.sim.swf import read_swf  # noqa: E402
from app.sim.workload import Reading, Workload, default_machine, workload  # noqa: E402
from bench.common import finish  # noqa: E402
from tests.sim.counting_fcfs import fcfs_waits, read_gym  # noqa: E402

DEFAULT_TRACES = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "traces"
OLD = Reading(size="requested", kill_at_request=True, unknown_runtime="drop", zero_runtime="keep")
console = Console(width=160)
cli = typer.Typer(add_completion=False)


def mean_waits(w: Workload, first: int, size: int) -> list[float]:
    part = Workload(w.machine, w.jobs[first:first + size], [])
    start = {r.job.id: r.start for r in replay(part, "fcfs", FcfsParams(time_grain_s=1)).records}
    return [start[j.id] - j.submit for j in part.jobs]


def check(trace: Path, windows: int, size: int, seed: int) -> dict[str, Any]:
    gym, nodes, per_node = read_gym(trace)
    t = read_swf(trace)
    ours, old = workload(t, default_machine(t)), workload(t, default_machine(t), OLD)
    firsts = np.random.default_rng(seed).integers(0, len(gym) - size, size=windows).tolist()
    differ, gym_means, our_means, old_means = 0, [], [], []
    for first in firsts:
        expected = fcfs_waits(gym[first:first + size], nodes, per_node)
        got = mean_waits(ours, first, size)
        differ += sum(a != b for a, b in zip(expected, got, strict=True))
        gym_means.append(np.mean(expected))
        our_means.append(np.mean(got))
        old_means.append(np.mean(mean_waits(old, first, size)))
        console.print(f"  {trace.name} window {first}: {gym_means[-1]:,.1f} vs {our_means[-1]:,.1f}")
    return {"trace": trace.name, "jobs": len(ours.jobs), "same_jobs": [j.number for j in gym] ==
            [int(j.id) for j in ours.jobs], "windows": windows, "window_jobs": size,
            "jobs_waiting_differently": differ, "schedgym_wait": float(np.mean(gym_means)),
            "our_wait": float(np.mean(our_means)), "old_reading_wait": float(np.mean(old_means))}


@cli.command()
def main(traces: Annotated[str, typer.Option(help="comma-separated SWF files")] = "",
         windows: Annotated[int, typer.Option(help="windows per trace")] = 10,
         window_size: Annotated[int, typer.Option(help="jobs per window")] = 1024,
         seed: Annotated[int, typer.Option(help="seed of the window draw")] = 0,
         json_out: Annotated[Path | None, typer.Option("--json")] = None) -> None:
    paths = [Path(p) for p in traces.split(",") if p] or sorted(DEFAULT_TRACES.glob("*.swf*"))
    rows = [check(p, windows, window_size, seed) for p in paths]
    table = Table(title="Strict FCFS mean wait per window (s): counting FCFS after SchedGym vs our replay")
    for c in rows[0]:
        table.add_column(c, justify="left" if c == "trace" else "right")
    for r in rows:
        table.add_row(*[f"{v:,.1f}" if isinstance(v, float) else str(v) for v in r.values()])
    finish(console, [table], rows, json_out)


if __name__ == "__main__":
    cli()

"""Replay speed with exact shortcuts off and on, interleaved in one process (issue 20).

    python bench/bench_replay_speed.py                  # the default cases below, every shortcut
    python bench/bench_replay_speed.py --cases "lublin_256.swf:0:easy,SDSC-SP2-1998-4.2-cln.swf:3000:priority"
    python bench/bench_replay_speed.py --switch shortlist   # only the replay's shortlist
    python bench/bench_replay_speed.py --cases "SDSC-SP2-1998-4.2-cln.swf@43:300:conservative"  # 5,504 nodes
    python bench/bench_replay_speed.py --switch compiled --no-reservations --cases "lublin_256.swf:0:firstfit"

Each case (trace file in the traces folder, first N jobs or 0 for all, policy label) is replayed
`--repeat` times each way, alternating; the table gives the best CPU time of each way as jobs per CPU-
second, their ratio, and whether both ways gave the same schedule (every job's start, end and nodes,
hashed). `--switch` says which shortcuts "off" turns off: `shortlist`, the replay's (`decide` is handed
the whole queue: `app.sim.shortlist`); `fold`, the profile's (a change folded node by node on Python
lists: `FOLD_BY_BATCH`, and no rebuild of many waiting changes at once: `REBUILD_FROM`); `kernels`, the
profile's compiled loops (its questions and folds answered by its numpy code: `COMPILED`); `compiled`,
the replay's compiled twin (`app.sim.compiled`: off, `decide` makes every decision); `all`, every one.
Only `compiled` and `all` let "on" take the compiled replay: the other switches measure the Python
replay's shortcuts. `--only-on` times the "on" way alone (its CPU seconds and schedule digest: whole
logs, where the Python replay would take hours). `--no-reservations` replays both ways as a tuning sweep
does, recording no first reservation (the same schedule; the compiled replay's deep passes may then stop
after the last job that may start). """

from __future__ import annotations

import hashlib
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any
from unittest import mock

import typer
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.cli import policy_params, policy_spec, take_predicted  # noqa: E402
from app.sched import timeline  # noqa: E402
from app.sim import compiled  # noqa: E402
from app.sim.replay import ReplayResult, replay  # noqa: E402
from app.sim.swf import read_swf  # noqa: E402
from app.sim.workload import Workload, default_machine, workload  # noqa: E402
from bench.common import finish  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_TRACES = ROOT.parent / "shared" / "data" / "traces"
CASES = ("lublin_256.swf:0:easy,SDSC-SP2-1998-4.2-cln.swf:10000:easy,HPC2N-2002-2.2-cln.swf.gz:10000:easy,"
         "SDSC-SP2-1998-4.2-cln.swf:3000:priority,SDSC-SP2-1998-4.2-cln.swf:1000:conservative")
console = Console(width=160)
cli = typer.Typer(add_completion=False)


def digest(result: ReplayResult) -> str:
    h = hashlib.sha256()
    for r in sorted(result.records, key=lambda r: (r.start, r.job.id)):
        h.update(f"{r.job.id} {r.start:.6f} {r.end:.6f} {','.join(r.nodes)}\n".encode())
    return h.hexdigest()[:12]


SWITCHES = ("all", "shortlist", "fold", "kernels", "compiled")


def one_way(w: Any, name: str, params: Any, predicted: bool, on: bool,
            switch: str, reservations: bool = True) -> tuple[float, ReplayResult]:
    """CPU seconds of one replay, with the switched shortcuts on or off, and its result."""
    fold_on = on or switch not in ("all", "fold")
    kernels_on = on or switch not in ("all", "kernels")
    with mock.patch.object(timeline, "FOLD_BY_BATCH", fold_on), \
            mock.patch.object(timeline, "COMPILED", kernels_on), \
            mock.patch.object(timeline, "REBUILD_FROM", timeline.REBUILD_FROM if fold_on else 1 << 62):
        t0 = time.process_time()
        result = replay(w, name, params, predict=predicted,
                        shortlist=on or switch not in ("all", "shortlist"),
                        compiled=on and switch in ("all", "compiled"), reservations=reservations)
        return time.process_time() - t0, result


def widened(w: Workload, k: int) -> Workload:
    """The workload on a machine k times larger, each job k times wider: the same load, with as many
    nodes as the largest logs have (CEA-Curie's 5,544, which we do not have, is about SDSC-SP2 x 43)."""
    m = w.machine
    queues = tuple((q, n * k) for q, n in m.queues)
    return replace(w, machine=replace(m, nodes=m.nodes * k, queues=queues),
                   jobs=[replace(j, nodes=j.nodes * k) for j in w.jobs])


def row(folder: Path, case: str, repeat: int, switch: str, reservations: bool,
        only_on: bool = False) -> dict[str, Any]:
    trace, jobs, label = case.split(":", 2)
    trace, _, wider = trace.partition("@")  # trace@k: widened k times
    t = read_swf(folder / trace, limit=int(jobs) or None)
    w = workload(t, default_machine(t))
    if wider:
        w = widened(w, int(wider))
        trace = f"{trace} x{wider}"
    name, pairs = policy_spec(label)
    pairs, predicted = take_predicted(pairs)
    params = policy_params(name, pairs)[1]
    best = {False: float("inf"), True: float("inf")}
    digests: dict[bool, str] = {}
    for _ in range(repeat):
        for on in (True,) if only_on else (False, True):
            seconds, result = one_way(w, name, params, predicted, on, switch, reservations)
            best[on] = min(best[on], seconds)
            digests[on] = digest(result)
    n = len(w.jobs)
    off = None if only_on else n / best[False]
    console.print(f"  {trace} {n} {label}: {off or 0:.0f} -> {n / best[True]:.0f} jobs/s")
    return {"trace": trace, "jobs": n, "nodes": w.machine.nodes, "policy": label,
            "decisions": result.decisions, "off_jobs_per_s": off, "on_jobs_per_s": n / best[True],
            "on_cpu_s": best[True], "ratio": None if only_on else best[False] / best[True],
            "same_schedule": None if only_on else digests[False] == digests[True], "digest": digests[True]}


def _cell(column: str, value: Any) -> str:
    if value is None:
        return "-"
    if column in ("ratio", "on_cpu_s"):
        return f"{value:,.3f}" if column == "on_cpu_s" else f"{value:,.2f}"
    return f"{value:,.0f}" if isinstance(value, float) else str(value)


@cli.command()
def main(
    cases: Annotated[str, typer.Option(help="comma-separated trace[@k]:jobs:policy (@k: k times the nodes, "
                                           "each job k times wider)")] = CASES,
    traces: Annotated[Path, typer.Option(help="folder of the trace files")] = DEFAULT_TRACES,
    repeat: Annotated[int, typer.Option(help="replays each way, alternating; the best counts")] = 2,
    switch: Annotated[str, typer.Option(help=f"what off turns off: {', '.join(SWITCHES)}")] = "all",
    reservations: Annotated[bool, typer.Option(help="record first reservations (without: as a tuning "
                                                    "sweep replays)")] = True,
    only_on: Annotated[bool, typer.Option(help="time the \"on\" way alone (whole logs, where the Python "
                                               "replay would take hours)")] = False,
    json_out: Annotated[Path | None, typer.Option("--json", help="write the rows here")] = None,
) -> None:
    if switch not in SWITCHES:
        raise typer.BadParameter(f"one of {', '.join(SWITCHES)}", param_hint="--switch")
    compiled.warm()  # its loops loaded (or compiled) before any clock starts
    rows = [row(traces, case, repeat, switch, reservations, only_on) for case in cases.split(",") if case]
    table = Table(title=f"Replay speed, shortcuts ({switch}) off -> on (jobs per CPU-second, best each way)")
    for c in rows[0] if rows else []:
        table.add_column(c, justify="left" if c in ("trace", "policy") else "right")
    for r in rows:
        table.add_row(*[_cell(c, v) for c, v in r.items()])
    finish(console, [table], rows, json_out)


if __name__ == "__main__":
    cli()

"""Trace replay: speed (jobs per second) and schedule quality per policy, on SWF traces.

    python bench/bench_sim.py                              # every shared trace, first 10k jobs
    python bench/bench_sim.py --jobs 0 --policies easy     # whole traces (the speed figure of issue 5)
    python bench/bench_sim.py --traces path/a.swf,path/b.swf.gz --policies easy,priority:order=f1

Traces whose jobs name two queues or more also get multi-queue rows: the machine split among the
queues (`partitioned`), `--split-policies` on it (balancing off, static, dynamic), and the first of
them on one shared partition of the same jobs (what balancing tries to get back).
"""

from __future__ import annotations

import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.cli import policy_labels, policy_params, policy_spec, take_predicted  # noqa: E402
from app.sched.params import CommonParams  # noqa: E402
from app.sim.metrics import run_metrics  # noqa: E402
from app.sim.replay import replay  # noqa: E402
from app.sim.swf import read_swf  # noqa: E402
from app.sim.workload import Workload, default_machine, partitioned, workload  # noqa: E402
from bench.common import finish  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_TRACES = ROOT.parent / "shared" / "data" / "traces"
# F1 with EASY backfilling (the literature's strongest heuristic order), then the same told predictions
F1_EASY = 'priority:order=f1;reservation_depth=1;selector="first_fit"'
POLICIES = f"fcfs,firstfit,easy,conservative,memory_backfill,priority,{F1_EASY},{F1_EASY};predicted=true"
SPLIT_POLICIES = 'easy,easy:migration={"mode":"static"},easy:migration={"mode":"dynamic"}'
console = Console(width=180)
cli = typer.Typer(add_completion=False)


def parse(label: str) -> tuple[str, CommonParams, bool]:
    """"priority:order=f1;predicted=true" -> the policy, its parameters, whether run times are predicted."""
    name, pairs = policy_spec(label)
    pairs, predicted = take_predicted(pairs)
    return name, policy_params(name, pairs)[1], predicted


def rows_for(trace: Path, policies: list[str], jobs: int | None,
             split_policies: list[str]) -> list[dict[str, Any]]:
    t = read_swf(trace, limit=jobs)
    w = workload(t, default_machine(t))
    rows = [row(trace, w, "one partition", label) for label in policies]
    if split_policies and len({j.trace_queue for j in w.jobs} - {""}) > 1:
        split = partitioned(w)
        shared = Workload(replace(split.machine, queues=()), split.jobs, split.notes)
        left_out = split.notes[len(w.notes):]  # partitioned's note, when it left jobs out
        said = "; ".join(left_out) or "no job left out"
        console.print(f"  {trace.name} split: {dict(split.machine.queues)}; {said}")
        where = f"split {len(split.machine.queues)} queues"
        rows.append(row(trace, shared, "one partition, same jobs", split_policies[0]))
        rows += [row(trace, split, where, label) for label in split_policies]
    return rows


def row(trace: Path, w: Workload, machine: str, label: str) -> dict[str, Any]:
    name, params, predicted = parse(label)
    t0 = time.perf_counter()
    result = replay(w, name, params, predict=predicted)
    seconds = time.perf_counter() - t0
    m = run_metrics(result, w.machine)
    console.print(f"  {trace.name} {machine} {label}: {len(w.jobs) / seconds:.0f} jobs/s, "
                  f"bsld {m['bsld_mean']:.1f}")
    return {"trace": trace.name, "jobs": len(w.jobs), "nodes": w.machine.nodes, "machine": machine,
            "policy": label, "jobs_per_s": len(w.jobs) / seconds, "wait_mean": m["wait_mean"],
            "bsld_mean": m["bsld_mean"], "utilisation": m["utilisation"], "backfills": m["backfills"],
            "migrated": m["migrated"], "decisions": m["decisions"]}


def window_rows(trace: Path, policies: list[str], windows: int, size: int, seed: int) -> list[dict[str, Any]]:
    """Mean bounded slowdown over `windows` random windows of `size` consecutive jobs (the protocol of
    the RLScheduler paper, SC20): every policy sees the same windows."""
    t = read_swf(trace)
    w = workload(t, default_machine(t))
    rng = np.random.default_rng(seed)
    starts = rng.integers(0, max(1, len(w.jobs) - size), size=windows)
    rows = []
    for label in policies:
        name, params, predicted = parse(label)
        bslds = []
        for s in starts.tolist():
            part = Workload(w.machine, w.jobs[s:s + size], w.notes)
            bslds.append(run_metrics(replay(part, name, params, predict=predicted), w.machine)["bsld_mean"])
        rows.append({"trace": trace.name, "windows": windows, "window_jobs": size, "policy": label,
                     "bsld_mean": float(np.mean(bslds)), "bsld_median": float(np.median(bslds)),
                     "bsld_worst": float(np.max(bslds))})
        console.print(f"  {trace.name} {label}: mean bsld over windows {rows[-1]['bsld_mean']:.1f}")
    return rows


def _table(rows: list[dict[str, Any]]) -> Table:
    cols = list(rows[0]) if rows else []
    table = Table(title="Trace replay (time grain 1 s; estimates: requested time, else the run time)")
    for c in cols:
        table.add_column(c, justify="left" if c in ("trace", "machine", "policy") else "right")
    for r in rows:
        table.add_row(*[f"{v:,.3f}" if c == "utilisation" else f"{v:,.1f}" if isinstance(v, float) else str(v)
                        for c, v in r.items()])
    return table


@cli.command()
def main(
    traces: Annotated[str, typer.Option(help="comma-separated SWF files; default: every trace in the "
                                             "shared data folder")] = "",
    policies: Annotated[str, typer.Option(help="comma-separated; name:k=v;k=v for parameters")] = POLICIES,
    jobs: Annotated[int, typer.Option(help="first N jobs of each trace; 0 = all")] = 10_000,
    windows: Annotated[int, typer.Option(help="instead: mean bsld over this many random windows")] = 0,
    window_size: Annotated[int, typer.Option(help="jobs per window")] = 1024,
    seed: Annotated[int, typer.Option(help="seed of the window draw")] = 0,
    split_policies: Annotated[str, typer.Option(help="on traces with queues, these on the machine split "
                                                     "among them; '' for none")] = SPLIT_POLICIES,
    json_out: Annotated[Path | None, typer.Option("--json", help="write the rows here")] = None,
) -> None:
    paths = [Path(p) for p in traces.split(",") if p] or sorted(DEFAULT_TRACES.glob("*.swf*"))
    if not paths:
        raise typer.BadParameter("no trace given and none found in the shared data folder")
    if windows:
        rows = [r for p in paths for r in window_rows(p, policy_labels(policies), windows, window_size, seed)]
    else:
        rows = [r for p in paths
                for r in rows_for(p, policy_labels(policies), jobs or None, policy_labels(split_policies))]
    finish(console, [_table(rows)], rows, json_out)


if __name__ == "__main__":
    cli()

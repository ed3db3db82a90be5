"""The Slurm bridge's cycle split (read, convert, decide, apply) and Slurm's own backfill beside it.

    python bench/bench_bridge.py                                  # both parts, default sizes
    python bench/bench_bridge.py --nodes 1000 --jobs 5000 --real-nodes 0   # the synthetic part only
    python bench/bench_bridge.py --real-nodes 128 --real-jobs 5000
    python bench/bench_bridge.py --real-nodes 0 --latency-jobs 60          # submit-to-start only

Synthetic part: a 1,000-node, 5,000-pending state in Slurm's JSON, scaled up from a recorded real
read (bench/slurm_state.py); one bridge cycle against a recording runner that counts the commands
it would run. Real part (needs slurm-wlm and munge): a throw-away Slurm of `--real-nodes` slurmd
(tests/bridges/slurm_cluster.py) with `--real-jobs` jobs that Slurm schedules itself; `sdiag`'s
backfill cycle times beside the bridge's read of that state (Slurm's commands, timed) and the
service's decision on it; the read candidates on that state (Slurm's JSON, the compact read and the same
as it was on 2026-11-26, each of its commands alone, slurmctld's own time per job-table RPC,
slurmrestd, slurmrestd's `update_time` poll; medians of 3, `same_view`: all gave the same wire state)
and pins one `scontrol` process each against all fed to one (bench/bridge_latency.py).
Latency part (`--latency-jobs`, 0 to skip): submit-to-start of the same plain `sbatch -n P`
workload under Slurm alone and under the bridge's event-driven loop, Slurm's own records.
"""

from __future__ import annotations

import re
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bridge_latency import apply_candidates, latency_runs, read_candidates  # noqa: E402
from common import finish  # noqa: E402
from slurm_state import synthesize  # noqa: E402

from app.bridges.slurm.apply import plan  # noqa: E402
from app.bridges.slurm.cycle import Bridge, CycleReport  # noqa: E402
from app.bridges.slurm.read import SlurmText  # noqa: E402
from app.bridges.slurm.runner import CommandRunner, RecordedRunner  # noqa: E402
from app.bridges.slurm.service import in_process  # noqa: E402
from app.bridges.slurm.state import BridgeState  # noqa: E402

console = Console(width=180)


Costs = tuple[float, float] | None  # (ms of one scontrol process per command, ms per pin fed to one process)


def synthetic_rows(nodes: int, jobs: int, repeat: int, cmd_ms: Costs) -> list[dict[str, Any]]:
    """Median split of `repeat` cycles on the synthesized state (every comment new: the worst case)."""
    text = synthesize(nodes, jobs, time.time())
    runs = []
    for _ in range(repeat):
        runner = RecordedRunner(text)
        rep = Bridge(runner, in_process(), BridgeState(None), None, False, None).cycle()
        runs.append((rep, runner.commands))
    return [_row("synthesized", nodes, jobs, runs, cmd_ms)]


def _row(label: str, nodes: int, jobs: int, runs: list[tuple[Any, list[list[str]]]],
         cmd_ms: Costs) -> dict[str, Any]:
    phases = ("read", "convert", "decide", "apply")
    med = {k: statistics.median(r.timing_ms[k] for r, _ in runs) for k in phases}
    rep, commands = runs[0]
    kinds = Counter("pin" if "ReqNodeList=" in " ".join(c) else c[1] if c[1] == "release" else "comment"
                    for c in commands)
    row: dict[str, Any] = {"case": label, "nodes": nodes, "pending": jobs}
    row.update({f"{k}_ms": v for k, v in med.items()})
    row["read_ms_each"] = "/".join(f"{r.timing_ms['read']:.0f}" for r, _ in runs)  # the first reads every job
    row.update({"starts": len(rep.response.starts) if rep.response else 0, "pins": kinds["pin"],
                "releases": kinds["release"], "comments": kinds["comment"],
                "apply_real_s": None if cmd_ms is None else _apply_s(commands, kinds["pin"], *cmd_ms)})
    return row


def _apply_s(commands: list[list[str]], pins: int, fork_ms: float, fed_ms: float) -> float:
    """The pins fed to one scontrol process, every other command one process of its own (a
    comment with blanks cannot be fed; releases go 200 jobs a command)."""
    return (pins * fed_ms + (len(commands) - pins) * fork_ms) / 1e3


def _table(title: str, rows: list[dict[str, Any]]) -> Table:
    t = Table(*rows[0].keys(), title=title)
    for r in rows:
        t.add_row(*[_fmt(v) for v in r.values()])
    return t


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:,.1f}"
    return f"{v:,}" if isinstance(v, int) else str(v)


def real_part(n_nodes: int, n_jobs: int, wait_s: float, pins: int) -> tuple[list[dict[str, Any]], Costs]:
    """Slurm's backfill (sdiag) and the bridge's read + decision on the same real state."""
    from tests.bridges.slurm_cluster import LocalSlurm, NodeSpec, PartitionSpec, missing_binaries

    if missing_binaries():
        console.print(f"real part skipped: {missing_binaries()} not installed")
        return [], None
    root = Path(tempfile.mkdtemp(prefix="bench-slurm-"))
    nodes = [NodeSpec(f"c{i:04d}", 64, 256_000) for i in range(n_nodes)]
    parts = [PartitionSpec("batch", tuple(n.name for n in nodes), True)]
    slurm = LocalSlurm(root, nodes, parts, sched_params="bf_interval=10,bf_max_job_test=10000,defer")
    try:
        slurm.start(timeout_s=300)
        _submit(slurm, root, n_jobs)
        time.sleep(wait_s)
        return _measure(slurm, n_nodes, n_jobs, pins)
    finally:
        slurm.stop()
        shutil.rmtree(root, ignore_errors=True)


def _submit(slurm: Any, root: Path, n_jobs: int) -> None:
    """The mix, submitted held (fast), then released in batches so Slurm schedules it itself."""
    shapes = [("-n", "4", "--mem=8000"), ("-N", "2", "-c", "16", "--mem=32000"), ("-n", "1", "--mem=200000"),
              ("-N", "4", "-c", "64", "--mem=64000"), ("-n", "16", "--mem=16000")]

    def sb(i: int) -> str:
        limit = str([10, 30, 60, 240][i % 4])
        return slurm.run("sbatch", "--parsable", "--hold", "-o", "/dev/null", f"--chdir={root}", "-t", limit,
                         *shapes[i % len(shapes)], "--wrap", "sleep 3600").strip()

    t0 = time.perf_counter()
    with ThreadPoolExecutor(8) as ex:
        ids = list(ex.map(sb, range(n_jobs)))
    for i in range(0, len(ids), 500):
        slurm.run("scontrol", "release", ",".join(ids[i:i + 500]))
    console.print(f"submitted {n_jobs} jobs in {time.perf_counter() - t0:.0f} s")


def _measure(slurm: Any, n_nodes: int, n_jobs: int, pins: int) -> tuple[list[dict[str, Any]], Costs]:
    sdiag = _sdiag(slurm.run("sdiag"))
    runner = CommandRunner(str(slurm.conf))
    runs = []
    for _ in range(3):  # dry run: Slurm schedules these jobs itself; the commands are counted only
        bridge = Bridge(runner, in_process(), BridgeState(None), None, dry_run=True)
        rep = bridge.cycle()
        runs.append((rep, _count_commands(rep)))
    cmd_ms, parallel_ms = _command_ms(slurm)
    applied = apply_candidates(slurm, pins)
    costs = (cmd_ms, applied["one_process_per_pin_ms"])
    pending = len(runs[0][0].view.pending) if runs[0][0].view else 0
    row = _row("real Slurm", n_nodes, pending, runs, costs)
    row.update(read_candidates(slurm))
    ms = {k: v / 1e3 for k, v in sdiag.items() if k != "bf_depth" and k != "bf_cycles"}
    row.update({"slurm_bf_last_ms": ms.get("bf_last"), "slurm_bf_mean_ms": ms.get("bf_mean"),
                "slurm_bf_depth": sdiag.get("bf_depth"), "slurm_main_mean_ms": ms.get("main_mean"),
                "bf_cycles": sdiag.get("bf_cycles"), "scontrol_ms": cmd_ms,
                "scontrol_ms_4_at_once": parallel_ms})
    row.update({f"apply_{k}": v for k, v in applied.items()})
    return [row], costs


def _count_commands(rep: Any) -> list[list[str]]:
    """The commands the cycle would have run, applied to a recording runner."""
    if rep.view is None or rep.response is None:
        return []
    counted = RecordedRunner(SlurmText("", "", "", 0.0))
    Bridge(counted, in_process(), BridgeState(None))._apply(plan(rep.response, rep.view), CycleReport())
    return counted.commands


def _sdiag(text: str) -> dict[str, int]:
    """Backfill and main scheduler cycle times (microseconds) from `sdiag`."""
    main, _, bf = text.partition("Backfilling stats")
    out = {}
    for key, section, label in (("main_mean", main, "Mean cycle"), ("bf_last", bf, "Last cycle"),
                                ("bf_mean", bf, "Mean cycle"), ("bf_depth", bf, "Last depth cycle"),
                                ("bf_cycles", bf, "Total cycles")):
        m = re.search(rf"{label}:\s+(\d+)", section)
        if m:
            out[key] = int(m.group(1))
    return out


def _command_ms(slurm: Any, workers: int = 4) -> tuple[float, float]:
    """`scontrol update ... Comment=` on this controller: the median wall time of one call alone
    (what the bridge does), and the wall time per call with `workers` run at once (on a loaded
    2-core host it was slower, 134 against 35 ms, so the bridge sends one at a time)."""
    jobs = slurm.run("squeue", "-h", "-o", "%i", "-t", "PD").split()[:40]
    times = []
    for jid in jobs[:10]:
        t0 = time.perf_counter()
        slurm.run("scontrol", "update", f"JobId={jid}", "Comment=bench")
        times.append((time.perf_counter() - t0) * 1e3)
    t0 = time.perf_counter()
    with ThreadPoolExecutor(workers) as ex:
        list(ex.map(lambda j: slurm.run("scontrol", "update", f"JobId={j}", "Comment=bench4"), jobs))
    parallel = (time.perf_counter() - t0) * 1e3 / max(1, len(jobs))
    return (statistics.median(times) if times else float("nan")), parallel


def main(nodes: int = 1000, jobs: int = 5000, repeat: int = 3,
         real_nodes: Annotated[int, typer.Option(help="slurmd to start; 0 = skip the real part")] = 64,
         real_jobs: int = 2000, wait: Annotated[float, typer.Option(help="seconds of Slurm backfill")] = 35,
         pins: Annotated[int, typer.Option(help="pins timed both ways on the real part")] = 1000,
         latency_jobs: Annotated[int, typer.Option(help="jobs of the submit-to-start run; 0 = skip")] = 40,
         latency_gap: Annotated[float, typer.Option(help="mean seconds between their submissions")] = 1.5,
         latency_sched: Annotated[str, typer.Option(help="SchedulerParameters of both latency clusters")] =
         "bf_interval=5,batch_sched_delay=0",
         json_out: Annotated[Path | None, typer.Option("--json")] = None) -> None:
    tables, result = [], {}
    real, costs = ([], None) if real_nodes == 0 else real_part(real_nodes, real_jobs, wait, pins)
    if real:
        tables.append(_table("the bridge on a real Slurm state, beside Slurm's own backfill (sdiag)", real))
        result["real"] = real
    synth = synthetic_rows(nodes, jobs, repeat, costs)
    title = ("one bridge cycle on a synthesized Slurm state (apply against a recording runner; apply_real_s "
             "= pins fed to one scontrol + other commands one process each, at the real part's times)")
    tables.insert(0, _table(title, synth))
    result["synthetic"] = synth
    if latency_jobs:
        lat = latency_runs(latency_jobs, latency_gap, latency_sched)
        if lat:
            title = (f"submit-to-start, {latency_jobs} plain sbatch -n P jobs on 4 x 8 CPUs, "
                     f"SchedulerParameters={latency_sched}, Slurm's own records (whole seconds)")
            tables.append(_table(title, lat))
            result["latency"] = lat
    finish(console, tables, result, json_out)


if __name__ == "__main__":
    typer.run(main)

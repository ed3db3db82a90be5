"""`hpcsched`: replay a job trace through the scheduling policies, from the command line.

    hpcsched simulate TRACE --policy easy [--param k=v]... [--nodes N --cores-per-node C] [--jobs N]
    hpcsched compare TRACE --policies fcfs,easy,conservative [--plots DIR]
    hpcsched compare TRACE --split-queues --policies 'easy,easy:migration={"mode":"static"}'
    hpcsched tune TRACE [--objective bsld|wait|mix:bsld=0.7,wait=0.3|maxwait-cap:S] [--scheduler ADDR]
    hpcsched slurm run|once|explain ...   drive a Slurm cluster (hpcsched slurm --help)

A policy in --policies may carry its own parameters: `name:k=v;k=v` (v as JSON), on top of --param;
`predicted=true` among them (or --predict-runtimes for all) tells the scheduler predicted run times.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import TypeAdapter, ValidationError
from rich.console import Group
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from app.bridges.slurm.cli import slurm_cli
from app.cli_common import Kill, RaiseToRun, Size, UnknownRun, ZeroRun
from app.convert import params_from_wire
from app.sched.params import CommonParams
from app.sim.correction import checked
from app.sim.metrics import per_queue, run_metrics
from app.sim.replay import ReplayResult, replay
from app.sim.swf import SwfError, read_swf
from app.sim.workload import Machine, Reading, Workload, default_machine, partitioned, workload
from app.terminal import console as terminal
from app.terminal import tables
from schemas.policies import PolicySpec

cli = typer.Typer(add_completion=False, help=__doc__)
cli.add_typer(slurm_cli, name="slurm")
console = terminal()
SPEC = TypeAdapter(PolicySpec)
SIM_GRAIN_S = 1  # the replay's default time grain: exact times, as in the literature's simulators

Trace = Annotated[Path, typer.Argument(help="an SWF trace, plain or .gz", exists=True, dir_okay=False)]
Params = Annotated[list[str] | None, typer.Option("--param", help="policy parameter k=v (v as JSON)")]
Nodes = Annotated[int | None, typer.Option(help="nodes; default: the trace's MaxProcs / cores-per-node")]
Cores = Annotated[int, typer.Option(help="cores per node (1 = the classic processor-count model)")]
Memory = Annotated[int, typer.Option(help="memory per node in MiB; 0 = memory not modelled")]
Jobs = Annotated[int | None, typer.Option(help="replay only the first N jobs")]
JsonOut = Annotated[Path, typer.Option("--json", help="write the metrics here")]
Policy = Annotated[str, typer.Option(help="policy name")]
PolicyList = Annotated[str, typer.Option(help="comma-separated policy names")]
PlotDir = Annotated[Path, typer.Option(help="folder for the PNG plots")]
Predict = Annotated[bool, typer.Option(help="tell the scheduler predicted run times (the request scaled by "
                                            "the user's last two run/request ratios, at most the request) "
                                            "instead of the requests")]
Correction = Annotated[str, typer.Option(help="with predicted run times, what a job still running when its "
                                              "prediction is up is told: request | stepwise (its told time "
                                              "plus 1 min, 5 min, 15 min, ... 100 h, at most the request)")]
Split = Annotated[bool, typer.Option(help="split the nodes among the trace's queues (median job width "
                                          "each, the rest by share of the work)")]
QueueNodes = Annotated[str | None, typer.Option(help="nodes per trace queue, e.g. normal=64,low=40,high=24 "
                                                     "(implies --split-queues)")]
Reservations = Annotated[bool, typer.Option(help="record each job's first reservation (the reserved column); "
                                                 "without, the schedule is the same, and firstfit replays "
                                                 "many times faster")]


def policy_params(name: str, pairs: list[str] | None) -> tuple[str, CommonParams]:
    """Validate k=v pairs through the same wire model POST /schedule uses."""
    params: dict[str, Any] = {"time_grain_s": SIM_GRAIN_S}
    for pair in pairs or []:
        key, sep, raw = pair.partition("=")
        if not sep:
            raise typer.BadParameter(f"{pair!r}: expected key=value", param_hint="--param")
        try:
            params[key] = json.loads(raw)
        except json.JSONDecodeError:
            params[key] = raw
    try:
        spec = SPEC.validate_python({"name": name, "params": params})
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise typer.BadParameter(problems, param_hint="--policy/--param") from exc
    return params_from_wire(spec)


def policy_spec(text: str) -> tuple[str, list[str]]:
    """"priority:order=f1;age_weight=2" -> ("priority", ["order=f1", "age_weight=2"])."""
    name, _, rest = text.partition(":")
    return name, [p for p in rest.split(";") if p]


def take_predicted(pairs: list[str]) -> tuple[list[str], bool]:
    """The replay's own `predicted=true|false` taken out of a policy's k=v pairs."""
    rest, predicted = [], False
    for pair in pairs:
        key, _, raw = pair.partition("=")
        if key.strip() == "predicted":
            if raw.strip().lower() not in ("true", "false"):
                raise typer.BadParameter(f"{pair!r}: predicted is true or false", param_hint="--policies")
            predicted = raw.strip().lower() == "true"
        else:
            rest.append(pair)
    return rest, predicted


def reading_of(size: str = "larger", kill_at_request: bool = False, unknown_runtime: str = "ten_seconds",
               zero_runtime: str = "drop", raise_to_run: bool = False) -> Reading:
    """The log reading the options ask for (the conventional one by default)."""
    return Reading(size, kill_at_request, raise_to_run, unknown_runtime, zero_runtime)


def load(trace: Path, nodes: int | None, cores: int, memory: int, jobs: int | None,
         split: bool = False, queue_nodes: str | None = None, reading: Reading | None = None) -> Workload:
    try:
        t = read_swf(trace, limit=jobs)
    except SwfError as exc:
        raise typer.BadParameter(f"{trace.name}: {exc}", param_hint="TRACE") from exc
    machine = Machine(nodes, cores, memory) if nodes else default_machine(t, cores, memory)
    try:
        w = workload(t, machine, reading or Reading())
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--size/--unknown-runtime/--zero-runtime") from exc
    if not (split or queue_nodes):
        return w
    try:
        return partitioned(w, _queue_nodes(queue_nodes) if queue_nodes else None)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--split-queues/--queue-nodes") from exc


def policy_labels(policies: str) -> list[str]:
    """Split on the commas outside JSON braces: 'easy,easy:migration={"mode":"dynamic","weight":2}'."""
    out, depth, cur = [], 0, ""
    for ch in policies:
        depth += {"{": 1, "}": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    return [p for p in [*out, cur] if p]


def _queue_nodes(text: str) -> dict[str, int]:
    """"normal=64,low=40" -> {"normal": 64, "low": 40}."""
    out: dict[str, int] = {}
    for pair in text.split(","):
        name, sep, count = (part.strip() for part in pair.partition("="))
        if not name or not sep or not count.isdigit():
            raise typer.BadParameter(f"{pair!r}: expected queue=nodes", param_hint="--queue-nodes")
        if name in out:
            raise typer.BadParameter(f"queue {name!r} is given twice", param_hint="--queue-nodes")
        out[name] = int(count)
    return out


def checked_correction(correction: str) -> str:
    try:
        return checked(correction)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--correction") from exc


def run(w: Workload, name: str, params: CommonParams, predict: bool = False,
        reservations: bool = True, correction: str = "request") -> tuple[ReplayResult, float]:
    columns = (TextColumn(f"[bold]{name}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task(name, total=len(w.jobs))
        t0 = time.perf_counter()
        result = replay(w, name, params, progress=lambda n: bar.advance(task, n), predict=predict,
                        reservations=reservations, correction=correction)
        return result, time.perf_counter() - t0


METRIC_COLUMNS = ("jobs", "wait_mean", "wait_p50", "wait_p99", "bsld_mean", "bsld_p99",
                  "turnaround_mean", "utilisation", "makespan", "backfills", "reserved", "migrated",
                  "decisions")


def table(title: str, rows: dict[str, dict[str, float]], first: str, width: int | None = None) -> Group:
    """The metrics of each row, in as many tables as it takes to fit the terminal (or `width`)."""
    cells = [(name, [_fmt(c, m.get(c)) for c in METRIC_COLUMNS]) for name, m in rows.items()]
    return Group(*tables(title, first, METRIC_COLUMNS, cells, width or console.width))


def _fmt(col: str, v: float | None) -> str:
    if v is None:
        return "-"
    if col == "utilisation":
        return f"{v:.3f}"
    counts = ("jobs", "backfills", "reserved", "migrated", "decisions")
    return f"{v:,.0f}" if col in counts or v >= 100 else f"{v:.2f}"


def report(w: Workload, results: dict[str, tuple[ReplayResult, float]]) -> dict[str, Any]:
    machine = {"nodes": w.machine.nodes, "cores_per_node": w.machine.cores_per_node,
               "mem_mib_per_node": w.machine.mem_mib_per_node, "queue_nodes": dict(w.machine.queues)}
    out: dict[str, Any] = {"machine": machine, "notes": w.notes, "policies": {}}
    for name, (r, seconds) in results.items():
        m = run_metrics(r, w.machine)
        m["jobs_per_s"] = len(w.jobs) / seconds if seconds else 0.0
        out["policies"][name] = {"metrics": m, "per_queue": per_queue(r), "notes": r.notes}
    return out


@cli.command()
def simulate(trace: Trace, policy: Policy = "easy", param: Params = None, nodes: Nodes = None,
             cores_per_node: Cores = 1, mem_mib_per_node: Memory = 0, jobs: Jobs = None,
             split_queues: Split = False, queue_nodes: QueueNodes = None, predict_runtimes: Predict = False,
             correction: Correction = "request",
             size: Size = "larger", kill_at_request: Kill = False, raise_to_run: RaiseToRun = False,
             unknown_runtime: UnknownRun = "ten_seconds", zero_runtime: ZeroRun = "drop",
             reservations: Reservations = True, json_out: JsonOut = Path("simulate.json")) -> None:
    """Replay TRACE under one policy; print its metrics (overall and per trace queue) and write JSON."""
    name, params = policy_params(policy, param)
    correction = checked_correction(correction)
    reading = reading_of(size, kill_at_request, unknown_runtime, zero_runtime, raise_to_run)
    w = load(trace, nodes, cores_per_node, mem_mib_per_node, jobs, split_queues, queue_nodes, reading)
    result, seconds = run(w, name, params, predict_runtimes, reservations, correction)
    out = report(w, {name: (result, seconds)})
    m = out["policies"][name]
    console.print(table(f"{trace.name}: {len(w.jobs)} jobs on {w.machine.nodes} nodes × "
                        f"{w.machine.cores_per_node} cores", {name: m["metrics"]}, "policy"))
    if len(m["per_queue"]) > 1:
        console.print(table("per trace queue", m["per_queue"], "queue"))
    for note in result.notes:
        console.print(f"[yellow]note:[/] {note}")
    console.print(f"replayed at {m['metrics']['jobs_per_s']:,.0f} jobs/s; wrote {json_out}")
    json_out.write_text(json.dumps(out, indent=1))


@cli.command()
def compare(trace: Trace, policies: PolicyList = "fcfs,easy,conservative", param: Params = None,
            nodes: Nodes = None, cores_per_node: Cores = 1, mem_mib_per_node: Memory = 0, jobs: Jobs = None,
            split_queues: Split = False, queue_nodes: QueueNodes = None, predict_runtimes: Predict = False,
            correction: Correction = "request", size: Size = "larger", kill_at_request: Kill = False,
            raise_to_run: RaiseToRun = False,
            unknown_runtime: UnknownRun = "ten_seconds", zero_runtime: ZeroRun = "drop",
            reservations: Reservations = True, plots: PlotDir = Path("plots"),
            json_out: JsonOut = Path("compare.json")) -> None:
    """Replay TRACE under several policies (the same --param for all); one table, JSON, and plots."""
    correction = checked_correction(correction)
    chosen = []
    for label in policy_labels(policies):
        name, pairs = policy_spec(label)
        pairs, predicted = take_predicted(pairs)
        chosen.append((label, *policy_params(name, pairs + (param or [])), predicted or predict_runtimes))
    reading = reading_of(size, kill_at_request, unknown_runtime, zero_runtime, raise_to_run)
    w = load(trace, nodes, cores_per_node, mem_mib_per_node, jobs, split_queues, queue_nodes, reading)
    results = {label: run(w, name, params, predicted, reservations, correction)
               for label, name, params, predicted in chosen}
    out = report(w, results)
    console.print(table(f"{trace.name}: {len(w.jobs)} jobs on {w.machine.nodes} nodes × "
                        f"{w.machine.cores_per_node} cores",
                        {k: v["metrics"] for k, v in out["policies"].items()}, "policy"))
    for note in w.notes:
        console.print(f"[yellow]note:[/] {note}")
    from app.sim import plots as draw  # matplotlib only when plotting

    plots.mkdir(parents=True, exist_ok=True)
    replays = {k: r for k, (r, _) in results.items()}
    files = [draw.wait_cdf(replays, plots / "wait_cdf.png"),
             draw.utilisation(replays, w.machine, plots / "utilisation.png")]
    json_out.write_text(json.dumps(out, indent=1))
    console.print(f"wrote {json_out}, " + ", ".join(map(str, files)))


from app.tune_cli import tune  # noqa: E402  (the command lives in its own module)

cli.command()(tune)


def main() -> None:
    cli()


if __name__ == "__main__":
    main()

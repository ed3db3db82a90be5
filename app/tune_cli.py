"""`hpcsched tune TRACE`: choose a policy on the first part of a trace, report it on the rest.

    hpcsched tune trace.swf                                    # bsld, half for training, all cores
    hpcsched tune trace.swf --objective mix:bsld=0.7,wait=0.3 --train-fraction 0.6
    hpcsched tune trace.swf --objective maxwait-cap:172800 --space 'order=f1,sjf;reservation_depth=1,2'
    hpcsched tune trace.swf --scheduler tcp://head:8786        # an existing Dask cluster

Writes the results of every replay as they come (`--results`, JSONL: a rerun resumes from it), the
report (`--json`) and plots (`--plots`), and ends with the `policy` block for POST /schedule.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import ValidationError
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from app.cli_common import Kill, RaiseToRun, Size, UnknownRun, ZeroRun
from app.sim import tune as t
from app.sim.sweep import Task, dask_client, run_sweep
from app.sim.workload import Workload
from app.terminal import console as terminal
from app.terminal import tables

console = terminal()
HELD_OUT_COLUMNS = ("bsld", "wait", "utilisation", "bsld_worst1", "wait_worst1", "wait_max")

Objective = Annotated[str, typer.Option(help="bsld | wait | mix:bsld=0.7,wait=0.3 | maxwait-cap:SECONDS")]
TrainFraction = Annotated[float, typer.Option(help="share of the jobs (the first ones) to choose on")]
Space = Annotated[str, typer.Option(help="replace dimensions of the search space: 'order=fcfs,f1;"
                                         "reservation_depth=1,2;predicted=false' (any priority parameter)")]
Workers = Annotated[int | None, typer.Option(help="local Dask worker processes (default: every core)")]
Scheduler = Annotated[str | None, typer.Option(help="address of an existing Dask scheduler, e.g. "
                                                    "tcp://head:8786 (dask-jobqueue, dask-scheduler)")]
Results = Annotated[Path, typer.Option(help="every replay's result, one JSON line each; a rerun resumes")]
JsonOut = Annotated[Path, typer.Option("--json", help="the report")]
PlotDir = Annotated[Path, typer.Option(help="folder for the PNG plots")]


Trace = Annotated[Path, typer.Argument(help="an SWF trace, plain or .gz", exists=True, dir_okay=False)]


def tune(trace: Trace,
         objective: Objective = "bsld", train_fraction: TrainFraction = 0.5, space: Space = "",
         workers: Workers = None, scheduler: Scheduler = None,
         jobs: Annotated[int | None, typer.Option(help="only the first N jobs of the trace")] = None,
         nodes: Annotated[int | None, typer.Option(help="nodes; default: the trace's MaxProcs")] = None,
         cores_per_node: Annotated[int, typer.Option(help="cores per node")] = 1,
         size: Size = "larger", kill_at_request: Kill = False, raise_to_run: RaiseToRun = False,
         unknown_runtime: UnknownRun = "ten_seconds", zero_runtime: ZeroRun = "drop",
         results: Results = Path("tune.jsonl"), json_out: JsonOut = Path("tune.json"),
         plots: PlotDir = Path("tune-plots")) -> None:
    """Search policy settings on the first part of TRACE; report the choice on the part it did not see."""
    from app import cli as base  # the shared trace loading (imported here: app.cli registers this command)

    goal = _checked(lambda: t.parse_objective(objective), "--objective")
    candidates = _checked(lambda: t.settings(t.parse_space(space)), "--space")
    for s in candidates:
        _checked(lambda s=s: t.params_of(s.policy), "--space")
    reading = base.reading_of(size, kill_at_request, unknown_runtime, zero_runtime, raise_to_run)
    w = base.load(trace, nodes, cores_per_node, 0, jobs, reading=reading)
    train, held = _checked(lambda: t.split(w, train_fraction), "--train-fraction")
    report = run_tuning(train, held, goal, candidates, results, scheduler, workers)
    report |= {"trace": trace.name, "jobs": len(w.jobs), "notes": w.notes, "train_fraction": train_fraction}
    show(report)
    json_out.write_text(json.dumps(report, indent=1))
    files = draw(report, plots)
    console.print(f"wrote {json_out}, {results}, " + ", ".join(map(str, files)))
    console.print("[bold]policy block for POST /schedule:[/]")
    console.print_json(json.dumps({"policy": report["policy"]}))
    if report["chosen"]["predicted"]:
        console.print("[yellow]the choice tells the scheduler predicted run times:[/] send the prediction as "
                      "each job's walltime_s (the request scaled by the user's last two run/request ratios)")


def _checked(fn: Any, hint: str) -> Any:
    try:
        return fn()
    except (ValueError, ValidationError) as exc:
        raise typer.BadParameter(str(exc), param_hint=hint) from exc


def run_tuning(train: Workload, held: Workload, goal: t.Objective, candidates: list[t.Setting],
               results: Path, scheduler: str | None = None, workers: int | None = None) -> dict[str, Any]:
    """The sweep on `train`, the choice from it alone, then the chosen setting and the baselines on
    `held`; as the report's dictionary."""
    easy, firstfit = t.Setting(t.EASY), t.Setting(t.FIRSTFIT)
    pool = list({s.key: s for s in [easy, firstfit, *candidates]}.values())
    stamps = {"train": t.fingerprint(train, {}), "held_out": t.fingerprint(held, {})}
    with dask_client(scheduler, workers) as client:
        got = _swept(client, [Task("train", s) for s in pool], {"train": train}, stamps, results, "train")
        train_m = {k: rec["measures"] for (_, k), rec in got.items()}
        chosen_key = t.choose(goal, train_m, easy.key)  # the held-out part is not replayed yet
        chosen = next(s for s in pool if s.key == chosen_key)
        finals = list({s.key: s for s in (chosen, easy, firstfit)}.values())
        tested = _swept(client, [Task("held_out", s, detail=True) for s in finals], {"held_out": held},
                        stamps, results, "held out")
    return _report(goal, pool, got, tested, chosen, easy, firstfit, train_m)


def _swept(client: Any, tasks: list[Task], workloads: dict[str, Workload], stamps: dict[str, str],
           results: Path, what: str) -> dict[tuple[str, str], Any]:
    columns = (TextColumn(f"[bold]{what}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
               TextColumn("{task.description}"))
    with Progress(*columns, console=console, transient=False) as bar:
        task_id = bar.add_task("", total=len(tasks))

        def advance(task: Task, rec: dict[str, Any], reused: bool) -> None:
            said = "from an earlier run" if reused else f"{rec['seconds']:.1f} s"
            bar.update(task_id, advance=1, description=f"{task.setting.label()} ({said})")

        return run_sweep(client, tasks, workloads, stamps, results, advance)


def _report(goal: t.Objective, pool: list[t.Setting], got: dict[tuple[str, str], Any],
            tested: dict[tuple[str, str], Any], chosen: t.Setting, easy: t.Setting, firstfit: t.Setting,
            train_m: dict[str, dict[str, float]]) -> dict[str, Any]:
    base = train_m[easy.key]
    rows = sorted(({"label": s.label(), "key": s.key, "score": t.score(goal, train_m[s.key], base),
                    "seconds": got[("train", s.key)]["seconds"], **train_m[s.key]} for s in pool),
                  key=lambda r: (r["score"], r["key"]))
    held = {name: tested[("held_out", s.key)] for name, s in
            (("chosen", chosen), ("easy", easy), ("firstfit", firstfit))}
    return {
        "objective": goal.describe(), "settings": len(pool),
        "chosen": {"label": chosen.label(), "policy": dict(chosen.policy), "predicted": chosen.predicted},
        "train": [{k: (None if isinstance(v, float) and math.isinf(v) else v) for k, v in r.items()}
                  for r in rows],
        "held_out": {name: rec["measures"] for name, rec in held.items()},
        "held_out_waits": {name: rec["waits"] for name, rec in held.items()},
        "gain_vs_easy": {"measure": t.main_measure(goal), "train": t.gain(goal, train_m[chosen.key], base),
                         "held_out": t.gain(goal, held["chosen"]["measures"], held["easy"]["measures"])},
        "policy": dict(chosen.policy),
    }


def show(report: dict[str, Any], top: int = 10) -> None:
    columns = ("score", "bsld", "wait", "utilisation", "bsld_worst1", "wait_max", "seconds")
    tried = [(r["label"], [_fmt(r.get(c)) for c in columns]) for r in report["train"][:top]]
    names = {"chosen": f"chosen: {report['chosen']['label']}", "easy": "EASY", "firstfit": "FirstFit"}
    held = [(names[name], [_fmt(m[c]) for c in HELD_OUT_COLUMNS]) for name, m in report["held_out"].items()]
    console.print(*tables(f"train: {report['settings']} settings, best {top} by {report['objective']}",
                          "setting", columns, tried, console.width),
                  *tables("held-out part (never used to choose)", "policy", HELD_OUT_COLUMNS, held,
                          console.width))
    g = report["gain_vs_easy"]
    console.print(f"the choice against EASY ({g['measure']}): {_lower(g['train'])} on the train part, "
                  f"[bold]{_lower(g['held_out'])} on the held-out part[/]")
    for note in report.get("notes", []):
        console.print(f"[yellow]note:[/] {note}")


def _lower(share: float) -> str:
    return f"{share:.1%} lower" if share >= 0 else f"{-share:.1%} higher"


def _fmt(v: Any) -> str:
    if v is None or (isinstance(v, float) and math.isinf(v)):
        return "-"
    return f"{v:.3f}" if abs(v) < 10 else f"{v:,.0f}"


def draw(report: dict[str, Any], folder: Path) -> list[Path]:
    """The held-out waits' CDF, the held-out measures relative to EASY, and the train scores."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    folder.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(8, 5))
    for name, waits in report["held_out_waits"].items():
        x = np.sort(np.maximum(waits, 1.0))
        ax.step(x, np.arange(1, x.size + 1) / max(x.size, 1), where="post", label=name)
    ax.set(xscale="log", xlabel="wait (s)", ylabel="share of held-out jobs waiting at most this long")
    files = [_save(fig, ax, folder / "held_out_wait_cdf.png")]
    fig, ax = plt.subplots(figsize=(9, 4))
    easy = report["held_out"]["easy"]
    for i, name in enumerate(report["held_out"]):
        ratios = [report["held_out"][name][c] / easy[c] if easy[c] else 1.0 for c in HELD_OUT_COLUMNS]
        ax.bar(np.arange(len(HELD_OUT_COLUMNS)) + 0.27 * (i - 1), ratios, 0.27, label=name)
    ax.set_xticks(range(len(HELD_OUT_COLUMNS)), HELD_OUT_COLUMNS)
    ax.set(ylabel="relative to EASY (held out)")
    files.append(_save(fig, ax, folder / "held_out_vs_easy.png"))
    fig, ax = plt.subplots(figsize=(9, 4))
    scores = [r["score"] for r in report["train"] if r["score"] is not None]
    ax.bar(range(len(scores)), scores)
    ax.set(xlabel="settings, best first", ylabel=f"train score ({report['objective']})")
    files.append(_save(fig, ax, folder / "train_scores.png"))
    return files


def _save(fig: Any, ax: Any, path: Path) -> Path:
    import matplotlib.pyplot as plt

    ax.grid(True, alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path

"""`hpcsched tune TRACE`: choose a policy on one window of a trace, judge it on the next, fold after fold.

    hpcsched tune trace.swf                                    # guarded bsld, 3 rolling folds, all cores
    hpcsched tune trace.swf --objective guarded:max=3,p99=1.2 --folds 5
    hpcsched tune trace.swf --objective guarded:p99=0.9        # choose with a shorter tail than EASY's
    hpcsched tune trace.swf --objective maxwait-cap:172800 --space 'order=f1,sjf;reservation_depth=1,2'
    hpcsched tune trace.swf --scheduler tcp://head:8786        # an existing Dask cluster

Writes the results of every replay as they come (`--results`, JSONL: a rerun resumes from it), the
report (`--json`) and plots (`--plots`), and ends with the `policy` block for POST /schedule: the
latest fold's choice when every fold's choice beat EASY on its held-out window, else EASY's.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Iterable
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
HELD_OUT_COLUMNS = ("bsld", "wait", "wait_p99", "wait_max", "utilisation", "bsld_worst1")

Objective = Annotated[str, typer.Option(help="guarded (lowest mean bsld, longest wait <= 2x and p99 wait <= "
                                             "1x EASY's) | guarded:max=F,p99=F (F > 0; under 1, a margin "
                                             "on the train window only) | bsld | wait | "
                                             "mix:bsld=0.7,wait=0.3 | maxwait-cap:SECONDS")]
Folds = Annotated[int, typer.Option(help="rolling folds: the trace cut into FOLDS + 1 windows in submit "
                                         "order; fold i chooses on window i and is judged on window i + 1")]
Space = Annotated[str, typer.Option(help="replace dimensions of the search space: 'order=fcfs,f1;"
                                         "reservation_depth=1,2;predicted=false' (any priority parameter; "
                                         "correction=request,stepwise for predicted run times)")]
Workers = Annotated[int | None, typer.Option(help="local Dask worker processes (default: every core)")]
Scheduler = Annotated[str | None, typer.Option(help="address of an existing Dask scheduler, e.g. "
                                                    "tcp://head:8786 (dask-jobqueue, dask-scheduler)")]
Results = Annotated[Path, typer.Option(help="every replay's result, one JSON line each; a rerun resumes")]
JsonOut = Annotated[Path, typer.Option("--json", help="the report")]
PlotDir = Annotated[Path, typer.Option(help="folder for the PNG plots")]
FitBudget = Annotated[int, typer.Option(min=0, help="replays per train window spent fitting the weights of "
                                                    "order=fitted (random starts, then a pattern search); "
                                                    "0: no fitted setting")]
Margin = Annotated[float, typer.Option(min=0.0, max=1.0, help="to be recommended, every fold's choice must "
                                                              "beat EASY's mean bsld on its train window by "
                                                              "at least this share")]

GuardWindows = Annotated[str, typer.Option(help="where a setting's guard must have held to be chosen: "
                                                "all (every train window so far, the default) | latest (its "
                                                "fold's train window only)")]

Prune = Annotated[bool, typer.Option(help="under --guard-windows all, replay a setting on the train windows "
                                          "only up to the first where it broke the guard (no later fold can "
                                          "choose it; the same choices); --no-prune replays every setting on "
                                          "every train window (full train tables)")]

Trace = Annotated[Path, typer.Argument(help="an SWF trace, plain or .gz", exists=True, dir_okay=False)]


def tune(trace: Trace,
         objective: Objective = "guarded", folds: Folds = 3, space: Space = "",
         fit_budget: FitBudget = t.FIT_BUDGET, margin: Margin = t.MARGIN,
         guard_windows: GuardWindows = "all", prune: Prune = True, workers: Workers = None,
         scheduler: Scheduler = None,
         jobs: Annotated[int | None, typer.Option(help="only the first N jobs of the trace")] = None,
         nodes: Annotated[int | None, typer.Option(help="nodes; default: the trace's MaxProcs")] = None,
         cores_per_node: Annotated[int, typer.Option(help="cores per node")] = 1,
         size: Size = "larger", kill_at_request: Kill = False, raise_to_run: RaiseToRun = False,
         unknown_runtime: UnknownRun = "ten_seconds", zero_runtime: ZeroRun = "drop",
         results: Results = Path("tune.jsonl"), json_out: JsonOut = Path("tune.json"),
         plots: PlotDir = Path("tune-plots")) -> None:
    """Search policy settings on each window of TRACE; judge each choice on the next window."""
    from app import cli as base  # the shared trace loading (imported here: app.cli registers this command)

    goal = _checked(lambda: t.parse_objective(objective), "--objective")
    _checked(lambda: t.check_guard_windows(guard_windows), "--guard-windows")
    candidates = _checked(lambda: t.settings(t.parse_space(space)), "--space")
    for s in candidates:
        _checked(lambda s=s: t.params_of(s.policy), "--space")
    reading = base.reading_of(size, kill_at_request, unknown_runtime, zero_runtime, raise_to_run)
    w = base.load(trace, nodes, cores_per_node, 0, jobs, reading=reading)
    parts = _checked(lambda: t.rolling(w, folds), "--folds")
    report = run_tuning(parts, goal, candidates, results, scheduler, workers, fit_budget, margin,
                        guard_windows, prune)
    report |= {"trace": trace.name, "jobs": len(w.jobs), "notes": w.notes}
    show(report)
    json_out.write_text(json.dumps(report, indent=1))
    files = draw(report, plots)
    console.print(f"wrote {json_out}, {results}, " + ", ".join(map(str, files)))
    rec = report["recommendation"]
    console.print(f"[bold]recommended {rec['label']}:[/] {rec['why']}" if rec["recommend"]
                  else f"[bold]{rec['why']}[/]")
    console.print("[bold]policy block for POST /schedule:[/]")
    console.print_json(json.dumps({"policy": report["policy"]}))
    if rec["recommend"] and rec["predicted"]:
        console.print("[yellow]the choice tells the scheduler predicted run times:[/] send the prediction as "
                      "each job's walltime_s (the request scaled by the user's last two run/request ratios)"
                      + ("; when a job outlives it, raise its walltime_s by the next step (1 min, 5 min, "
                         "15 min, 30 min, 1 h, ...; at most the request)" if rec["correction"] == "stepwise"
                         else ""))


def _checked(fn: Any, hint: str) -> Any:
    try:
        return fn()
    except (ValueError, ValidationError) as exc:
        raise typer.BadParameter(str(exc), param_hint=hint) from exc


def run_tuning(parts: list[tuple[Workload, Workload]], goal: t.Objective, candidates: list[t.Setting],
               results: Path, scheduler: str | None = None, workers: int | None = None,
               fit_budget: int = t.FIT_BUDGET, margin: float = t.MARGIN,
               guard_windows: str = "all", prune: bool = True) -> dict[str, Any]:
    """Per fold, the sweep on its train window (`_grid`: with `prune`, under `all`, only the settings
    still eligible there), the fitted order's weights searched there (`_fit`), and the choice from
    these alone; then each choice and the baselines on its held-out window; as the report's
    dictionary. Each fitting round runs in one batch, and every held-out replay in a last one (none
    is submitted before every choice is made)."""
    easy, firstfit = t.Setting(t.EASY), t.Setting(t.FIRSTFIT)
    pool = list({s.key: s for s in [easy, firstfit, *candidates]}.values())
    windows = {}
    for i, (train, held) in enumerate(parts, start=1):
        windows[f"train{i}"], windows[f"held_out{i}"] = train, held
    stamps = {part: t.fingerprint(w, {}) for part, w in windows.items()}
    with dask_client(scheduler, workers) as client:
        trains = {f"train{i}": windows[f"train{i}"] for i in range(1, len(parts) + 1)}
        every = guard_windows == "all"
        got = _grid(client, goal, pool, trains, stamps, results, easy.key, every and prune)
        eligible = {part: _open(goal, pool, got, part, range(1, i) if every else (), easy.key)
                    for i, part in enumerate(trains, start=1)}
        tried = _fit(client, goal, eligible, got, trains, stamps, results, easy.key, fit_budget)
        folds = []
        for i in range(1, len(parts) + 1):
            fold_pool = [s for s in pool + tried[f"train{i}"] if (f"train{i}", s.key) in got]
            train_m = {s.key: got[(f"train{i}", s.key)]["measures"] for s in fold_pool}
            earlier = list(range(1, i)) if every else []
            chosen_key = _choose(client, goal, fold_pool, train_m, earlier, got, trains, stamps, results,
                                 easy.key)  # the held-out window is not replayed yet
            folds.append((train_m, next(s for s in fold_pool if s.key == chosen_key), fold_pool))
        tasks = [Task(f"held_out{i}", s, detail=True) for i, (_, chosen, _) in enumerate(folds, start=1)
                 for s in {s.key: s for s in (chosen, easy, firstfit)}.values()]
        helds = {f"held_out{i}": windows[f"held_out{i}"] for i in range(1, len(parts) + 1)}
        tested = _swept(client, tasks, helds, stamps, results, "held out")
    skipped = [sum((part, s.key) not in got for s in pool) for part in trains]
    report = _report(goal, got, tested, folds, parts, easy, firstfit, margin,
                     len(pool) + len(tried[f"train{len(parts)}"]), skipped)
    return report | {"guard_windows": guard_windows, "pruned": every and prune}


def _grid(client: Any, goal: t.Objective, pool: list[t.Setting], trains: dict[str, Workload],
          stamps: dict[str, str], results: Path, easy_key: str, prune: bool) -> dict[tuple[str, str], Any]:
    """The space's settings on the train windows. Without `prune`, every setting on every window, in
    one batch. With it (under `--guard-windows all`), window after window, a setting is replayed only
    on the windows up to the first where it broke the objective's bounds (`t.held_on`): from the next
    fold on it is chosen in none, and the fitted order is fitted into the best setting a fold may
    choose (`run_tuning`'s `eligible`), so the choices are those of the full grid (tested)."""
    if not prune:
        tasks = [Task(part, s) for part in trains for s in pool]
        return _swept(client, tasks, trains, stamps, results, "train")
    got: dict[tuple[str, str], Any] = {}
    for i, part in enumerate(trains, start=1):
        open_keys = set(t.still_open(goal, [s.key for s in pool], _results(got, pool, range(1, i)), easy_key))
        todo = [Task(part, s) for s in pool if s.key in open_keys or s.key == easy_key]  # (the baseline)
        got |= _swept(client, todo, trains, stamps, results, f"train {i}")
    return got


def _open(goal: t.Objective, pool: list[t.Setting], got: dict[tuple[str, str], Any], part: str,
          earlier: Iterable[int], easy_key: str) -> list[t.Setting]:
    """The settings of `pool` replayed on train window `part` that its fold may choose: within the
    objective's bounds on the `earlier` train windows (`t.still_open`)."""
    keys = set(t.still_open(goal, [s.key for s in pool], _results(got, pool, earlier), easy_key))
    return [s for s in pool if s.key in keys and (part, s.key) in got]


def _results(got: dict[tuple[str, str], Any], pool: list[t.Setting],
             windows: Iterable[int]) -> list[dict[str, Any]]:
    """Per train window of `windows`, the measures of the settings of `pool` replayed there."""
    return [{s.key: got[(f"train{j}", s.key)]["measures"] for s in pool if (f"train{j}", s.key) in got}
            for j in windows]


def _fit(client: Any, goal: t.Objective, eligible: dict[str, list[t.Setting]],
         got: dict[tuple[str, str], Any], trains: dict[str, Workload], stamps: dict[str, str], results: Path,
         easy_key: str, budget: int) -> dict[str, list[t.Setting]]:
    """The fitted settings tried on each train window (their results added to `got`): the weights
    searched by simulation, `budget` replays a window: `t.first_points`, then a pattern search from
    the best point so far (`t.neighbours`; the step halves after a round that finds nothing better),
    each in the setting of the best `priority` setting its fold may choose (`t.fit_base` of
    `eligible[part]`: replayed there and, under `all`, within bounds on the earlier windows); a
    window where none is eligible gets no fitted setting."""
    tried: dict[str, list[t.Setting]] = {part: [] for part in trains}
    if budget <= 0:
        return tried
    base = {part: t.fit_base(goal, eligible[part], {s.key: got[(part, s.key)]["measures"]
                                                    for s in eligible[part]}, easy_key)
            for part in trains if any(s.policy["name"] == "priority" for s in eligible[part])}
    trains = {part: w for part, w in trains.items() if part in base}  # (the windows fitted on)
    todo = {part: [t.fitted(base[part], p) for p in t.first_points(min(budget, t.FIT_START))]
            for part in trains}
    step = {part: dict(t.FIT_STEP) for part in trains}
    best: dict[str, t.Setting | None] = dict.fromkeys(trains)
    for rnd in itertools.count():
        todo = {part: _new(todo[part], tried[part], budget) for part in trains}
        if not any(todo.values()):
            return tried
        tasks = [Task(part, s) for part in trains for s in todo[part]]
        got |= _swept(client, tasks, trains, stamps, results, f"fit {rnd}")
        for part in trains:
            tried[part] += todo[part]
            easy_m = got[(part, easy_key)]["measures"]
            ranked = sorted(tried[part], key=lambda s, p=part, e=easy_m: (
                t.score(goal, got[(p, s.key)]["measures"], e), s.key))
            if best[part] is not None and ranked[0].key == best[part].key:  # type: ignore[union-attr]
                step[part] = {k: v / 2 for k, v in step[part].items()}
            best[part] = ranked[0]
            todo[part] = [t.fitted(base[part], p) for p in t.neighbours(t.point_of(ranked[0]), step[part])]
    return tried


def _choose(client: Any, goal: t.Objective, fold_pool: list[t.Setting], train_m: dict[str, Any],
            earlier: list[int], got: dict[tuple[str, str], Any], trains: dict[str, Workload],
            stamps: dict[str, str], results: Path, easy_key: str) -> str:
    """The fold's choice; under `--guard-windows all`, among the settings whose guard held on the
    earlier train windows too. A setting ranked before the choice that was never replayed on an
    earlier window (a fitted one: fitted on this window alone) is replayed there first, a few at a
    time, until no setting ranked before the choice is left unknown."""
    by_key = {s.key: s for s in fold_pool}

    def seen() -> list[dict[str, Any]]:
        return [{k: got[(f"train{j}", k)]["measures"] for k in by_key if (f"train{j}", k) in got}
                for j in earlier]

    while todo := t.missing_before(goal, train_m, easy_key, seen(), limit=4):
        tasks = [Task(f"train{j}", by_key[k]) for k in todo for j in earlier if (f"train{j}", k) not in got]
        got |= _swept(client, tasks, trains, stamps, results, "earlier windows")
    return t.choose(goal, train_m, easy_key, seen())


def _new(todo: list[t.Setting], tried: list[t.Setting], budget: int) -> list[t.Setting]:
    """The settings of `todo` not tried yet (the rounding may meet a tried one), within the budget."""
    seen = {s.key for s in tried}
    fresh = list({s.key: s for s in todo if s.key not in seen}.values())
    return fresh[: max(0, budget - len(tried))]


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


def _report(goal: t.Objective, got: dict[tuple[str, str], Any], tested: dict[tuple[str, str], Any],
            folds: list[tuple[dict[str, Any], t.Setting, list[t.Setting]]],
            parts: list[tuple[Workload, Workload]], easy: t.Setting, firstfit: t.Setting,
            margin: float, tried: int, skipped: list[int]) -> dict[str, Any]:
    out_folds = [_fold(goal, i, pool, got, tested, train_m, chosen, parts[i - 1], easy, firstfit)
                 for i, (train_m, chosen, pool) in enumerate(folds, start=1)]
    for f, n in zip(out_folds, skipped, strict=True):
        f["skipped"] = n  # settings of the space not replayed on this train window (`_grid`)
    for f in out_folds:
        f["margin_met"] = f["gain_vs_easy"]["train"] >= margin
    recommend, why = t.verdict(goal, [(f["held_out"]["chosen"], f["held_out"]["easy"]) for f in out_folds],
                               [f["gain_vs_easy"]["train"] for f in out_folds], margin)
    latest = folds[-1][1]
    kept = latest if recommend else easy
    return {
        "objective": goal.describe(), "margin": margin,
        "guard": {"max_wait_factor": goal.max_factor, "p99_wait_factor": goal.p99_factor},
        "held_out_guard": {"max_wait_factor": t.judged(goal).max_factor,
                           "p99_wait_factor": t.judged(goal).p99_factor},
        "settings": tried, "folds": out_folds,
        "recommendation": {"recommend": recommend, "why": why, "label": kept.label(),
                           "predicted": kept.predicted, "correction": kept.correction,
                           "latest_choice": latest.label()},
        "policy": dict(kept.policy),
    }


def _fold(goal: t.Objective, i: int, pool: list[t.Setting], got: dict[tuple[str, str], Any],
          tested: dict[tuple[str, str], Any], train_m: dict[str, dict[str, float]], chosen: t.Setting,
          part: tuple[Workload, Workload], easy: t.Setting, firstfit: t.Setting) -> dict[str, Any]:
    """One fold of the report: its windows, train rows (best first), choice, held-out measures."""
    base = train_m[easy.key]
    rows = sorted(({"label": s.label(), "key": s.key, "score": t.score(goal, train_m[s.key], base),
                    "seconds": got[(f"train{i}", s.key)]["seconds"], **train_m[s.key]} for s in pool),
                  key=lambda r: (r["score"], r["key"]))
    held = {name: tested[(f"held_out{i}", s.key)] for name, s in
            (("chosen", chosen), ("easy", easy), ("firstfit", firstfit))}
    measures = {name: rec["measures"] for name, rec in held.items()}
    train, test = part
    return {
        "fold": i, "train_jobs": [train.jobs[0].id, train.jobs[-1].id, len(train.jobs)],
        "held_out_jobs": [test.jobs[0].id, test.jobs[-1].id, len(test.jobs)],
        "chosen": {"label": chosen.label(), "policy": dict(chosen.policy), "predicted": chosen.predicted,
                   "correction": chosen.correction},
        "train": [{k: _finite(v) for k, v in r.items()} for r in rows],
        "held_out": measures,
        "held_out_waits": {name: rec["waits"] for name, rec in held.items()},
        "guard_broken": not t.guard_holds(t.judged(goal), measures["chosen"], measures["easy"]),
        "beats_easy": t.beats_easy(goal, measures["chosen"], measures["easy"]),
        "gain_vs_easy": {"measure": t.main_measure(goal), "train": t.gain(goal, train_m[chosen.key], base),
                         "held_out": t.gain(goal, measures["chosen"], measures["easy"])},
    }


def _finite(v: Any) -> Any:
    return None if isinstance(v, float) and math.isinf(v) else v


def show(report: dict[str, Any], top: int = 5) -> None:
    columns = ("score", "bsld", "wait", "wait_p99", "wait_max", "utilisation", "seconds")
    last = report["folds"][-1]
    tried = [(r["label"], [_fmt(r.get(c)) for c in columns]) for r in last["train"][:top]]
    console.print(*tables(f"fold {last['fold']}'s train window: {report['settings']} settings, best {top} by "
                          f"{report['objective']}", "setting", columns, tried, console.width))
    names = {"chosen": "chosen", "easy": "EASY", "firstfit": "FirstFit"}
    rows = []
    for f in report["folds"]:
        for name, m in f["held_out"].items():
            label = f"{f['fold']} {names[name]}" + (f": {f['chosen']['label']}" if name == "chosen" else "")
            flag = ("guard broken" if f["guard_broken"] else "beats EASY" if f["beats_easy"] else "no gain")
            rows.append((label, [_fmt(m[c]) for c in HELD_OUT_COLUMNS] + [flag if name == "chosen" else ""]))
    console.print(*tables("held-out windows (never used to choose): each fold's choice against EASY", "fold",
                          (*HELD_OUT_COLUMNS, "verdict"), rows, console.width))
    for f in report["folds"]:
        g = f["gain_vs_easy"]
        console.print(f"fold {f['fold']}: the choice against EASY ({g['measure']}): {_lower(g['train'])} on "
                      f"its train window{'' if f['margin_met'] else ' (under the margin)'}, "
                      f"[bold]{_lower(g['held_out'])} on its held-out window[/]"
                      + (" [red](guard broken on the held-out window)[/]" if f["guard_broken"] else ""))
    if report.get("pruned"):
        console.print("settings not replayed on a train window, their guard broken on an earlier one (no "
                      "later fold can choose them): " + ", ".join(f"window {f['fold']}: {f['skipped']}"
                                                                   for f in report["folds"]))
    for note in report.get("notes", []):
        console.print(f"[yellow]note:[/] {note}")


def _lower(share: float) -> str:
    return f"{share:.1%} lower" if share >= 0 else f"{-share:.1%} higher"


def _fmt(v: Any) -> str:
    if v is None or (isinstance(v, float) and math.isinf(v)):
        return "-"
    return f"{v:.3f}" if abs(v) < 10 else f"{v:,.0f}"


def draw(report: dict[str, Any], folder: Path) -> list[Path]:
    """The latest fold's held-out waits' CDF, each fold's held-out measures relative to EASY, and the
    latest fold's train scores."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    folder.mkdir(parents=True, exist_ok=True)
    last = report["folds"][-1]
    fig, ax = plt.subplots(figsize=(8, 5))
    for name, waits in last["held_out_waits"].items():
        x = np.sort(np.maximum(waits, 1.0))
        ax.step(x, np.arange(1, x.size + 1) / max(x.size, 1), where="post", label=name)
    ax.set(xscale="log", xlabel="wait (s)",
           ylabel=f"share of fold {last['fold']}'s held-out jobs waiting at most this long")
    files = [_save(fig, ax, folder / "held_out_wait_cdf.png")]
    fig, ax = plt.subplots(figsize=(9, 4))
    width = 0.8 / len(report["folds"])
    for i, f in enumerate(report["folds"]):
        easy, chosen = f["held_out"]["easy"], f["held_out"]["chosen"]
        ratios = [chosen[c] / easy[c] if easy[c] else 1.0 for c in HELD_OUT_COLUMNS]
        ax.bar(np.arange(len(HELD_OUT_COLUMNS)) + width * (i - (len(report["folds"]) - 1) / 2), ratios, width,
               label=f"fold {f['fold']}: chosen / EASY")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(HELD_OUT_COLUMNS)), HELD_OUT_COLUMNS)
    ax.set(ylabel="relative to EASY (held out)")
    files.append(_save(fig, ax, folder / "held_out_vs_easy.png"))
    fig, ax = plt.subplots(figsize=(9, 4))
    scores = [r["score"] for r in last["train"] if r["score"] is not None and r["score"] < t.OUT_OF_BOUNDS]
    ax.bar(range(len(scores)), scores)
    ax.set(xlabel="settings within the guard, best first",
           ylabel=f"fold {last['fold']} train score ({report['objective']})")
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

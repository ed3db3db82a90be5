"""`best` on its default budget against each list method alone: makespan, time, and overrun.

    python bench/bench_dag_best.py                      # shapes x sizes, and the WfCommons workflows
    python bench/bench_dag_best.py --sizes 1000,10000 --shapes layered --no-workflows
    python bench/bench_dag_best.py --budget 0.3 --folder ../shared/data/workflows --no-http

Each row: one problem; `heft`, `peft`, `mdl` alone (list plan, no search) and `best` with no asked
budget (its total, counted from the start of planning, as the service gives it). `best/x` is best's
makespan over method x's; `ran` the planners best ran; `best/ran` best's makespan over the shortest
of those (never above 1); `time/budget` best's wall time over its total (the overrun is what exceeds
1); `time/floor` the same over the larger of the total and HEFT alone (compiling, HEFT, the critical
path: the first planner always runs, so on a loaded machine at the size limit that alone may exceed
the total). The summary counts the answers a single method beat while also being faster, as issue 32
did.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.sched.dag.model import DagProblem  # noqa: E402
from app.sched.registry import plan_dag  # noqa: E402
from bench.bench_dag import DEFAULT_WORKFLOWS, workflow_problems  # noqa: E402
from bench.common import Server, finish  # noqa: E402
from bench.dag_workload import groups, shaped_dag  # noqa: E402

METHODS = ("heft", "peft", "mdl")
console = Console(width=200)
cli = typer.Typer(add_completion=False)


def _timed(p: DagProblem, algorithm: str, **kw: Any) -> tuple[float, Any]:
    t0 = time.monotonic()
    r = plan_dag(p, algorithm, clock=time.monotonic, **kw)
    return time.monotonic() - t0, r


def row(name: str, p: DagProblem, budget: float) -> dict[str, Any]:
    out: dict[str, Any] = {"instance": name, "tasks": len(p.tasks), "groups": len(p.groups),
                           "slots": sum(g.slots for g in p.groups)}
    alone = {}
    for m in METHODS:
        s, r = _timed(p, m, search_s=0.0)
        alone[m] = (r.makespan, s)
        out[f"{m}_s"] = s
    s, r = _timed(p, "best", search_s=None, best_default_s=budget)
    ran = [m for m in METHODS if m in r.makespans]
    floor = max(budget, alone["heft"][1])  # the first planner always runs: HEFT alone may take longer
    out.update({"best_s": s, "time/budget": s / budget, "time/floor": s / floor, "ran": ",".join(ran),
                "best/ran": r.makespan / min(r.makespans[m] for m in ran)})
    for m in METHODS:
        out[f"best/{m}"] = r.makespan / alone[m][0] if alone[m][0] else 1.0
    shorter_faster = [m for m in METHODS if alone[m][0] < r.makespan * (1 - 1e-9) and alone[m][1] < s]
    out["beaten_by"] = ",".join(shorter_faster)
    out["search_gain_%"] = 100 * r.search.gain if r.search is not None else 0.0
    out["restarts"] = r.restarts
    return out


def http_rows(folder: Path) -> list[dict[str, Any]]:
    """Each WfFormat instance through uvicorn: `best` on the service's default total, and each method
    alone; the service's own timing (parsing and checks are reported apart from planning)."""
    rows = []
    server = Server()
    try:
        for path in sorted(folder.glob("*.json")):
            wf = json.loads(path.read_text())
            raw = {m: json.dumps({"workflow": wf, "algorithm": m, "time_budget_s": 0}).encode()
                   for m in METHODS}
            raw["best"] = json.dumps({"workflow": wf, "algorithm": "best"}).encode()
            server.post("/dag/plan", raw["best"])  # warm-up
            out = {m: server.post("/dag/plan", body) for m, body in raw.items()}
            b, t = out["best"], out["best"]["timing_ms"]
            rows.append({"instance": path.stem.split("-")[0], "tasks": len(b["tasks"]),
                         "body_mb": len(raw["best"]) / 1e6, "parse_ms": t["parse"],
                         "validate_ms": t["validate"], "plan_ms": t["plan"],
                         "total_budget_s": b["total_budget_s"],
                         "plan/budget": t["plan"] / 1e3 / b["total_budget_s"],
                         "ran": ",".join(b["makespans"]),
                         **{f"best/{m}": b["makespan"] / out[m]["makespan"] for m in METHODS}})
    finally:
        server.close()
    return rows


def search_rows(sizes: list[int]) -> list[dict[str, Any]]:
    """The default search after `heft` and `mdl` alone (3 x the list time, at least 0.05 s, at most
    2 s, stopped sooner once it stops gaining) on layered DAGs: its time and what it gained."""
    rows = []
    for n in sizes:
        p = shaped_dag("layered", n, groups(64, seed=n), seed=n)
        for m in ("heft", "mdl"):
            s, r = _timed(p, m, search_s=None)
            found = r.search
            rows.append({"instance": f"layered {n}", "method": m, "total_s": s,
                         "search_budget_s": found.budget_s if found else 0.0,
                         "search_s": found.seconds if found else 0.0,
                         "evaluations": found.evaluations if found else 0,
                         "gain_%": 100 * found.gain if found else 0.0})
    return rows


def problems(sizes: list[int], shapes: list[str], workflows: Path | None) -> list[tuple[str, DagProblem]]:
    out = []
    for shape in shapes:
        for n in sizes:
            gs = groups(200, slots=2, seed=n) if n >= 20_000 else groups(64, seed=n)
            out.append((f"{shape} {n}", shaped_dag(shape, n, gs, seed=n)))
    if workflows is not None and workflows.is_dir():
        out += workflow_problems(workflows)
    return out


def _table(rows: list[dict[str, Any]], title: str) -> Table:
    cols = list(dict.fromkeys(k for r in rows for k in r))
    table = Table(title=title)
    for c in cols:
        table.add_column(c, justify="left" if c in ("instance", "ran", "beaten_by") else "right")
    for r in rows:
        table.add_row(*[f"{v:.3f}" if isinstance(v, float) else str(v) for v in (r.get(c) for c in cols)])
    return table


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    ratio = [r["time/budget"] for r in rows]
    return {"answers": len(rows), "max time/budget": max(ratio),
            "max time/floor (the larger of budget, HEFT alone)": max(r["time/floor"] for r in rows),
            "over budget by > 10 %": sum(x > 1.1 for x in ratio),
            "over budget at all": sum(x > 1.0 for x in ratio),
            "max best/ran": max(r["best/ran"] for r in rows),
            "beaten by a shorter and faster single method": sum(bool(r["beaten_by"]) for r in rows),
            "longer than some single method": sum(min(r[f"best/{m}"] for m in METHODS) > 1 + 1e-9
                                                   for r in rows)}


def best_rows(found: list[tuple[str, DagProblem]], budget: float) -> list[dict[str, Any]]:
    plan_dag(found[0][1], "best", search_s=None, clock=time.monotonic)  # loads the compiled loops
    rows = []
    for name, p in found:
        rows.append(row(name, p, budget))
        console.print(f"{name}: {rows[-1]['best_s']:.3f} s, time/budget {rows[-1]['time/budget']:.2f}")
    return rows


def _summary_table(total: dict[str, Any]) -> Table:
    table = Table(title="summary")
    table.add_column("figure")
    table.add_column("value", justify="right")
    for k, v in total.items():
        table.add_row(k, f"{v:.3f}" if isinstance(v, float) else str(v))
    return table


@cli.command()
def main(
    sizes: str = typer.Option("200,1000,3000,10000,20000", help="task counts (20000: 200 groups x 2 slots)"),
    shapes: str = typer.Option("layered,fanout,independent,chain", help="DAG shapes"),
    budget: float = typer.Option(0.8, help="best's total, s (the service's HPCSCHED_DAG_BEST_DEFAULT_S)"),
    workflows: Annotated[Path, typer.Option("--folder", help="WfFormat instances")] = DEFAULT_WORKFLOWS,
    use_workflows: bool = typer.Option(True, "--workflows/--no-workflows"),
    http: bool = typer.Option(True, help="also POST each workflow to uvicorn (the service's timing)"),
    search_sizes: str = typer.Option("300,1000,3000,10000", help="layered sizes, default-search table"),
    json_out: Annotated[Path | None, typer.Option("--json", help="write the rows here")] = None,
) -> None:
    found = problems([int(x) for x in sizes.split(",") if x], shapes.split(","),
                     workflows if use_workflows else None)
    tables: list[Table] = []
    result: dict[str, Any] = {}
    if found:
        result["rows"] = best_rows(found, budget)
        result["summary"] = summary(result["rows"])
        tables += [_table(result["rows"], "best on its default budget vs each list method alone "
                          "(makespan ratios; s)"), _summary_table(result["summary"])]
    if search_sizes:
        result["search"] = search_rows([int(x) for x in search_sizes.split(",") if x])
        tables.append(_table(result["search"], "the default search after one method (s; gain in %)"))
    if http and use_workflows and workflows.is_dir():
        result["http"] = http_rows(workflows)
        tables.append(_table(result["http"], "through the service: best's total counts from the start of "
                             "planning (ms; makespan ratios against each method alone, no search)"))
    finish(console, tables, result, json_out)


if __name__ == "__main__":
    cli()

"""`best` on its default budget against each list method alone: makespan, time, and overrun.

    python bench/bench_dag_best.py                      # shapes x sizes, and the WfCommons workflows
    python bench/bench_dag_best.py --sizes 1000,10000 --shapes layered --no-workflows
    python bench/bench_dag_best.py --budget 0.3

Each row: one problem; `heft`, `peft`, `mdl` alone (list plan, no search) and `best` with no asked
budget (its total, counted from the start of planning, as the service gives it). `best/x` is best's
makespan over method x's; `ran` the planners best ran; `best/ran` best's makespan over the shortest
of those (never above 1); `time/budget` best's wall time over its total (the overrun is what exceeds
1). The summary counts the answers a single method beat while also being faster, as issue 32 did.
"""

from __future__ import annotations

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
from bench.common import finish  # noqa: E402
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
    out.update({"best_s": s, "time/budget": s / budget, "ran": ",".join(ran),
                "best/ran": r.makespan / min(r.makespans[m] for m in ran)})
    for m in METHODS:
        out[f"best/{m}"] = r.makespan / alone[m][0] if alone[m][0] else 1.0
    shorter_faster = [m for m in METHODS if alone[m][0] < r.makespan * (1 - 1e-9) and alone[m][1] < s]
    out["beaten_by"] = ",".join(shorter_faster)
    out["search_gain_%"] = 100 * r.search.gain if r.search is not None else 0.0
    out["restarts"] = r.restarts
    return out


def problems(sizes: list[int], shapes: list[str], workflows: Path | None) -> list[tuple[str, DagProblem]]:
    out = []
    for shape in shapes:
        for n in sizes:
            gs = groups(200, slots=2, seed=n) if n >= 20_000 else groups(64, seed=n)
            out.append((f"{shape} {n}", shaped_dag(shape, n, gs, seed=n)))
    if workflows is not None and workflows.is_dir():
        out += workflow_problems(workflows)
    return out


def _table(rows: list[dict[str, Any]]) -> Table:
    cols = list(dict.fromkeys(k for r in rows for k in r))
    table = Table(title="best on its default budget vs each list method alone (makespan ratios; s)")
    for c in cols:
        table.add_column(c, justify="left" if c in ("instance", "ran", "beaten_by") else "right")
    for r in rows:
        table.add_row(*[f"{v:.3f}" if isinstance(v, float) else str(v) for v in (r.get(c) for c in cols)])
    return table


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    ratio = [r["time/budget"] for r in rows]
    return {"answers": len(rows), "max time/budget": max(ratio),
            "over budget by > 10 %": sum(x > 1.1 for x in ratio),
            "over budget at all": sum(x > 1.0 for x in ratio),
            "max best/ran": max(r["best/ran"] for r in rows),
            "beaten by a shorter and faster single method": sum(bool(r["beaten_by"]) for r in rows),
            "longer than some single method": sum(min(r[f"best/{m}"] for m in METHODS) > 1 + 1e-9
                                                   for r in rows)}


@cli.command()
def main(
    sizes: str = typer.Option("200,1000,3000,10000,20000", help="task counts (20000: 200 groups x 2 slots)"),
    shapes: str = typer.Option("layered,fanout,independent,chain", help="DAG shapes"),
    budget: float = typer.Option(0.8, help="best's total, s (the service's HPCSCHED_DAG_BEST_DEFAULT_S)"),
    workflows: Annotated[Path, typer.Option(help="WfFormat instances")] = DEFAULT_WORKFLOWS,
    use_workflows: bool = typer.Option(True, "--workflows/--no-workflows"),
    json_out: Annotated[Path | None, typer.Option("--json", help="write the rows here")] = None,
) -> None:
    found = problems([int(x) for x in sizes.split(",") if x], shapes.split(","),
                     workflows if use_workflows else None)
    plan_dag(found[0][1], "best", search_s=None, clock=time.monotonic)  # loads the compiled loops
    rows = []
    for name, p in found:
        rows.append(row(name, p, budget))
        console.print(f"{name}: {rows[-1]['best_s']:.3f} s, time/budget {rows[-1]['time/budget']:.2f}")
    table = Table(title="summary")
    table.add_column("figure")
    table.add_column("value", justify="right")
    total = summary(rows)
    for k, v in total.items():
        table.add_row(k, f"{v:.3f}" if isinstance(v, float) else str(v))
    finish(console, [_table(rows), table], {"rows": rows, "summary": total}, json_out)


if __name__ == "__main__":
    cli()

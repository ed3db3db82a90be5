"""DAG planning: time by size, and makespan of mdl / heft / best as ratios to HEFT.

    python bench/bench_dag.py                 # speed (4 shapes, 1k and 10k tasks on 64 groups) and quality
    python bench/bench_dag.py --no-quality --no-http --sizes 1000,10000 --repeat 1
    python bench/bench_dag.py --no-quality --sizes 20000 --groups 200 --slots 2 --shapes layered
    python bench/bench_dag.py --workflows ../shared/data/workflows
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

from app.convert_dag import DagLimits, problem_from_wire  # noqa: E402
from app.sched.dag.model import DagProblem, Group  # noqa: E402
from app.sched.registry import plan_dag  # noqa: E402
from bench.common import Server, finish, median_ms  # noqa: E402
from bench.dag_workload import groups, layered_dag, shaped_dag  # noqa: E402
from schemas.dag import DagPlanRequest  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_WORKFLOWS = ROOT.parent / "shared" / "data" / "workflows"
console = Console(width=160)
cli = typer.Typer(add_completion=False)


def _wire(p: DagProblem) -> dict[str, Any]:
    return {
        "now": p.now,
        "tasks": [{"id": t.id, "work": t.work, "requires": sorted(t.requires)} for t in p.tasks],
        "edges": [{"from": e.src, "to": e.dst, "data": e.data} for e in p.edges],
        "groups": [{"id": g.id, "speed": g.speed, "labels": sorted(g.labels), "slots": g.slots}
                   for g in p.groups],
        "network": {"bandwidth": p.network.bandwidth},
    }


def speed_rows(sizes: list[int], n_groups: int, slots: int, shapes: list[str], algorithms: list[str],
               repeat: int, http: bool) -> list[dict[str, Any]]:
    """Planning time per shape and size. The list planners run alone (no search); `best` runs with
    its default budget (everything within 0.8 s, the planners that fit and a search of 3 × their list
    time, at least 0.05 s, in what is left), which is part of it."""
    rows = []
    server = Server() if http else None
    try:
        for shape in shapes:
            for n in sizes:
                p = shaped_dag(shape, n, groups(n_groups, slots=slots), seed=n)
                for algorithm in algorithms:
                    search = None if algorithm == "best" else 0.0
                    ms, r = median_ms(lambda a=algorithm, q=p, s=search: plan_dag(
                        q, a, search_s=s, clock=time.perf_counter), repeat)
                    row = {"shape": shape, "tasks": n, "edges": len(p.edges), "groups": n_groups,
                           "slots": slots, "algorithm": algorithm, "plan_ms": ms, "makespan": r.makespan}
                    if server is not None and algorithm == "best" and shape == "layered":
                        raw = json.dumps(_wire(p) | {"algorithm": "best"}).encode()
                        http_ms, out = median_ms(lambda b=raw: server.post("/dag/plan", b), repeat)
                        row.update(http_ms=http_ms, body_mb=len(raw) / 1e6, **{
                            f"server_{k}_ms": v for k, v in out["timing_ms"].items() if k != "total"})
                    rows.append(row)
    finally:
        if server is not None:
            server.close()
    return rows


def _ratios(name: str, p: DagProblem) -> dict[str, Any]:
    spans = plan_dag(p, "best", search_s=0.0).makespans
    heft = spans["heft"]
    return {"instance": name, "tasks": len(p.tasks), "edges": len(p.edges), "groups": len(p.groups),
            "heft_s": heft, "mdl/heft": spans["mdl"] / heft if heft else 1.0,
            "best/heft": min(spans.values()) / heft if heft else 1.0}


def workflow_problems(folder: Path) -> list[tuple[str, DagProblem]]:
    """Each WfFormat instance twice: on its recorded machines (a slot per core) and on 8 one-slot
    groups of speeds 0.5–2 (where placement matters)."""
    out = []
    hetero = tuple(Group(f"h{i}", speed=s) for i, s in enumerate([0.5, 0.75, 1, 1, 1.25, 1.5, 2, 2]))
    for path in sorted(folder.glob("*.json")):
        wf = json.loads(path.read_text())
        p, _ = problem_from_wire(DagPlanRequest(workflow=wf), DagLimits())
        short = path.stem.split("-")[0]
        out.append((f"{short} (recorded machines)", p))
        out.append((f"{short} (8 groups, 1 slot)", DagProblem(p.tasks, p.edges, hetero, p.network)))
    return out


def quality_rows(folder: Path | None) -> list[dict[str, Any]]:
    rows = []
    if folder is not None and folder.is_dir():
        rows += [_ratios(name, p) for name, p in workflow_problems(folder)]
    for ccr in (0.1, 1.0, 5.0):
        for seed in range(1, 6):
            p = layered_dag(200, groups(16, seed=seed), ccr=ccr, seed=seed)
            rows.append(_ratios(f"layered 200, ccr {ccr}, seed {seed}", p))
    return rows


def _table(title: str, rows: list[dict[str, Any]]) -> Table:
    cols = list(dict.fromkeys(k for r in rows for k in r))
    table = Table(title=title)
    for c in cols:
        table.add_column(c, justify="left" if c in ("instance", "algorithm") else "right")
    for r in rows:
        table.add_row(*[_fmt(c, r.get(c)) for c in cols])
    return table


def _fmt(col: str, v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.3f}" if "/" in col else f"{v:.1f}"
    return "-" if v is None else str(v)


@cli.command()
def main(
    sizes: str = typer.Option("1000,10000", help="task counts for the speed table"),
    n_groups: int = typer.Option(64, "--groups", help="groups for the speed table"),
    slots: int = typer.Option(1, help="slots per group for the speed table"),
    shapes: str = typer.Option("chain,fanout,independent,layered", help="DAG shapes for the speed table"),
    algorithms: str = typer.Option("mdl,heft,peft,best", help="methods for the speed table"),
    repeat: int = typer.Option(3, help="timed runs per cell (after one warm-up)"),
    http: bool = typer.Option(True, help="also time `best` end to end through uvicorn"),
    quality: bool = typer.Option(True, help="the makespan-ratio table"),
    workflows: Annotated[Path, typer.Option(help="WfFormat instances")] = DEFAULT_WORKFLOWS,
    json_out: Annotated[Path | None, typer.Option("--json", help="write the rows here")] = None,
) -> None:
    rows = speed_rows([int(x) for x in sizes.split(",") if x], n_groups, slots, shapes.split(","),
                      algorithms.split(","), repeat, http)
    tables = [_table("DAG planning time (median)", rows)]
    out: dict[str, Any] = {"speed": rows}
    if quality:
        if not workflows.is_dir():
            console.print(f"[yellow]no workflow folder at {workflows}: random DAGs only[/]")
        out["quality"] = quality_rows(workflows)
        tables.append(_table("Makespan relative to HEFT (lower is better)", out["quality"]))
    finish(console, tables, out, json_out)


if __name__ == "__main__":
    cli()

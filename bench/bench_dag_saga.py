"""Plan quality against saga's HEFT (the `anrg-saga` package: pip install -e '.[bench]').

    python bench/bench_dag_saga.py                      # all instances, default search budget
    python bench/bench_dag_saga.py --quick              # a third of them
    python bench/bench_dag_saga.py --budget 0.2 --json out.json
    python bench/bench_dag_saga.py --recipes none        # no synthetic WfCommons workflows

Every plan (saga's included) goes through an independent checker (precedence, transfers, slots)
before its makespan counts. Ratios are makespan / saga HEFT's makespan: below 1 is shorter.
"""

from __future__ import annotations

import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from saga.schedulers.heft import HeftScheduler  # noqa: E402

from app.sched.dag.model import DagProblem, Placement, TaskStatus  # noqa: E402
from app.sched.registry import plan_dag  # noqa: E402
from bench.common import finish  # noqa: E402
from bench.dag_saga import RECIPES, Instance, check, instances, recipe_workflows  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_WORKFLOWS = ROOT.parent / "shared" / "data" / "workflows"
# (column, algorithm, search): list plans alone, and with the search at its default budget
RUNS = (("mdl", "mdl", 0.0), ("heft", "heft", 0.0), ("peft", "peft", 0.0), ("mdl+search", "mdl", None),
        ("best", "best", None))
METHODS = tuple(name for name, _, _ in RUNS)
console = Console(width=170)
cli = typer.Typer(add_completion=False)


def saga_heft(inst: Instance, p: DagProblem) -> tuple[float, float]:
    """saga's HEFT makespan (its plan checked like ours) and its planning time in ms."""
    t0 = time.perf_counter()
    sched = HeftScheduler().schedule(inst.network, inst.graph)
    ms = (time.perf_counter() - t0) * 1e3
    t_index = {t.id: i for i, t in enumerate(p.tasks)}
    g_index = {g.id: i for i, g in enumerate(p.groups)}
    pls = sorted((Placement(t_index[s.name], g_index[node], 0, s.start, s.end, TaskStatus.PENDING)
                  for node, tasks in sched.items() for s in tasks), key=lambda pl: pl.task)
    errors = check(p, pls)
    if errors:
        raise AssertionError(f"saga's plan of {inst.name} fails the checker: {errors[:3]}")
    return max(pl.finish for pl in pls), ms


def row(inst: Instance, budget: float | None) -> dict[str, Any]:
    """saga's HEFT and each run on one instance, every plan checked; ratios to saga's makespan."""
    p = inst.problem()
    ref, ref_ms = saga_heft(inst, p)
    out: dict[str, Any] = {"family": inst.family, "instance": inst.name, "tasks": len(p.tasks),
                           "groups": len(p.groups), "saga_heft": ref, "saga_ms": ref_ms}
    for method, algorithm, search in RUNS:
        t0 = time.perf_counter()
        r = plan_dag(p, algorithm, search_s=budget if search is None else search, clock=time.perf_counter)
        out[f"{method}_ms"] = (time.perf_counter() - t0) * 1e3
        errors = check(p, r.plan.placements)
        if errors:
            raise AssertionError(f"{method} on {inst.name} fails the checker: {errors[:3]}")
        out[method] = r.makespan / ref
        if method == "best":
            out["best_used"] = r.plan.algorithm
            out["search_gain"] = r.search.gain if r.search else 0.0
    return out


def summary(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    fams = list(dict.fromkeys(r["family"] for r in rows)) + ["all"]
    out = []
    for fam in fams:
        rs = [r for r in rows if fam == "all" or r["family"] == fam]
        s: dict[str, Any] = {"family": fam, "instances": len(rs)}
        for m in METHODS:
            s[f"{m}/saga"] = statistics.fmean(r[m] for r in rs)
        s["best worst"] = max(r["best"] for r in rs)
        s["mdl worst"] = max(r["mdl"] for r in rs)
        s["mdl+search worst"] = max(r["mdl+search"] for r in rs)
        s["best > saga"] = sum(r["best"] > 1 + 1e-9 for r in rs)
        s["mdl > saga"] = sum(r["mdl"] > 1 + 1e-9 for r in rs)
        s["mdl+search > saga"] = sum(r["mdl+search"] > 1 + 1e-9 for r in rs)
        s["saga ms"] = statistics.fmean(r["saga_ms"] for r in rs)
        for m in METHODS:
            s[f"{m} ms"] = statistics.fmean(r[f"{m}_ms"] for r in rs)
        out.append(s)
    return out


def _table(title: str, rows: list[dict[str, Any]]) -> Table:
    cols = list(dict.fromkeys(k for r in rows for k in r))
    t = Table(title=title)
    for c in cols:
        t.add_column(c, justify="left" if c in ("family", "instance", "best_used") else "right")
    for r in rows:
        t.add_row(*[f"{v:.3f}" if isinstance(v, float) and ("/" in c or c in METHODS or "worst" in c)
                    else f"{v:.1f}" if isinstance(v, float) else str(v) for c, v in
                    ((c, r.get(c)) for c in cols)])
    return t


@cli.command()
def main(
    workflows: Annotated[Path, typer.Option(help="WfFormat instances")] = DEFAULT_WORKFLOWS,
    budget: float = typer.Option(-1.0, help="search budget of `best`, seconds (-1: the default)"),
    quick: bool = typer.Option(False, help="a third of the instances"),
    per_instance: bool = typer.Option(False, help="also print a row per instance"),
    recipes: str = typer.Option(",".join(RECIPES), help="WfCommons recipe families to generate (a seeded "
                                "instance each; 'none': no synthetic workflows)"),
    recipe_tasks: int = typer.Option(200, help="tasks of each generated workflow (about)"),
    json_out: Annotated[Path | None, typer.Option("--json", help="write the rows here")] = None,
) -> None:
    logging.disable(logging.WARNING)  # saga logs every super source/sink it adds
    files = sorted(workflows.glob("*.json")) if workflows.is_dir() else []
    if not files:
        console.print(f"[yellow]no workflow folder at {workflows}: generated DAGs only[/]")
    families = [] if recipes == "none" else [f.strip() for f in recipes.split(",") if f.strip()]
    with tempfile.TemporaryDirectory() as folder:
        files += recipe_workflows(families, recipe_tasks, Path(folder))
        rows = [row(inst, None if budget < 0 else budget) for inst in instances(files, quick)]
    tables = [_table("Makespan / saga HEFT's (mean over instances; lower is better)", summary(rows))]
    if per_instance:
        tables.insert(0, _table("Per instance", rows))
    finish(console, tables, {"rows": rows, "summary": summary(rows)}, json_out)


if __name__ == "__main__":
    cli()

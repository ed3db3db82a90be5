"""Bench smoke: a few decision and replay cells of moderate size against committed baselines (issue 31).

    python bench/smoke.py                        # this tree against bench/baseline.json (CI runs this)
    python bench/smoke.py --record               # write bench/baseline.json from this run
    python bench/smoke.py --tree /tmp/old        # another checkout's code, this script's cells

Each cell's CPU time (the best of `--repeat`, in a forked process, killed at its timeout) is divided
by a yardstick measured in the same run (the CPU time of a fixed pure-Python loop, bench/common.py),
so the machine's speed cancels out. A cell fails when its ratio is over `--margin` times its baseline
ratio, or when it runs past its timeout; the command then exits 1. A coarse guard, not a speed
measure: it catches a cell grown several-fold (the easy decision took ~350 times as long at 2478fbb).
"""

from __future__ import annotations

import importlib.util
import json
import multiprocessing
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DATA = ROOT / "tests" / "data"
BASELINE = HERE / "baseline.json"
SDSC = "SDSC-SP2-1998-4.2-cln.first1500.swf"
# (name, kind, workload or trace, size, policy): a decision without a budget on bench/workload.py's
# problems (nodes x pending jobs), or a replay of the first jobs of a trace slice in tests/data
CELLS: tuple[tuple[str, str, str, tuple[int, int], str], ...] = (
    *((f"decide {w} {p}", "decide", w, (10_000, 5_000), p)
      for w in ("bench", "production") for p in ("easy", "conservative", "priority")),
    ("replay SDSC conservative", "replay", SDSC, (0, 1_500), "conservative"),
    ("replay SDSC easy (python)", "python", SDSC, (0, 1_500), "easy"),
)
console = Console(width=160)
cli = typer.Typer(add_completion=False)


def _load(name: str) -> ModuleType:
    """bench/NAME.py of this script's tree, whichever tree `app` comes from."""
    spec = importlib.util.spec_from_file_location(f"smoke_{name}", HERE / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def warm() -> float:
    """Load (or compile, on a cold numba cache) the compiled loops; the seconds it took (wall)."""
    t0 = time.perf_counter()
    for module, name in (("app.sched.core", "warm"), ("app.sched.profile_kernels", "warm"),
                         ("app.sim.compiled", "warm")):
        try:
            getattr(importlib.import_module(module), name)()
        except (ImportError, AttributeError):  # a tree from before them
            pass
    return time.perf_counter() - t0


class Problems:
    """The cells' inputs, built once in this process (forked children inherit them)."""

    def __init__(self) -> None:
        self.wl = _load("workload")
        self.made: dict[tuple[str, tuple[int, int]], Any] = {}

    def get(self, kind: str, source: str, size: tuple[int, int]) -> Any:
        key = (source, size)
        if key not in self.made:
            self.made[key] = self._make(kind, source, size)
        return self.made[key]

    def _make(self, kind: str, source: str, size: tuple[int, int]) -> Any:
        if kind == "decide":
            n, j = size
            return (self.wl.cluster(n), self.wl.pending(j)) if source == "bench" else self.wl.production(n, j)
        from app.sim.swf import read_swf
        from app.sim.workload import default_machine, workload
        trace = read_swf(DATA / source, size[1])
        return workload(trace, default_machine(trace))


def _describe(kind: str, problem: Any) -> str:
    if kind == "decide":
        snap, jobs = problem
        return f"{len(snap.nodes):,} nodes, {len(snap.running):,} running, {len(jobs):,} pending"
    return f"{problem.machine.nodes:,} nodes, {len(problem.jobs):,} jobs"


def _run_once(kind: str, problem: Any, policy: str) -> None:
    if kind == "decide":
        from app.sched.registry import decide
        decide(*problem, policy)
        return
    from app.cli import policy_params
    from app.sim.replay import replay
    replay(problem, policy, policy_params(policy, [])[1], compiled=kind == "replay")


def _child(conn: Any, kind: str, problem: Any, policy: str, repeat: int) -> None:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.process_time()
        _run_once(kind, problem, policy)
        best = min(best, time.process_time() - t0)
    conn.send(best)


def measure(kind: str, problem: Any, policy: str, repeat: int, timeout_s: float) -> float | None:
    """Best CPU seconds of `repeat` runs in a forked process; None if it ran past `timeout_s` (wall)."""
    ctx = multiprocessing.get_context("fork")
    mine, theirs = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(theirs, kind, problem, policy, repeat), daemon=True)
    proc.start()
    theirs.close()  # the child's end: a child that dies closes the pipe, and recv says so
    seconds = None
    if mine.poll(timeout_s):
        try:
            seconds = mine.recv()
        except EOFError:
            proc.join()
            raise RuntimeError(f"{kind} {policy}: the child process failed (exit {proc.exitcode})") from None
    if proc.is_alive():
        proc.kill()
    proc.join()
    return seconds


def _small_first(problems: Problems) -> None:
    """A small decision per policy: the pass's caches and loops loaded before any clock runs."""
    from app.sched.registry import decide
    snap, jobs = problems.wl.cluster(50), problems.wl.pending(100)
    for policy in {c[4] for c in CELLS if c[1] == "decide"}:
        decide(snap, jobs, policy)


@cli.command()
def main(
    baseline: Annotated[Path, typer.Option(help="the committed baseline (JSON)")] = BASELINE,
    margin: Annotated[float, typer.Option(help="a cell fails over this many times its baseline ratio")] = 4.0,
    repeat: Annotated[int, typer.Option(help="runs per cell (the best counts)")] = 2,
    record: Annotated[bool, typer.Option(help="write this run as the baseline instead of checking")] = False,
    tree: Annotated[Path | None, typer.Option(help="the checkout whose `app` runs (default: the "
                                                     "installed or PYTHONPATH one)")] = None,
) -> None:
    """Run the cells, print the table, and exit 1 if a cell is over its margin."""
    if tree is not None:
        sys.path.insert(0, str(tree.resolve()))
    common = _load("common")
    base = {} if record else json.loads(baseline.read_text())
    console.print(f"loops loaded in {warm():.1f} s (wall; a cold numba cache compiles them)")
    problems = Problems()
    _small_first(problems)
    yard = common.yardstick_s(3)
    console.print(f"yardstick: {yard:.3f} s CPU (baseline's {base.get('yardstick_s', yard):.3f} s)")
    rows = []
    for name, kind, source, size, policy in CELLS:
        problem = problems.get(kind, source, size)
        was = base.get("cells", {}).get(name)
        limit = margin * was["ratio"] * yard if was else float("inf")
        timeout = 60.0 + 3 * repeat * (limit if was else 60.0)
        seconds = measure(kind, problem, policy, repeat, timeout)
        rows.append(_row(name, _describe(kind, problem), seconds, yard, was, limit, timeout))
    console.print(_table(rows, margin))
    if record:
        cells = {r["name"]: {"seconds": round(r["seconds"], 4), "ratio": round(r["ratio"], 4)} for r in rows}
        baseline.write_text(json.dumps({"yardstick_s": round(yard, 4), "cells": cells}, indent=1) + "\n")
        console.print(f"baseline written: {baseline}")
        return
    failed = [r["name"] for r in rows if not r["ok"]]
    console.print(f"FAILED: {', '.join(failed)}" if failed else "all cells within their margin")
    raise typer.Exit(1 if failed else 0)


def _row(name: str, size: str, seconds: float | None, yard: float, was: dict[str, float] | None,
         limit: float, timeout: float) -> dict[str, Any]:
    ratio = None if seconds is None else seconds / yard
    times = None if ratio is None or not was else ratio / was["ratio"]
    ok = seconds is not None and seconds <= limit
    return {"name": name, "size": size, "seconds": seconds, "ratio": ratio, "was": was, "times": times,
            "limit": limit, "timeout": timeout, "ok": ok}


def _table(rows: list[dict[str, Any]], margin: float) -> Table:
    table = Table(title=f"bench smoke: CPU seconds (best of the runs) / yardstick, against the baseline "
                        f"(fail over {margin:g}x)")
    for col in ("cell", "size", "seconds", "ratio", "baseline ratio", "x baseline", "verdict"):
        table.add_column(col, justify="left" if col in ("cell", "size", "verdict") else "right")
    for r in rows:
        was = r["was"]
        table.add_row(
            r["name"], r["size"],
            f"> {r['timeout']:.0f} (killed)" if r["seconds"] is None else f"{r['seconds']:.3f}",
            "-" if r["ratio"] is None else f"{r['ratio']:.3f}",
            "-" if not was else f"{was['ratio']:.3f}",
            "-" if r["times"] is None else f"{r['times']:.2f}",
            "ok" if r["ok"] else "FAIL")
    return table


if __name__ == "__main__":
    cli()

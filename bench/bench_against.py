"""This tree against an earlier commit: replay and DAG planning speed, and whether the answers are the same.

    python bench/bench_against.py --rev 1ffebad
    python bench/bench_against.py --rev HEAD~3 --cases "lublin_256.swf:0:easy,dag:layered:10000:64:1:mdl"

The earlier commit is checked out in a temporary git worktree. Each case runs in a fresh process
under each tree in turn (`--repeat` times, alternating, the tree that goes first swapped at every
repeat, so both see the same machine load), and the
table gives the best CPU time of each, their ratio, and whether both gave the same answer: for a
replay, every job's start, end and nodes, hashed; for a plan, every task's group, slot, start and
finish. A case is a replay, `trace[@k]:jobs:policy[:params]` as in bench_replay_speed.py, a plan,
`dag:shape:tasks:groups:slots:algorithm` (shapes of bench/dag_workload.py; the list planner alone), or
a decision on bench/workload.py's problems (this tree's file, under either tree's code),
`decide:bench|production:nodes:jobs:policy` (the CPU time of one `decide()` without a budget, after a
small one that loads the loops) or `http:bench|production:nodes:jobs:policy` (POST /schedule through a
real uvicorn, second of two: the service's own `timing_ms.schedule`, wall; "size" is then that run's
parse + validate in ms). The answer digest covers starts, reservations and every reason.
A tree with the profile's compiled loops loads them before the clock starts (`profile_kernels.warm`:
~0.3 s a process from numba's cache, several seconds the first time), as a long-lived worker would.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import finish  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_TRACES = ROOT.parent / "shared" / "data" / "traces"
CASES = ("lublin_256.swf:0:easy,SDSC-SP2-1998-4.2-cln.swf:3000:priority,"
         "SDSC-SP2-1998-4.2-cln.swf:1000:conservative,dag:layered:10000:64:1:mdl")
console = Console(width=160, emoji=False)  # ":100:" in a case is not an emoji
cli = typer.Typer(add_completion=False)

# Run inside the tree under test (its own `app`), so it uses only what both trees have.
CHILD = r'''
import hashlib, json, sys, time
from dataclasses import replace
case, traces = sys.argv[1], sys.argv[2]
h = hashlib.sha256()
try:  # compiled loops loaded (or compiled) before the clock starts: a process pays it once
    from app.sched.profile_kernels import warm
    warm()
except ImportError:  # a tree from before them
    pass
try:
    from app.sim.compiled import warm as warm_replay
    warm_replay()
except ImportError:  # a tree from before the compiled replay
    pass
if case.startswith(("decide:", "http:")):  # a decision on bench/workload.py's problems (this tree's file)
    import importlib.util
    spec = importlib.util.spec_from_file_location("bench_workload_here", sys.argv[3])
    wl = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(wl)
    kind, which, n, j, policy = case.split(":")
    n, j = int(n), int(j)
    snap, jobs = (wl.cluster(n), wl.pending(j)) if which == "bench" else wl.production(n, j)
    from app.sched.registry import decide
    decide(wl.cluster(50), wl.pending(100), policy)  # the pass's caches and loops loaded
    size = j
    if kind == "decide":
        t0 = time.process_time()
        d = decide(snap, jobs, policy)
        seconds = time.process_time() - t0
        parts = [(s.job_id, s.node_ids) for s in d.starts] + [(r.job_id, r.start_time, r.node_ids)
                                                            for r in d.reservations]
        parts += [(p.job_id, str(p.reason)) for p in d.pending]
    else:  # POST /schedule through a real uvicorn: the service's own timing of the decision (wall)
        from bench.common import Server
        raw = json.dumps(wl.request_body(snap, jobs, policy)).encode()
        server = Server()
        for _ in range(1200):  # a loaded machine may take longer than Server's own wait to start it
            if server.server.started:
                break
            time.sleep(0.1)
        try:
            server.post("/schedule", raw)
            out = server.post("/schedule", raw)
        finally:
            server.close()
        timing = out["summary"]["timing_ms"]
        seconds = timing["schedule"] / 1e3
        size = round(sum(timing.get(k, 0.0) for k in ("parse", "validate")))  # the body's, ms
        parts = [out.get(k) for k in ("starts", "reservations", "pending")]
    h.update(repr(parts).encode())
elif case.startswith("dag:"):
    from bench.dag_workload import groups, shaped_dag
    from app.sched.registry import plan_dag
    _, shape, n, g, s, algorithm = case.split(":")
    p = shaped_dag(shape, int(n), groups(int(g), slots=int(s)))
    t0 = time.process_time()
    r = plan_dag(p, algorithm, search_s=0.0)
    seconds, size = time.process_time() - t0, int(n)
    for x in r.plan.placements:
        h.update(f"{x.task} {x.group} {x.slot} {x.start!r} {x.finish!r}\n".encode())
else:
    from app.cli import policy_params, policy_spec, take_predicted
    from app.sim.replay import replay
    from app.sim.swf import read_swf
    from app.sim.workload import default_machine, workload
    trace, jobs, label = case.split(":", 2)
    trace, _, wider = trace.partition("@")
    t = read_swf(f"{traces}/{trace}", int(jobs) or None)
    w = workload(t, default_machine(t))
    if wider:  # bench_replay_speed.widened, written out: an earlier tree may not have it
        k, m = int(wider), w.machine
        w = replace(w, machine=replace(m, nodes=m.nodes * k, queues=tuple((q, c * k) for q, c in m.queues)),
                    jobs=[replace(j, nodes=j.nodes * k) for j in w.jobs])
    name, pairs = policy_spec(label)
    pairs, predicted = take_predicted(pairs)
    params = policy_params(name, pairs)[1]
    t0 = time.process_time()
    r = replay(w, name, params, predict=predicted)
    seconds, size = time.process_time() - t0, len(w.jobs)
    for x in sorted(r.records, key=lambda x: (x.start, x.job.id)):
        h.update(f"{x.job.id} {x.start:.6f} {x.end:.6f} {','.join(x.nodes)}\n".encode())
print(json.dumps([seconds, size, h.hexdigest()[:12]]))
'''


def run_in(tree: Path, case: str, traces: Path, cache: Path, timeout: float) -> tuple[float, int, str]:
    """(CPU seconds, jobs or tasks, answer digest) of one case in a fresh process under `tree`.

    Its bytecode is compiled into `cache`, not read from the tree's __pycache__: a working tree's
    cache measured ~9 % slower than a fresh one for the same sources (stale files whose source
    changed within the same second and size are trusted by Python)."""
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONPYCACHEPREFIX": str(cache)}
    try:
        here = str(ROOT / "bench" / "workload.py")
        out = subprocess.run([sys.executable, "-c", CHILD, case, str(traces), here], cwd=tree, env=env,
                             capture_output=True, text=True, check=False, timeout=timeout)
    except subprocess.TimeoutExpired:
        return float("inf"), 0, f"timeout {timeout:g} s"
    if out.returncode:
        raise RuntimeError(f"{case} under {tree}: {out.stderr.strip().splitlines()[-1:]}")
    seconds, size, digest = json.loads(out.stdout)
    return seconds, size, digest


def row(trees: dict[str, Path], case: str, traces: Path, repeat: int, tmp: Path,
        timeout: float) -> dict[str, Any]:
    best = dict.fromkeys(trees, float("inf"))
    digests: dict[str, str] = {}
    size = 0
    for i in range(repeat):
        # the first of two back-to-back runs measured a few per cent faster on this machine (the
        # same code under both names): each repeat swaps which tree goes first
        for name, tree in (list(trees.items()) if i % 2 == 0 else list(trees.items())[::-1]):
            seconds, got, digests[name] = run_in(tree, case, traces, tmp / f"pycache-{name}", timeout)
            size = got or size
            best[name] = min(best[name], seconds)
    console.print(f"  {case}: {best['before']:.3f} s -> {best['after']:.3f} s")
    return {"case": case, "size": size, "before_s": best["before"], "after_s": best["after"],
            "per_s_before": size / best["before"], "per_s_after": size / best["after"],
            "ratio": best["before"] / best["after"], "same_answer": digests["before"] == digests["after"]}


@cli.command()
def main(
    rev: Annotated[str, typer.Option(help="the earlier commit (any git revision)")] = "HEAD~1",
    cases: Annotated[str, typer.Option(help="comma-separated cases (see the module's help)")] = CASES,
    traces: Annotated[Path, typer.Option(help="folder of the trace files")] = DEFAULT_TRACES,
    repeat: Annotated[int, typer.Option(help="runs of each case under each tree, alternating")] = 2,
    timeout: Annotated[float, typer.Option(help="seconds a run may take (past it: inf)")] = 1800.0,
    json_out: Annotated[Path | None, typer.Option("--json", help="write the rows here")] = None,
) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-against-") as tmp:
        old = Path(tmp) / "tree"
        git = ["git", "-C", str(ROOT), "worktree"]
        subprocess.run([*git, "add", "--detach", "-q", str(old), rev], check=True)
        try:
            trees = {"before": old, "after": ROOT}
            rows = [row(trees, case, traces.resolve(), repeat, Path(tmp), timeout)
                    for case in cases.split(",") if case]
        finally:
            subprocess.run([*git, "remove", "--force", str(old)], check=False)
    table = Table(title=f"{rev} -> this tree (best CPU time of {repeat} each; per second: jobs or tasks)")
    for c in rows[0] if rows else []:
        table.add_column(c, justify="left" if c == "case" else "right")
    for r in rows:
        table.add_row(*[f"{v:,.3f}" if c.endswith("_s") or c == "ratio" else f"{v:,.0f}"
                        if isinstance(v, float) else str(v) for c, v in r.items()])
    finish(console, [table], rows, json_out)


if __name__ == "__main__":
    cli()

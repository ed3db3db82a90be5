"""Readers beside a writer on a cached cluster in Redis, over real HTTP (uvicorn with 2 workers on
loopback, a redis-server of its own, both stopped at the end): one writer PATCHes as fast as it can
while two readers GET the cluster and schedule on it. Prints the writer's rate, the readers'
answers by status (409s to readers and 5xx: target 0), their latencies, and how many reads fell
back to the atomic copy (Redis's count of EVAL calls: the copy is the service's only EVAL; GET's
summary script runs by EVALSHA).

    python bench/bench_readers.py                  # 2,000 nodes, 20 s
    python bench/bench_readers.py --nodes 10000 --seconds 30
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Annotated, Any

import httpx
import typer
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import finish  # noqa: E402
from bench.workload import cluster, pending, request_body  # noqa: E402
from tests.redis_server import RedisServer, free_port  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent

console = Console(width=160)
cli = typer.Typer(add_completion=False)


def change(i: int, node: Any) -> dict[str, Any]:
    """Start a one-core job on a node, then end it: the writer's stream of changes."""
    if i % 2:
        return {"op": "job_ended", "job_id": f"w{i // 2}"}
    return {"op": "job_started", "job": {"id": f"w{i // 2}", "queue": node.queue, "start_time": 0,
                                         "walltime_s": 3600, "allocation": [{"node": node.id, "cpu": 1}]}}


def writer(base: str, free: list[Any], stop: threading.Event, out: Counter[str]) -> None:
    with httpx.Client(base_url=base, timeout=60) as c:
        version, i = 1, 0
        while not stop.is_set():
            r = c.patch("/clusters/b", json={"changes": [change(i, free[(i // 2) % len(free)])]},
                        headers={"if-match": str(version)})
            out[f"writer {r.status_code}"] += 1
            if r.status_code == 200:
                version, i = r.json()["version"], i + 1
            else:
                version = c.get("/clusters/b").json()["version"]


def reader(base: str, body: dict[str, Any], stop: threading.Event, out: Counter[str],
           took: dict[str, list[float]]) -> None:
    with httpx.Client(base_url=base, timeout=60) as c:
        while not stop.is_set():
            for kind, call in (("GET", lambda: c.get("/clusters/b")),
                               ("schedule", lambda: c.post("/schedule", json=body))):
                t0 = time.perf_counter()
                r = call()
                took[kind].append((time.perf_counter() - t0) * 1e3)
                out[f"{kind} {r.status_code}"] += 1


def serve(redis_url: str, workers: int) -> tuple[subprocess.Popen[bytes], str]:
    """uvicorn app.main:app on a free loopback port, answering /healthz."""
    port = free_port()
    env = os.environ | {"HPCSCHED_REDIS_URL": redis_url, "HPCSCHED_LOG_LEVEL": "warning"}
    proc = subprocess.Popen([sys.executable, "-m", "uvicorn", "app.main:app", "--host", "127.0.0.1",
                             "--port", str(port), "--workers", str(workers), "--no-access-log"],
                            cwd=ROOT, env=env, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            if httpx.get(base + "/healthz").status_code == 200:
                return proc, base
        except httpx.TransportError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("uvicorn did not start")


def run(base: str, copies: Any, nodes: int, jobs: int, seconds: float, write: bool) -> dict[str, Any]:
    snap = cluster(nodes)
    body = request_body(snap, pending(jobs), "easy")
    httpx.put(base + "/clusters/b", json={k: body[k] for k in ("nodes", "running")},
              timeout=300).raise_for_status()
    cached = {k: v for k, v in body.items() if k not in ("nodes", "running")} | {"cluster_id": "b"}
    free = [n for n in snap.nodes if n.cap[0] - n.alloc[0] >= 1 and n.state.value == "up"]
    stop, before = threading.Event(), copies()
    out: Counter[str] = Counter()
    took: dict[str, list[float]] = {"GET": [], "schedule": []}
    threads = [threading.Thread(target=writer, args=(base, free, stop, out))] if write else []
    threads += [threading.Thread(target=reader, args=(base, cached, stop, out, took)) for _ in range(2)]
    for t in threads:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join()
    reads = {k: v for k, v in out.items() if not k.startswith("writer")}
    return {"nodes": nodes, "pending": jobs, "seconds": seconds,
            "writer_changes_per_s": out["writer 200"] / seconds, "answers": dict(out),
            "reader_409": sum(v for k, v in reads.items() if k.endswith(" 409")),
            "reader_5xx": sum(v for k, v in reads.items() if k.split()[1].startswith("5")),
            "copied_reads": copies() - before,
            **{f"{k}_p50_ms": statistics.median(v) for k, v in took.items() if v},
            **{f"{k}_p99_ms": statistics.quantiles(v, n=100)[98] for k, v in took.items() if len(v) > 1}}


@cli.command()
def main(nodes: int = 2000, jobs: int = 200, seconds: float = 20.0, workers: int = 2,
         write: Annotated[bool, typer.Option(help="--no-write: the readers alone, for comparison")] = True,
         json_out: Annotated[Path | None, typer.Option("--json")] = None) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        redis_server = RedisServer(Path(tmp)).start()
        client = redis_server.client()

        def copies() -> int:
            return int(client.info("commandstats").get("cmdstat_eval", {}).get("calls", 0))
        proc, base = serve(redis_server.url, workers)
        try:
            result = run(base, copies, nodes, jobs, seconds, write)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
            redis_server.stop()
    title = f"{int(write)} writer, 2 readers (GET + schedule {jobs} jobs, easy), {seconds:.0f} s"
    table = Table(title=f"{title}, Redis, uvicorn --workers {workers}")
    for key in result:
        if key != "answers":
            table.add_column(key, justify="right")
    table.add_row(*[f"{v:,.1f}" if isinstance(v, float) else f"{v:,}" for k, v in result.items()
                    if k != "answers"])
    answers = Table(title="answers by status")
    for c in ("request", "count"):
        answers.add_column(c)
    for k, v in sorted(result["answers"].items()):
        answers.add_row(k, f"{v:,}")
    finish(console, [table, answers], result, json_out)


if __name__ == "__main__":
    cli()

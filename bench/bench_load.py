"""Load bench: a real uvicorn with several workers on loopback (and a redis-server of its own, so the
workers share cached clusters), bounded mixed traffic, then the decision budget on a 2-node x
200,000-job body under each policy, then the shutdown time under load.

    python bench/bench_load.py                        # 2 workers, 8 clients, 20 s, all six policies
    python bench/bench_load.py --seconds 5 --budget-policies easy --budget-jobs 20000   # quick look

Traffic (seeded mix): POST /schedule with an inline snapshot, POST /schedule on a cached cluster,
PATCH of that cluster (a job started, then ended, with If-Match), GET of it, POST /dag/plan.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import httpx
import typer
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.common import finish  # noqa: E402
from bench.workload import cluster, pending, request_body  # noqa: E402
from schemas.dag import EXAMPLE as DAG_EXAMPLE  # noqa: E402

cli = typer.Typer(add_completion=False)
POLICIES = "fcfs,firstfit,easy,conservative,memory_backfill,priority"
MIX = (("schedule inline", 3), ("schedule cluster_id", 3), ("patch cluster", 2), ("get cluster", 3),
       ("dag plan", 1))
READERS = ("schedule cluster_id", "get cluster")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_until(check: Any, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if check():
                return True
        except (httpx.TransportError, OSError):
            pass
        time.sleep(0.1)
    return False


def start_redis(workdir: Path) -> tuple[subprocess.Popen[bytes] | None, str | None]:
    """A redis-server of this bench's own on a free port (None when none is installed)."""
    exe = shutil.which("redis-server")
    if exe is None:
        return None, None
    port = _free_port()
    proc = subprocess.Popen([exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no", "--dir", str(workdir)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}/0"

    def answers() -> bool:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")
    _wait_until(answers, 20)
    return proc, url


def start_service(workers: int, redis_url: str | None, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "HPCSCHED_REDIS_URL")}
    env.update(HPCSCHED_LOG_LEVEL="warning", HPCSCHED_MAX_BODY_BYTES=str(256 << 20))
    if redis_url:
        env["HPCSCHED_REDIS_URL"] = redis_url
    proc = subprocess.Popen([sys.executable, "-m", "uvicorn", "app.main:app", "--host", "127.0.0.1",
                             "--port", str(port), "--workers", str(workers),
                             "--timeout-worker-healthcheck", "60", "--no-access-log"],
                            cwd=ROOT, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    if not _wait_until(lambda: httpx.get(f"{base}/healthz").status_code == 200, 60):
        proc.kill()
        raise SystemExit(f"uvicorn did not start; see {log}")
    return proc, base


@dataclass
class Traffic:
    """What the clients saw: (route, status, seconds, worker pid) per request."""

    base: str
    inline: bytes
    cached: bytes
    seed: int
    node: str = ""  # a node with a core free, where the writers start their jobs
    queue: str = "batch"
    stop: threading.Event = field(default_factory=threading.Event)
    seen: list[tuple[str, int, float, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    failures: Counter[str] = field(default_factory=Counter)

    def client(self, k: int) -> None:
        rng = random.Random(self.seed + k)
        routes = [name for name, weight in MIX for _ in range(weight)]
        with httpx.Client(base_url=self.base, timeout=600) as c:
            while not self.stop.is_set():
                route = rng.choice(routes)
                t0 = time.perf_counter()
                try:
                    r = self._one(c, route, k, rng)
                except httpx.TransportError as exc:
                    self.failures[type(exc).__name__] += 1
                    if self.stop.is_set():
                        return
                    time.sleep(0.05)
                    continue
                with self.lock:
                    self.seen.append((route, r.status_code, time.perf_counter() - t0,
                                      r.headers.get("x-worker-pid", "?")))

    def _one(self, c: httpx.Client, route: str, k: int, rng: random.Random) -> httpx.Response:
        json_type = {"content-type": "application/json"}
        if route == "schedule inline":
            return c.post("/schedule", content=self.inline, headers=json_type)
        if route == "schedule cluster_id":
            return c.post("/schedule", content=self.cached, headers=json_type)
        if route == "get cluster":
            return c.get("/clusters/bench")
        if route == "dag plan":
            return c.post("/dag/plan", json=DAG_EXAMPLE)
        return self._patch(c, k, rng)

    def _patch(self, c: httpx.Client, k: int, rng: random.Random) -> httpx.Response:
        """A writer: start a job of its own on a node, with the version it just read."""
        etag = c.get("/clusters/bench").headers.get("etag", '"0"')
        job = f"load-{k}-{rng.randrange(1 << 30)}"
        started = {"id": job, "queue": self.queue, "start_time": 1_700_000_000, "walltime_s": 60,
                   "allocation": [{"node": self.node, "cpu": 1}]}
        change = {"op": "job_started", "job": started}
        r = c.patch("/clusters/bench", json={"changes": [change]}, headers={"if-match": etag})
        if r.status_code == 200:  # take it back, so the cluster does not fill up
            c.patch("/clusters/bench", json={"changes": [{"op": "job_ended", "job_id": job}]},
                    headers={"if-match": r.headers["etag"]})
        return r


def _pct(xs: list[float], q: float) -> float:
    return statistics.quantiles(xs, n=100, method="inclusive")[q - 1] if len(xs) > 1 else xs[0]


def traffic_table(t: Traffic, seconds: float, workers: int) -> tuple[Table, dict[str, Any]]:
    table = Table(title=f"mixed traffic: {workers} workers, {seconds:.0f} s")
    for col in ("route", "requests", "req/s", "p50 ms", "p99 ms", "5xx", "409", "other 4xx"):
        table.add_column(col, justify="left" if col == "route" else "right")
    result: dict[str, Any] = {}
    for route, _ in MIX:
        rows = [s for s in t.seen if s[0] == route]
        if not rows:
            continue
        ms = [s[2] * 1e3 for s in rows]
        five = sum(1 for s in rows if s[1] >= 500)
        conflict = sum(1 for s in rows if s[1] == 409)
        other = sum(1 for s in rows if 400 <= s[1] < 500 and s[1] != 409)
        result[route] = dict(requests=len(rows), rps=len(rows) / seconds, p50_ms=_pct(ms, 50),
                             p99_ms=_pct(ms, 99), five_xx=five, conflicts=conflict, other_4xx=other)
        table.add_row(route, f"{len(rows):,}", f"{len(rows) / seconds:.1f}", f"{_pct(ms, 50):.1f}",
                      f"{_pct(ms, 99):.1f}", str(five), str(conflict), str(other))
    return table, result


def deep_queue(jobs: int, policy: str) -> bytes:
    """2 nodes, one of them full, and `jobs` pending: the body of issue 18's unbounded decision."""
    body = {
        "now": 1_700_000_000,
        "nodes": [{"id": f"n{i}", "capacity": {"cpu": 64, "mem_mib": 256_000}} for i in range(2)],
        "running": [{"id": "r0", "allocation": [{"node": "n0", "cpu": 64}], "start_time": 1_699_990_000,
                     "walltime_s": 36_000}],
        "pending": [{"id": f"j{i}", "submit_time": 1_699_000_000 + i, "cpu": 1 + i % 64,
                     "mem_mib": 1000 * (i % 7), "walltime_s": 600 + 37 * (i % 500),
                     "nodes": 1 + (i % 3 == 0)} for i in range(jobs)],
        "policy": {"name": policy},
    }
    return json.dumps(body).encode()


def budget_table(base: str, jobs: int, policies: list[str]) -> tuple[Table, list[dict[str, Any]]]:
    """Time to answer the deep queue under each policy, and what the budget did."""
    table = Table(title=f"decision budget: 2 nodes x {jobs:,} pending jobs")
    for col in ("policy", "body MB", "answer s", "budget s", "hit", "jobs looked at", "not_evaluated",
                "parse ms", "validate ms", "schedule ms"):
        table.add_column(col, justify="left" if col == "policy" else "right")
    rows = []
    with httpx.Client(base_url=base, timeout=3600) as c:
        for policy in policies:
            body = deep_queue(jobs, policy)
            t0 = time.perf_counter()
            r = c.post("/schedule", content=body, headers={"content-type": "application/json"})
            took = time.perf_counter() - t0
            if r.status_code != 200:
                table.add_row(policy, f"{len(body) / 1e6:.1f}", f"{took:.1f}", "-", f"HTTP {r.status_code}",
                              "", "", "", "", "")
                continue
            s = r.json()["summary"]
            b, tm = s["budget"], s["timing_ms"]
            rows.append(dict(policy=policy, body_mb=len(body) / 1e6, answer_s=took, **b,
                             not_evaluated=s["not_evaluated"], timing_ms=tm))
            table.add_row(policy, f"{len(body) / 1e6:.1f}", f"{took:.1f}", f"{b['time_s']}", str(b["hit"]),
                          f"{b['jobs_considered']:,}", f"{s['not_evaluated']:,}", f"{tm['parse']:,.0f}",
                          f"{tm['validate']:,.0f}", f"{tm['schedule']:,.0f}")
    return table, rows


def shutdown_under_load(t: Traffic, proc: subprocess.Popen[bytes], clients: int,
                        deep: bytes) -> dict[str, Any]:
    """SIGTERM to uvicorn while the clients keep sending and a deep-queue decision is in flight:
    seconds until the process has exited, and whether the decision in flight was answered."""
    t.stop.clear()
    threads = [threading.Thread(target=t.client, args=(100 + k,), daemon=True) for k in range(clients)]
    for th in threads:
        th.start()
    answer: dict[str, Any] = {}

    def deep_client() -> None:
        try:
            r = httpx.post(f"{t.base}/schedule", content=deep, headers={"content-type": "application/json"},
                           timeout=3600)
            answer.update(status=r.status_code, hit=r.json()["summary"]["budget"]["hit"])
        except (httpx.TransportError, ValueError) as exc:
            answer.update(status=type(exc).__name__)
    deep_thread = threading.Thread(target=deep_client, daemon=True)
    deep_thread.start()
    time.sleep(3.0)
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    proc.wait()
    took = time.monotonic() - t0
    t.stop.set()
    deep_thread.join(timeout=30)
    for th in threads:
        th.join(timeout=30)
    return {"shutdown_s": took, "exit": proc.returncode, "deep_decision": answer}


@cli.command()
def main(
    workers: Annotated[int, typer.Option(help="uvicorn worker processes")] = 2,
    clients: Annotated[int, typer.Option(help="concurrent clients (threads, one connection each)")] = 8,
    seconds: Annotated[float, typer.Option(help="length of the mixed traffic")] = 20.0,
    nodes: Annotated[int, typer.Option(help="nodes of the cluster in the traffic")] = 200,
    jobs: Annotated[int, typer.Option(help="pending jobs per traffic decision")] = 100,
    budget_jobs: Annotated[int, typer.Option(help="pending jobs of the budget body (0: skip)")] = 200_000,
    budget_policies: Annotated[str, typer.Option(help="policies for the budget body")] = POLICIES,
    seed: int = 7,
    json_out: Annotated[Path | None, typer.Option(help="write the figures as JSON")] = None,
) -> None:
    console = Console(width=150)
    work = Path(tempfile.mkdtemp(prefix="bench_load_"))
    redis, redis_url = start_redis(work)
    if redis is None and workers > 1:
        console.print("no redis-server: one worker (the in-process cache is per worker)")
        workers = 1
    proc, base = start_service(workers, redis_url, work / "uvicorn.log")
    try:
        snap = cluster(nodes)
        body = request_body(snap, pending(jobs), "easy")
        put = httpx.put(f"{base}/clusters/bench", json={"nodes": body["nodes"], "running": body["running"]},
                        timeout=120)
        put.raise_for_status()
        cached = {k: v for k, v in body.items() if k not in ("nodes", "running")} | {"cluster_id": "bench"}
        roomy = next(n for n in body["nodes"] if n["state"] == "up"
                     and n["capacity"]["cpu"] - n["allocated"]["cpu"] >= clients)
        t = Traffic(base, json.dumps(body).encode(), json.dumps(cached).encode(), seed, roomy["id"],
                    roomy["queue"])
        threads = [threading.Thread(target=t.client, args=(k,), daemon=True) for k in range(clients)]
        t0 = time.monotonic()
        for th in threads:
            th.start()
        time.sleep(seconds)
        t.stop.set()
        for th in threads:
            th.join(timeout=600)
        elapsed = time.monotonic() - t0
        table, per_route = traffic_table(t, elapsed, workers)
        pids = Counter(s[3] for s in t.seen)
        five = sum(1 for s in t.seen if s[1] >= 500)
        reader_409 = sum(1 for s in t.seen if s[0] in READERS and s[1] == 409)
        tables = [table]
        share = ", ".join(f"{pid}: {n:,}" for pid, n in sorted(pids.items()))
        summary = (f"{len(t.seen):,} requests in {elapsed:.1f} s ({len(t.seen) / elapsed:.1f}/s); "
                   f"5xx: {five}; 409 to readers: {reader_409}; answers per worker pid: {share}; "
                   f"every worker took a share: {len(pids) >= workers}; "
                   f"transport errors: {dict(t.failures) or 0}")
        budget_rows: list[dict[str, Any]] = []
        if budget_jobs:
            btable, budget_rows = budget_table(base, budget_jobs, budget_policies.split(","))
            tables.append(btable)
        stop = shutdown_under_load(t, proc, clients, deep_queue(budget_jobs or 20_000, "conservative"))
        summary += (f"\nshutdown under load ({clients} clients and a deep-queue conservative decision in "
                    f"flight): SIGTERM to exit {stop['shutdown_s']:.2f} s, exit code {stop['exit']}, "
                    f"the decision in flight: {stop['deep_decision']}")
        console.print(summary)
        finish(console, tables, {"traffic": per_route, "workers": dict(pids), "five_xx": five,
                                 "reader_409": reader_409, "budget": budget_rows, "shutdown": stop},
               json_out)
    finally:
        if proc.poll() is None:
            proc.kill()
        if redis is not None:
            redis.terminate()
            redis.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    cli()

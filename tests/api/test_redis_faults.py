"""Fault injection (slow): a real redis-server the test starts stalls (SIGSTOP/SIGCONT) or restarts
(with its append-only file, and without) in the middle of PATCH and schedule traffic from threads
against the real app. What must hold: no 5xx but the documented 503 while Redis cannot answer, no
409 to a reader, no acknowledged PATCH lost (with AOF) or applied in part; without persistence the
loss is said (404 `cluster_unknown`), never a 500, and a PUT mends it."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from app.main import create_app
from app.settings import Settings
from app.store.index import ClusterCache
from app.store.kv import RedisKv
from tests.conftest import Client
from tests.redis_server import BINARY, MISSING, RedisServer
from tests.store.test_index import index_problems

pytestmark = [pytest.mark.slow, pytest.mark.skipif(BINARY is None, reason=MISSING)]

NODES, PATCHES, FAULT_AFTER = 24, 260, 80
SNAPSHOT = {"nodes": [{"id": f"n{i:02d}", "queue": "batch", "labels": ["gpu"] if i % 4 == 0 else [],
                       "capacity": {"cpu": 64, "mem_mib": 256_000, "gpu": 4 if i % 4 == 0 else 0}}
                      for i in range(NODES)], "running": []}
SCHEDULE = {"now": 1_700_000_100, "cluster_id": "c1", "policy": {"name": "easy"},
            "pending": [{"id": f"p{i}", "queue": "batch", "submit_time": 1_699_999_000 + i, "cpu": 8,
                         "walltime_s": 900} for i in range(8)]}


def start(i: int) -> dict[str, Any]:
    return {"changes": [{"op": "job_started", "job": {
        "id": f"j{i}", "queue": "batch", "start_time": 1_700_000_000, "walltime_s": 600 + i,
        "allocation": [{"node": f"n{i % NODES:02d}", "cpu": 4, "mem_mib": 1000}]}}]}


class Traffic:
    """One writer (each PATCH starts a job) and two readers (GET, schedule) until the writer is done."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.acked: set[str] = set()  # jobs whose PATCH answered 200 (since the last PUT)
        self.unsure: set[str] = set()  # jobs whose PATCH answered 503: may or may not have landed
        self.codes: Counter[tuple[str, int, str]] = Counter()
        self.patched = 0
        self.done = threading.Event()

    def client(self) -> Client:
        c = Client(self.app)
        c.transport = httpx.ASGITransport(app=self.app, raise_app_exceptions=False)
        return c

    def note(self, who: str, r: httpx.Response) -> httpx.Response:
        kind = r.json()["detail"][0]["type"] if r.status_code >= 400 else ""
        self.codes[who, r.status_code, kind] += 1
        return r

    def version(self, c: Client) -> int | None:
        """The version to PATCH from, after an unsure answer; None when the cluster is gone."""
        while True:
            r = self.note("writer-get", c.get("/clusters/c1"))
            if r.status_code == 200:
                return int(r.json()["version"])
            if r.status_code == 404:
                return None
            time.sleep(0.05)

    def put(self, c: Client) -> int:
        while (r := c.request("PUT", "/clusters/c1", json=SNAPSHOT)).status_code != 200:
            self.note("writer-put", r)
            time.sleep(0.05)
        self.note("writer-put", r)
        self.acked.clear()
        self.unsure.clear()
        return int(r.json()["version"])

    def writer(self, version: int) -> None:
        c = self.client()
        for i in range(PATCHES):
            r = self.note("writer", c.request("PATCH", "/clusters/c1", json=start(i),
                                               headers={"if-match": str(version)}))
            self.patched += 1
            if r.status_code == 200:
                self.acked.add(f"j{i}")
                version = r.json()["version"]
                continue
            if r.status_code == 503:
                self.unsure.add(f"j{i}")
            known = self.version(c)
            version = self.put(c) if known is None else known
        self.done.set()

    def reader(self) -> None:
        c = self.client()
        while not self.done.is_set():
            for r in (c.get("/clusters/c1"), c.post("/schedule", json=SCHEDULE)):
                if self.note("reader", r).status_code != 200:
                    time.sleep(0.05)

    def run(self, fault: Any) -> None:
        """PUT, then the writer and the readers, and `fault` once FAULT_AFTER PATCHes are sent."""
        threads = [threading.Thread(target=self.writer, args=(self.put(self.client()),))]
        threads += [threading.Thread(target=self.reader) for _ in range(2)]
        for t in threads:
            t.start()
        try:
            while self.patched < FAULT_AFTER and not self.done.is_set():
                time.sleep(0.01)
            fault()
        finally:
            for t in threads:
                t.join(timeout=300)
        assert not any(t.is_alive() for t in threads)


def check(traffic: Traffic, server: RedisServer, allowed_reader_errors: set[tuple[int, str]]) -> None:
    codes = traffic.codes
    print("answers:", dict(codes))  # the figures the issue asks for (-s shows them)
    assert not [k for k in codes if k[1] >= 500 and (k[1], k[2]) != (503, "store_unavailable")], codes
    assert not [k for k in codes if k[0] == "reader" and k[1] == 409], codes
    assert {(k[1], k[2]) for k in codes if k[0] == "reader" and k[1] != 200} <= allowed_reader_errors, codes
    cache = ClusterCache(RedisKv(redis.Redis.from_url(server.url, decode_responses=True)))
    version, _, running = cache.whole("public:c1")
    held = {j.id for j in running}
    assert traffic.acked <= held, f"acknowledged PATCHes lost: {sorted(traffic.acked - held)}"
    assert held <= traffic.acked | traffic.unsure
    assert index_problems(cache, "public:c1") == []  # nothing applied in part
    c = traffic.client()  # and afterwards everything answers
    assert c.get("/clusters/c1").json()["running"] == len(held)
    assert c.post("/schedule", json=SCHEDULE).json()["summary"]["cluster_version"] == version


@contextmanager
def served(tmp_path: Path, aof: bool) -> Iterator[tuple[RedisServer, Traffic]]:
    """A redis-server of the test's own and the app's traffic on it; the server stopped after."""
    server = RedisServer(tmp_path / "redis", aof=aof).start()
    try:
        yield server, Traffic(create_app(Settings(redis_url=server.url)))
    finally:
        server.stop()


def restart(server: RedisServer) -> Callable[[], None]:
    """The fault: the server stopped, then started again on the same files a second later."""
    def fault() -> None:
        server.stop()
        time.sleep(1)
        server.start()
    return fault


def test_a_stalled_redis_costs_503s_only_and_loses_nothing(tmp_path: Path) -> None:
    """Redis frozen for 4 s (longer than the 2 s socket timeout) mid-traffic: 503s while frozen,
    then everything acknowledged is there, and whole."""
    with served(tmp_path, aof=False) as (server, traffic):
        def stall() -> None:
            server.pause()
            time.sleep(4)
            server.resume()
        traffic.run(stall)
        assert traffic.codes["reader", 503, "store_unavailable"] > 0  # the stall was seen
        check(traffic, server, {(503, "store_unavailable")})


def test_a_redis_restart_with_aof_keeps_every_acknowledged_patch(tmp_path: Path) -> None:
    """Redis stopped and started again (append-only file on) mid-traffic: 503s while it is down,
    no acknowledged PATCH lost, no PUT needed."""
    with served(tmp_path, aof=True) as (server, traffic):
        traffic.run(restart(server))
        assert traffic.codes["writer-put", 200, ""] == 1  # the first PUT only: nothing was lost
        check(traffic, server, {(503, "store_unavailable")})


def test_a_redis_restart_without_persistence_says_put_it_again(tmp_path: Path) -> None:
    """Without persistence the restart loses the cluster: readers and the writer are told 404
    `cluster_unknown` (never a 500), the writer PUTs again, and traffic goes on from there."""
    with served(tmp_path, aof=False) as (server, traffic):
        traffic.run(restart(server))
        assert traffic.codes["writer-put", 200, ""] == 2  # lost once, PUT again once
        assert traffic.codes["writer", 404, "cluster_unknown"] + traffic.codes[
            "writer-get", 404, "cluster_unknown"] > 0
        check(traffic, server, {(503, "store_unavailable"), (404, "cluster_unknown")})

"""A decision in flight on a real uvicorn (a subprocess on a free loopback port) stops early when
the service is told to shut down (SIGTERM) and when its client leaves: the budget's stop flag."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.redis_server import free_port

ROOT = Path(__file__).resolve().parents[2]


JOBS = 80_000  # ~9 s of decision on this 2-core machine, long after the signal is sent (20,000 took
# that long until the searches stopped counting references: then ~1 s, over before the signal)


def long_decision(jobs: int = JOBS) -> bytes:
    """2 nodes and `jobs` pending under conservative: one reservation each, a pass of many seconds."""
    body = {
        "now": 1_700_000_000,
        "nodes": [{"id": f"n{i}", "capacity": {"cpu": 64, "mem_mib": 256_000}} for i in range(2)],
        "running": [],
        "pending": [{"id": f"j{i}", "submit_time": 1_699_000_000 + i, "cpu": 1 + i % 64,
                     "walltime_s": 600 + 37 * (i % 500), "nodes": 1 + (i % 3 == 0)} for i in range(jobs)],
        "policy": {"name": "conservative"},
    }
    return json.dumps(body).encode()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """uvicorn app.main:app, one worker, a decision budget far beyond the test's length."""
    port = free_port()
    env = {**os.environ, "HPCSCHED_DECISION_TIME_S": "3600", "HPCSCHED_LOG_LEVEL": "warning"}
    env.pop("REDIS_URL", None)
    env.pop("HPCSCHED_REDIS_URL", None)
    log = (tmp_path / "uvicorn.log").open("wb")
    proc = subprocess.Popen([sys.executable, "-m", "uvicorn", "app.main:app", "--host", "127.0.0.1",
                             "--port", str(port), "--no-access-log"], cwd=ROOT, env=env,
                            stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 300  # the app warms its compiled loops first (cold cache: minutes)
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz").status_code == 200:
                break
        except httpx.TransportError:
            time.sleep(0.1)
    else:
        proc.kill()
        pytest.fail("uvicorn did not answer /healthz within 300 s")
    yield proc, port
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    log.close()


def _send(port: int, body: bytes) -> socket.socket:
    """POST /schedule on a raw connection: the request is in flight once this returns."""
    sock = socket.create_connection(("127.0.0.1", port))
    head = (f"POST /schedule HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode()
    sock.sendall(head + body)
    time.sleep(1.0)  # let the server read it and start deciding
    return sock


def _answer(sock: socket.socket) -> tuple[int, dict]:
    data = b""
    while chunk := sock.recv(1 << 16):
        data += chunk
        head, _, rest = data.partition(b"\r\n\r\n")
        length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                       if line.lower().startswith(b"content-length:")), None)
        if length is not None and len(rest) >= length:
            return int(head.split()[1]), json.loads(rest[:length])
    raise AssertionError(f"connection closed without a whole answer: {data[:200]!r}")


def test_sigterm_stops_the_decision_in_flight_and_the_service(
        server: tuple[subprocess.Popen[bytes], int]) -> None:
    """SIGTERM mid-decision: the client still gets its answer (the jobs not looked at are
    not_evaluated, the budget says `stopped`; on a machine so busy that the body was still being
    parsed, a 503 saying the service is shutting down), and the process exits."""
    proc, port = server
    sock = _send(port, long_decision())
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    status, out = _answer(sock)
    sock.close()
    assert proc.wait(timeout=120) in (0, -signal.SIGTERM)  # uvicorn re-raises the signal it caught
    print(f"shutdown took {time.monotonic() - t0:.2f} s")
    if status == 503:
        assert "shutting down" in out["detail"][0]["msg"]
        return
    assert status == 200
    budget = out["summary"]["budget"]
    assert budget["hit"] == "stopped" and budget["jobs_considered"] < JOBS
    assert out["summary"]["not_evaluated"] == JOBS - budget["jobs_considered"]


def test_a_client_that_leaves_frees_its_worker(server: tuple[subprocess.Popen[bytes], int]) -> None:
    """A client that disconnects mid-decision: the decision stops (counted in the metrics as a budget
    hit `stopped`), and the service goes on answering."""
    proc, port = server
    _send(port, long_decision()).close()
    metric = 'hpcsched_decision_budget_hits_total{limit="stopped"} 1.0'
    seen = ""
    # The wait is the fixture's start-up wait: once, on a loaded machine with a cold cache, 600 polls
    # were not enough (the cause is not known; the warm-up leaves nothing to compile). Unstopped, the
    # decision ends without the metric, and the test fails all the same.
    deadline = time.monotonic() + 300
    while metric not in seen and time.monotonic() < deadline:
        try:
            seen = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=30).text
        except httpx.TimeoutException:
            continue
        time.sleep(0.1)
    assert metric in seen
    assert httpx.get(f"http://127.0.0.1:{port}/healthz").status_code == 200

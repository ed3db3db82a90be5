"""POST /simulate never freezes its worker (issue 31): on a real uvicorn, /healthz answers while a long
replay runs, a client that disconnects stops its replay, and a replay past HPCSCHED_SIM_MAX_SECONDS
is stopped and answered 422 `replay_too_long`. Observed through /metrics, not by timing."""

from __future__ import annotations

import json
import random
import socket
import time
from urllib.parse import urlparse

import httpx

from app.main import create_app
from app.settings import Settings
from tests.app_server import served

RUNNING = "hpcsched_replays_running 1.0"
IDLE = "hpcsched_replays_running 0.0"


def long_replay() -> bytes:
    """2,000 jobs on 2,048 nodes under conservative: each pass books every waiting job's promise over
    a wide machine; the whole replay takes minutes on a 2-core machine."""
    rng = random.Random(5)
    jobs = [{"id": f"j{i}", "submit": float(i), "run": rng.choice([60, 600, 3600, 36000]),
             "procs": rng.choice([1, 2, 8, 64, 256, 1024])} for i in range(2000)]
    return json.dumps({"jobs": jobs, "machine": {"nodes": 2048},
                       "policy": {"name": "conservative"}}).encode()


def _ready(base: str) -> None:
    """Until the app has loaded its compiled loops (minutes on a cold numba cache)."""
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{base}/healthz", timeout=5).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise AssertionError("the service never answered /healthz")


def _until(base: str, *lines: str, within_s: float = 300) -> str:
    """/metrics once it shows every line (the replay alone would run minutes past this wait)."""
    deadline, text = time.monotonic() + within_s, ""
    while time.monotonic() < deadline:
        text = httpx.get(f"{base}/metrics", timeout=30).text
        if all(line in text for line in lines):
            return text
        time.sleep(0.1)
    raise AssertionError(f"/metrics never showed {lines}: {[x for x in text.splitlines() if 'replay' in x]}")


def _post_raw(base: str, body: bytes) -> socket.socket:
    url = urlparse(base)
    sock = socket.create_connection((url.hostname, url.port))
    sock.sendall((f"POST /simulate HTTP/1.1\r\nHost: {url.netloc}\r\nContent-Type: application/json\r\n"
                  f"Content-Length: {len(body)}\r\n\r\n").encode() + body)
    return sock


def test_healthz_answers_during_a_replay_and_a_client_that_leaves_stops_it() -> None:
    with served(create_app(Settings(sim_max_seconds=3600))) as base:
        _ready(base)
        sock = _post_raw(base, long_replay())
        _until(base, RUNNING)
        assert httpx.get(f"{base}/healthz", timeout=30).status_code == 200
        # answered while the replay was still under way on the same worker (one process, one event loop)
        text = httpx.get(f"{base}/metrics", timeout=30).text
        assert RUNNING in text and "hpcsched_replays_stopped_total{" not in text
        sock.close()
        text = _until(base, 'hpcsched_replays_stopped_total{reason="stopped"} 1.0', IDLE)
        assert 'reason="time"' not in text
        assert httpx.get(f"{base}/healthz", timeout=30).status_code == 200


def test_a_replay_past_its_time_cap_is_stopped_and_answered_422() -> None:
    with served(create_app(Settings(sim_max_seconds=0.5))) as base:
        _ready(base)
        r = httpx.post(f"{base}/simulate", content=long_replay(),
                       headers={"content-type": "application/json"}, timeout=300)
        assert r.status_code == 422, r.text
        [detail] = r.json()["detail"]
        assert detail["type"] == "replay_too_long" and detail["loc"] == ["body"]
        assert "HPCSCHED_SIM_MAX_SECONDS" in detail["msg"] and "of 2000 jobs had started" in detail["msg"]
        text = _until(base, 'hpcsched_replays_stopped_total{reason="time"} 1.0', IDLE, within_s=10)
        assert 'reason="stopped"' not in text
        # a short replay under the same cap is answered whole
        short = {"jobs": [{"id": "a", "submit": 0, "run": 10, "procs": 1}], "machine": {"nodes": 2}}
        ok = httpx.post(f"{base}/simulate", json=short, timeout=60)
        assert ok.status_code == 200 and ok.json()["jobs"] == 1

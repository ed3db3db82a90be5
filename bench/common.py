"""What the benchmarks share: a timer, a real uvicorn in a thread, and a machine-speed yardstick."""

from __future__ import annotations

import json
import socket
import statistics
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from app.main import create_app
from app.settings import Settings


def finish(console: Any, tables: list[Any], result: Any, json_out: Path | None) -> None:
    """Print the tables and the machine yardstick; write the result as JSON when asked."""
    for table in tables:
        console.print(table)
    console.print(calibration_line())
    if json_out:
        json_out.write_text(json.dumps(result, indent=1))


def calibration_line() -> str:
    """Time of a fixed pure-Python loop: numbers from two machines compare after dividing by it."""
    return f"machine yardstick: 10M-iteration Python loop {yardstick_s(clock=time.perf_counter):.2f} s"


def yardstick_s(repeat: int = 1, clock: Any = time.process_time) -> float:
    """The best of `repeat` timings (by `clock`) of a fixed 10M-iteration pure-Python loop."""
    best = float("inf")
    for _ in range(repeat):
        t0 = clock()
        total = 0
        for i in range(10_000_000):
            total += i & 7
        best = min(best, clock() - t0)
    return best


def median_ms(fn: Any, repeat: int) -> tuple[float, Any]:
    result = fn()  # warm-up
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times), result


STARTUP_S = 300  # as tests/app_server.py


class Server:
    """A real uvicorn on a free loopback port, in a thread; stopped by `close()`."""

    def __init__(self) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        config = uvicorn.Config(create_app(Settings(max_body_bytes=1 << 30)), host="127.0.0.1",
                                port=self.port, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        # the app compiles (or loads) its loops before it listens: minutes on a cold numba cache
        deadline = time.time() + STARTUP_S
        while not self.server.started and time.time() < deadline:
            if not self.thread.is_alive():
                raise RuntimeError("the benchmark's server stopped before it listened")
            time.sleep(0.05)
        if not self.server.started:
            raise RuntimeError(f"the benchmark's server did not listen within {STARTUP_S} s")
        self.client = httpx.Client(base_url=f"http://127.0.0.1:{self.port}", timeout=300)

    def post(self, path: str, raw: bytes) -> dict[str, Any]:
        r = self.client.post(path, content=raw,
                             headers={"content-type": "application/json"})
        r.raise_for_status()
        return r.json()  # type: ignore[no-any-return]

    def close(self) -> None:
        self.client.close()
        self.server.should_exit = True
        self.thread.join(timeout=10)

"""A real uvicorn serving the app on a free loopback port, in a thread, for the tests that need a
socket (a browser, the Slurm bridge over HTTP, keep-alive)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn

from app.main import create_app
from app.settings import Settings
from tests.redis_server import free_port

STARTUP_S = 300


@contextmanager
def served(app: Any = None, log_level: str = "warning") -> Iterator[str]:
    """The base URL of `app` (default: the service with default settings) while the block runs."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app if app is not None else create_app(Settings()),
                                           host="127.0.0.1", port=port, log_level=log_level))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    # the app warms its compiled loops before it listens: a minute or more on a cold numba cache
    deadline = time.monotonic() + STARTUP_S
    while not server.started and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.02)
    if not server.started:
        server.should_exit = True
        raise RuntimeError(f"the test server did not start within {STARTUP_S} s")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=20)

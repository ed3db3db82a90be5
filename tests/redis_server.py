"""Real `redis-server` processes the tests start themselves: a free loopback port, a temp directory,
stopped at the end. The tests never talk to a Redis they did not start."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import redis

BINARY = shutil.which("redis-server")
MISSING = "no redis-server binary on PATH (apt-get install redis-server; .ci/run installs it)"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RedisServer:
    """One redis-server on 127.0.0.1:`port`, its files in `workdir`. `aof` turns the append-only
    file on, synced every second as in docker/compose.yaml (a clean stop writes it all); RDB
    snapshots are off."""

    def __init__(self, workdir: Path, aof: bool = False, port: int | None = None) -> None:
        assert BINARY, MISSING
        self.workdir, self.aof = workdir, aof
        self.port = port or free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=5, decode_responses=True)

    def start(self) -> RedisServer:
        self.workdir.mkdir(parents=True, exist_ok=True)
        aof = ["--appendonly", "yes", "--appendfsync", "everysec"] if self.aof else ["--appendonly", "no"]
        self.proc = subprocess.Popen(
            [str(BINARY), "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.workdir),
             "--save", "", *aof, "--daemonize", "no", "--logfile", "redis.log"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self._wait_ready()
        return self

    def _wait_ready(self, timeout_s: float = 20.0) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            assert self.proc is not None and self.proc.poll() is None, self.log()
            try:
                if self.client().ping():
                    return
            except redis.exceptions.BusyLoadingError:
                pass
            except redis.ConnectionError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"redis-server on port {self.port} did not answer: {self.log()}")
            time.sleep(0.02)

    def stop(self) -> None:
        """SIGTERM (a clean shutdown) and wait."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)  # a paused server would never see the SIGTERM
            self.proc.terminate()
            self.proc.wait(timeout=20)
        self.proc = None

    def kill(self) -> None:
        """SIGKILL: what survives is only what the AOF already holds."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=20)
        self.proc = None

    def pause(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGCONT)

    def log(self) -> str:
        path = self.workdir / "redis.log"
        return path.read_text()[-2000:] if path.exists() else "(no log)"

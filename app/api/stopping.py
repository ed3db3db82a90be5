"""Stop decisions in flight early: when the service is told to shut down, and when the client that
asked has gone.

uvicorn's graceful shutdown waits for the requests in flight; a decision in the thread pool cannot
be interrupted, so it checks a flag before each job (`app.sched.budget.Budget.stop`) and answers with
the jobs not looked at `not_evaluated`. The flag is set by SIGTERM/SIGINT handlers chained in front
of uvicorn's own (installed at startup, in the main thread), and per request by a watcher that polls
for the client's disconnect while the decision runs.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from types import FrameType
from typing import TypeVar

from fastapi import Request
from starlette.concurrency import run_in_threadpool

T = TypeVar("T")
DISCONNECT_POLL_S = 0.25


class ShutdownFlag:
    """Set once the process has been asked to stop."""

    def __init__(self) -> None:
        self.event = threading.Event()

    def install(self) -> Callable[[], None]:
        """Chain a handler in front of the current SIGTERM/SIGINT handlers; returns the undo."""
        if threading.current_thread() is not threading.main_thread():
            return lambda: None  # signals are only handled in the main thread (e.g. TestClient)
        previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}

        def handler(sig: int, frame: FrameType | None) -> None:
            self.event.set()
            before = previous[signal.Signals(sig)]
            if callable(before):
                before(sig, frame)
            elif before == signal.SIG_DFL and sig == signal.SIGINT:
                raise KeyboardInterrupt

        for sig in previous:
            signal.signal(sig, handler)

        def undo() -> None:
            for sig, before in previous.items():
                if signal.getsignal(sig) is handler:
                    signal.signal(sig, before)
        return undo


@asynccontextmanager
async def shutdown_signals(flag: ShutdownFlag) -> AsyncIterator[None]:
    undo = flag.install()
    try:
        yield
    finally:
        undo()


async def run_watched(request: Request, work: Callable[[Callable[[], bool]], T]) -> T:
    """Run `work(stop)` in the thread pool; `stop()` turns true when the service is shutting down
    or the client has disconnected (polled every DISCONNECT_POLL_S while the work runs)."""
    shutdown: ShutdownFlag = request.app.state.shutdown
    gone = threading.Event()

    def stop() -> bool:
        return gone.is_set() or shutdown.event.is_set()

    watcher = asyncio.ensure_future(_watch(request, gone))
    try:
        return await run_in_threadpool(work, stop)
    finally:
        watcher.cancel()


async def _watch(request: Request, gone: threading.Event) -> None:
    while not await request.is_disconnected():
        await asyncio.sleep(DISCONNECT_POLL_S)
    gone.set()



"""Fewer runs of Python's cycle collector while a replay runs.

A replay makes and frees millions of short-lived records (each decision's scores, reasons and
priorities) while it holds a few hundred thousand long-lived ones (the trace's jobs and their
records). At the default threshold (a young collection every 700 net allocations), the records alive
at each collection pile up as "long-lived" and trigger a full pass over every object about once a
second: on the whole HPC2N trace, 55 full passes took 40 % of the replay. Reference counting frees
the short-lived records without the collector, so a replay raises the threshold: the collector then
runs about once per 50,000 net allocations, and cycles are still collected.

The threshold is process-wide; overlapping replays (threads of the service) share one raise, and the
last to finish puts the old threshold back.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

REPLAY_THRESHOLD = 50_000

_lock = threading.Lock()
_users = 0
_saved: tuple[int, int, int] = gc.get_threshold()


@contextmanager
def rare_collections() -> Iterator[None]:
    global _users, _saved
    with _lock:
        if _users == 0:
            _saved = gc.get_threshold()
            gc.set_threshold(max(REPLAY_THRESHOLD, _saved[0]), *_saved[1:])
        _users += 1
    try:
        yield
    finally:
        with _lock:
            _users -= 1
            if _users == 0:
                gc.set_threshold(*_saved)

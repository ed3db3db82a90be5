"""Fewer runs of Python's cycle collector while a decision or a replay runs.

A decision makes and frees hundreds of thousands of short-lived records (the scores, reasons and
priorities of every job) while the process holds long-lived ones (a snapshot's records, a cached
cluster, a replayed trace's jobs). At the default threshold (a young collection every 700 net
allocations) the records alive at each young collection pile up as "long-lived" and trigger full
passes over every object: on the whole HPC2N trace, 55 full passes took 40 % of the replay, and a
10,000-node x 5,000-job decision spent ~10 % of its median time in the collector. Reference counting
frees the short-lived records without the collector, so `decide` and `replay` raise the threshold
while they run: the collector then runs about once per 50,000 net allocations, and cycles are still
collected.

The threshold is process-wide; overlapping callers (threads of the service, or a replay's decisions
inside the replay) share one raise, and the last to finish puts the old threshold back.
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

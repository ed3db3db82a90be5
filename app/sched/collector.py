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
inside the replay) share one raise, the largest asked for, and the last to finish puts the old
threshold back.

POST /schedule asks for more while it reads a big body (app.api.routes.schedule): parsing and
checking a 14 MB snapshot makes ~10^6 objects, all alive until the answer is sent, so a young
collection in between scans them and can find no garbage among them; at the service's threshold
(200,000) those passes were a quarter of the parse and validate time. Once the request ends they
are freed by reference counting, which takes them off the collector's count again.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

REPLAY_THRESHOLD = 50_000

_lock = threading.Lock()
_wanted: list[int] = []  # the thresholds of the callers inside, in any order
_saved: tuple[int, int, int] = gc.get_threshold()


@contextmanager
def rare_collections(threshold: int = REPLAY_THRESHOLD) -> Iterator[None]:
    """At least `threshold` net allocations between young collections while this runs (the
    largest any caller inside asks for); the threshold before the first caller, after the last."""
    global _saved
    with _lock:
        if not _wanted:
            _saved = gc.get_threshold()
        _wanted.append(threshold)
        _apply()
    try:
        yield
    finally:
        with _lock:
            _wanted.remove(threshold)
            _apply()


def _apply() -> None:
    if _wanted:
        gc.set_threshold(max(max(_wanted), _saved[0]), *_saved[1:])
    else:
        gc.set_threshold(*_saved)

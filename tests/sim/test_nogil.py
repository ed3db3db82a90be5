"""A compiled replay lets the process's other threads run (issue 31, item 5).

POST /simulate replays in a worker thread; a compiled loop that held the GIL for the whole replay
froze the event loop beside it (`/healthz` hung, uvicorn killed the worker). The compiled loops
release the GIL (`nogil`): while one replays, another thread keeps ticking.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np

from app.cli import policy_params
from app.sim import compiled
from app.sim.replay import replay
from app.sim.swf import read_swf
from app.sim.workload import default_machine, workload

DATA = Path(__file__).resolve().parent.parent / "data"


def test_other_threads_run_while_a_compiled_replay_runs() -> None:
    trace = read_swf(DATA / "SDSC-SP2-1998-4.2-cln.first1500.swf")
    w = workload(trace, default_machine(trace, cores_per_node=4))
    params = policy_params("conservative", [])[1]
    assert compiled.applies(w, "conservative", params)
    replay(w, "conservative", params)  # loops loaded from numba's cache before the clock matters
    done = threading.Event()
    worker = threading.Thread(target=lambda: (replay(w, "conservative", params), done.set()))
    ticks = [time.perf_counter()]
    worker.start()
    while not done.is_set():
        time.sleep(0.002)
        ticks.append(time.perf_counter())
    worker.join()
    span = ticks[-1] - ticks[0]
    # held for the whole loop, the GIL would leave one gap about as long as the replay
    assert len(ticks) > 20 and np.diff(ticks).max() < span / 4, (len(ticks), np.diff(ticks).max(), span)

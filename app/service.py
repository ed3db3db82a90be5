"""Use cases: what each endpoint does, free of HTTP."""

from __future__ import annotations

import time

from app.convert import check_snapshot, decision_to_wire, params_from_wire, snapshot_from_wire
from app.sched.registry import decide
from schemas.schedule import ScheduleRequest, ScheduleResponse


def schedule(req: ScheduleRequest, parse_ms: float = 0.0) -> ScheduleResponse:
    """Check the request, decide, and report where the time went."""
    t0 = time.perf_counter()
    held = check_snapshot(req)
    snapshot, jobs = snapshot_from_wire(req, held)
    name, params = params_from_wire(req.policy)
    t1 = time.perf_counter()
    decision = decide(snapshot, jobs, name, params)
    t2 = time.perf_counter()
    timing = {"parse": parse_ms, "validate": (t1 - t0) * 1e3, "schedule": (t2 - t1) * 1e3}
    timing["total"] = sum(timing.values())
    return decision_to_wire(decision, name, timing)

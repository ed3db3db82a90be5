"""Digests of today's replay records, per policy, on a slice of SDSC-SP2: the exactness reference
for any speed work on the replay or the pass (same start times, ends and nodes, job for job).

    python -m tests.sim.replay_reference        # prints the digests (to refresh REFERENCE on purpose)
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from app.cli import policy_params, policy_spec, take_predicted
from app.sim.replay import ReplayResult, replay
from app.sim.swf import read_swf
from app.sim.workload import Workload, default_machine, workload

SDSC = Path(__file__).parent.parent / "data" / "SDSC-SP2-1998-4.2-cln.first1500.swf"
JOBS = 600
F1_EASY = 'priority:order=f1;reservation_depth=1;selector="first_fit"'
POLICIES = ("fcfs", "firstfit", "easy", "conservative", "memory_backfill", "priority", F1_EASY,
            F1_EASY + ";predicted=true", "priority:order=sjf;reservation_depth=2;backfill_order=\"sjf\"")


def sdsc() -> Workload:
    trace = read_swf(SDSC, limit=JOBS)
    return workload(trace, default_machine(trace))


def run(w: Workload, label: str) -> ReplayResult:
    name, pairs = policy_spec(label)
    pairs, predicted = take_predicted(pairs)
    return replay(w, name, policy_params(name, pairs)[1], predict=predicted)


def digest(result: ReplayResult) -> str:
    """Every job's id, start, end and nodes, in start order, hashed."""
    h = hashlib.sha256()
    for r in sorted(result.records, key=lambda r: (r.start, int(r.job.id))):
        h.update(f"{r.job.id} {r.start:.6f} {r.end:.6f} {','.join(r.nodes)}\n".encode())
    return h.hexdigest()[:20]


if __name__ == "__main__":
    w = sdsc()
    for label in POLICIES:
        print(f"    {label!r}: {digest(run(w, label))!r},")

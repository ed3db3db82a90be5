"""The conventional reading replays the log as the community's simulators do: strict FCFS without
backfilling gives, job for job, the waits of an independent counting FCFS written after SchedGym's
conventions (tests/sim/counting_fcfs.py), on windows of a real trace."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.sched.params import FcfsParams
from app.sim.replay import replay
from app.sim.swf import read_swf
from app.sim.workload import Reading, Workload, default_machine, workload
from tests.sim.counting_fcfs import GymJob, fcfs_waits, read_gym

SDSC = Path(__file__).parent.parent / "data" / "SDSC-SP2-1998-4.2-cln.first1500.swf"
FCFS = FcfsParams(time_grain_s=1)
WINDOW = 256


def our_waits(w: Workload, first: int, size: int) -> list[float]:
    part = Workload(w.machine, w.jobs[first:first + size], [])
    start = {r.job.id: r.start for r in replay(part, "fcfs", FCFS).records}
    return [start[j.id] - j.submit for j in part.jobs]


@pytest.fixture(scope="module")
def both() -> tuple[list[GymJob], int, int, Workload]:
    jobs, nodes, per_node = read_gym(SDSC)
    trace = read_swf(SDSC)
    return jobs, nodes, per_node, workload(trace, default_machine(trace))


def test_the_reading_keeps_the_same_jobs_in_the_same_order(both) -> None:  # type: ignore[no-untyped-def]
    """Window i of one is window i of the other: the same jobs, sizes and run times, in order."""
    gym, nodes, per_node, w = both
    assert (nodes, per_node) == (w.machine.nodes, w.machine.cores_per_node)
    assert [(j.number, j.procs, j.run) for j in gym] == [(int(j.id), j.procs, j.run) for j in w.jobs]
    cancelled = sum(j.run < 0 for j in read_swf(SDSC).jobs)
    note = f"{cancelled} jobs: run time -1 (cancelled while waiting): counted as 10 s jobs"
    assert cancelled > 0 and note in w.notes


@pytest.mark.parametrize("first", [0, 300, 700, 1100])
def test_strict_fcfs_waits_equal_the_counting_fcfs_job_for_job(both, first: int) -> None:  # type: ignore[no-untyped-def]
    """Every job of the window waits exactly as long in both (so the window's mean wait is equal)."""
    gym, nodes, per_node, w = both
    expected = fcfs_waits(gym[first:first + WINDOW], nodes, per_node)
    assert our_waits(w, first, WINDOW) == expected
    assert sum(expected) > 0  # a window where jobs queue: the check has something to compare


def test_the_old_reading_departs_from_the_counting_fcfs(both) -> None:  # type: ignore[no-untyped-def]
    """The check can fail: killing at the request and dropping run -1 jobs gives other waits."""
    gym, nodes, per_node, _ = both
    trace = read_swf(SDSC)
    old = workload(trace, default_machine(trace), Reading(kill_at_request=True, unknown_runtime="drop"))
    assert len(old.jobs) < len(gym)
    expected = fcfs_waits(gym[:len(old.jobs)], nodes, per_node)
    assert our_waits(old, 0, len(old.jobs)) != expected


def test_the_counting_fcfs_on_a_hand_trace() -> None:
    """4 nodes: A (3 nodes, 10 s) at 0; B (2 nodes) at 1 waits for A; C (1 node) at 2 waits behind B."""
    jobs = [GymJob(1, 0, 10, 3), GymJob(2, 1, 5, 2), GymJob(3, 2, 5, 1)]
    assert fcfs_waits(jobs, 4, 1) == [0, 9, 8]
    assert fcfs_waits(jobs, 2, 2) == [0, 9, 8]  # 2 nodes of 2 processors: A holds both

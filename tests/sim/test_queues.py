"""The replay on a machine split among the trace's queues: how the nodes are split, the jobs that are
left out and said so, exact starts with and without balancing, and the invariants of a real trace's
multi-queue replay (capacity, a job on its queue's nodes, migrated jobs behind native ones)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.sched.params import EasyParams, MigrationParams
from app.sim.replay import JobRecord, replay
from app.sim.swf import read_swf
from app.sim.workload import Machine, SimJob, Workload, default_machine, partitioned, work_split, workload
from tests.sim.test_replay import SDSC, check_capacity

NONE = EasyParams(time_grain_s=1)
STATIC = EasyParams(time_grain_s=1, migration=MigrationParams())
DYNAMIC = EasyParams(time_grain_s=1, migration=MigrationParams(mode="dynamic"))


def swf(*jobs: tuple[int, int, int, int]) -> bytes:
    """(submit, run, processors, queue number) per job; estimates exact; queues 1 = q1, 2 = q2."""
    lines = [f"{i} {s} -1 {r} {p} -1 -1 {p} {r} -1 1 1 1 -1 {q} -1 -1 -1"
             for i, (s, r, p, q) in enumerate(jobs, start=1)]
    head = "; MaxProcs: 4\n; Queue: 1 q1\n; Queue: 2 q2\n"
    return (head + "\n".join(lines) + "\n").encode()


# Two queues of 2 one-core nodes. J1 (q1, t0, 2 nodes, 100 s) fills q1: its load 1.0 > 0.85.
# J2 (q1, t1, 1 node, 10 s) finds q1 full. Balancing off: it waits for J1, starts at 100.
# Static: q1 is over the threshold and q2 idle: J2 moves to q2 and starts at 1.
# Dynamic: J2 would wait 99 s in q1 against 0 in q2, its waiting cost (99 x 0.5) beats its
# migration cost (10 x 0.5): it moves too. J3 (q2, t2, 2 nodes, 10 s) then waits for J2 (11).
HAND = swf((0, 100, 2, 1), (1, 10, 1, 1), (2, 10, 2, 2))
SPLIT = {"q1": 2, "q2": 2}
EXPECTED = {
    "none": ({"1": 0, "2": 100, "3": 2}, set()),
    "static": ({"1": 0, "2": 1, "3": 11}, {"2"}),
    "dynamic": ({"1": 0, "2": 1, "3": 11}, {"2"}),
}


@pytest.mark.parametrize(("mode", "params"), [("none", NONE), ("static", STATIC), ("dynamic", DYNAMIC)])
def test_exact_starts_with_and_without_balancing(mode: str, params: EasyParams) -> None:
    w = partitioned(workload(read_swf(HAND), Machine(4)), SPLIT)
    result = replay(w, "easy", params)
    starts, migrated = EXPECTED[mode]
    assert {r.job.id: r.start for r in result.records} == starts
    assert {r.job.id for r in result.records if r.migrated} == migrated
    check_queues(result.records, w.machine)


def check_queues(records: list[JobRecord], machine: Machine) -> None:
    """Each job ran on nodes of the queue it ran in; it ran in its own queue unless it migrated."""
    queue_of = [q for q, n in machine.queues for _ in range(n)]
    for r in records:
        assert {queue_of[int(n[1:])] for n in r.nodes} == {r.queue}, f"job {r.job.id} outside {r.queue}"
        assert (r.queue != r.job.trace_queue) == r.migrated


def test_work_split_gives_each_queue_its_median_width_then_shares_the_rest() -> None:
    jobs = [SimJob(str(i), i, run, run, n, n, 1, 0, q)
            for i, (q, n, run) in enumerate([("a", 4, 100), ("a", 4, 100), ("a", 8, 100), ("b", 1, 100)])]
    # medians a 4, b 1: 11 nodes left; work a 1,600 of 1,700 -> 10.35 nodes, b 0.65: floors a 10,
    # b 0, and the one node left goes to the larger remainder (b 0.65 > a 0.35): a 4 + 10, b 1 + 1
    assert work_split(jobs, 16) == {"a": 14, "b": 2}


@given(st.lists(st.tuples(st.sampled_from("abc"), st.integers(1, 6), st.integers(1, 1000)), min_size=2),
       st.integers(0, 40))
def test_work_split_hands_out_every_node(spec: list[tuple[str, int, int]], extra: int) -> None:
    jobs = [SimJob(str(i), i, run, run, n, n, 1, 0, q) for i, (q, n, run) in enumerate(spec)]
    medians = {q: sorted(j.nodes for j in jobs if j.trace_queue == q)[len([j for j in jobs
                                                                           if j.trace_queue == q]) // 2]
               for q in {j.trace_queue for j in jobs}}
    nodes = sum(medians.values()) + extra
    sizes = work_split(jobs, nodes)
    assert sum(sizes.values()) == nodes
    assert all(sizes[q] >= medians[q] for q in medians)


def test_jobs_wider_than_their_partition_are_left_out_and_counted() -> None:
    w = partitioned(workload(read_swf(swf((0, 10, 3, 1), (0, 10, 1, 1), (0, 10, 2, 2))), Machine(4)), SPLIT)
    assert [j.id for j in w.jobs] == ["2", "3"]
    assert any("1 jobs left out: wider than their queue's partition" in n for n in w.notes)
    assert w.machine.queues == (("q1", 2), ("q2", 2)) and w.machine.nodes == 4


def test_bad_splits_are_refused() -> None:
    w = workload(read_swf(HAND), Machine(4))
    with pytest.raises(ValueError, match="no nodes given for queue"):
        partitioned(w, {"q1": 4})
    one_queue = Workload(w.machine, [j for j in w.jobs if j.trace_queue == "q1"])
    with pytest.raises(ValueError, match="nothing to split"):
        partitioned(one_queue)


@pytest.fixture(scope="module")
def sdsc_split() -> Workload:
    trace = read_swf(SDSC, limit=800)
    return partitioned(workload(trace, default_machine(trace)))


@pytest.mark.parametrize("params", [NONE, STATIC, DYNAMIC], ids=["none", "static", "dynamic"])
def test_real_trace_multi_queue_invariants(sdsc_split: Workload, params: EasyParams) -> None:
    result = replay(sdsc_split, "easy", params)
    assert not result.unstarted and len(result.records) == len(sdsc_split.jobs)
    check_capacity(result.records, sdsc_split.machine)
    check_queues(result.records, sdsc_split.machine)
    for r in result.records:
        assert r.start >= r.job.submit and r.end == r.start + r.job.run
    if params.migration is not None:
        assert any(r.migrated for r in result.records)


@pytest.mark.slow  # three replays of 800 real jobs: a quality measurement, ~30 s
def test_balancing_helps_a_split_real_trace(sdsc_split: Workload) -> None:
    """A split machine makes jobs wait behind busy queues while others idle; balancing gets much of
    that back (SDSC's first 800 jobs on 5 queues: mean bsld 118 off, 69 static, 66 dynamic)."""
    def bsld(params: EasyParams) -> float:
        recs = replay(sdsc_split, "easy", params).records
        return sum(max(1.0, (r.end - r.job.submit) / max(r.end - r.start, 10.0)) for r in recs) / len(recs)

    off, static, dynamic = bsld(NONE), bsld(STATIC), bsld(DYNAMIC)
    assert static < off * 2 / 3 and dynamic < off * 2 / 3

"""SWF parsing: header comments, queues, unknown values, gzip, and malformed lines named by number."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from app.sched.params import FcfsParams
from app.sim.replay import replay
from app.sim.swf import SwfError, read_swf
from app.sim.workload import Machine, Reading, default_machine, workload

DATA = Path(__file__).parent.parent / "data"
SDSC = DATA / "SDSC-SP2-1998-4.2-cln.first1500.swf"

TINY = b"""; Version: 2.2
; MaxNodes: 4
; MaxProcs: 8
; Queue: 0 interactive
; Queue: 1 batch
; a comment without a colon

1 0 5 10 2 -1 -1 2 20 -1 1 7 1 -1 1 -1 -1 -1
2 3 -1 -1 -1 -1 -1 4 100 -1 5 8 1 -1 0 -1 -1 -1
3 4 0 30 -1 -1 -1 3 -1 -1 1 9 1 -1 -1 -1 -1 -1
"""


def test_header_queues_and_jobs() -> None:
    t = read_swf(TINY)
    assert t.header_int("MaxNodes") == 4 and t.header_int("MaxProcs") == 8
    assert t.queues == {0: "interactive", 1: "batch"}
    assert [j.job_id for j in t.jobs] == ["1", "2", "3"]
    first = t.jobs[0]
    got = (first.submit, first.run, first.procs, first.req_time, first.user, first.queue)
    assert got == (0, 10, 2, 20, 7, 1)
    assert t.jobs[2].procs == 3 and t.jobs[2].alloc_procs == -1


def test_workload_keeps_a_cancelled_job_as_ten_seconds_and_says_so() -> None:
    """Job 2 (run -1, no allocation, 4 requested) is a 10 s job of 4 processors; job 3 has no request."""
    t = read_swf(TINY)
    w = workload(t, default_machine(t))
    assert w.machine.nodes == 8 and w.machine.cores_per_node == 1
    assert [(j.id, j.run, j.procs) for j in w.jobs] == [("1", 10, 2), ("2", 10.0, 4), ("3", 30, 3)]
    assert w.jobs[2].estimate == 30.0  # no requested time: the run time stands in
    assert "1 jobs: run time -1 (cancelled while waiting): counted as 10 s jobs" in w.notes
    assert any(n.startswith("1 jobs: no requested time") for n in w.notes)
    assert w.jobs[0].trace_queue == "batch"


# (submit, run, allocated, requested processors, requested time) per job, numbered from 1
RULES = [(0, 50, 4, 2, 100), (1, 300, 2, 2, 100), (2, -1, -1, 3, 60), (3, 0, 1, 1, 60), (4, 20, -1, -1, 60),
         (5, 20, -1, 2, -1), (6, 40, 1, 3, 60)]


def rules_trace(jobs: list[tuple[int, int, int, int, int]] = RULES) -> bytes:
    lines = [f"{i} {s} -1 {r} {a} -1 -1 {p} {e} -1 1 1 1 -1 0 -1 -1 -1"
             for i, (s, r, a, p, e) in enumerate(jobs, start=1)]
    return ("; MaxProcs: 8\n" + "\n".join(lines) + "\n").encode()


READINGS = {
    # id: (size, run, estimate) of each job kept
    "no future": (Reading(), {"1": (4, 50, 100), "2": (2, 300, 100), "3": (3, 10, 60), "6": (2, 20, 20),
                              "7": (3, 40, 60)}),
    "allocated size": (Reading(size="allocated"), {"1": (4, 50, 100), "2": (2, 300, 100), "3": (3, 10, 60),
                                                   "6": (2, 20, 20), "7": (1, 40, 60)}),
    "requested size": (Reading(size="requested"), {"1": (2, 50, 100), "2": (2, 300, 100), "3": (3, 10, 60),
                                                   "6": (2, 20, 20), "7": (3, 40, 60)}),
    "kill at request": (Reading(kill_at_request=True),
                        {"1": (4, 50, 100), "2": (2, 100, 100), "3": (3, 10, 60), "6": (2, 20, 20),
                         "7": (3, 40, 60)}),
    "raise to run": (Reading(raise_to_run=True), {"1": (4, 50, 100), "2": (2, 300, 300), "3": (3, 10, 60),
                                                  "6": (2, 20, 20), "7": (3, 40, 60)}),
    "drop unknown run": (Reading(unknown_runtime="drop"),
                         {"1": (4, 50, 100), "2": (2, 300, 100), "6": (2, 20, 20), "7": (3, 40, 60)}),
    "keep zero run": (Reading(zero_runtime="keep"), {"1": (4, 50, 100), "2": (2, 300, 100), "3": (3, 10, 60),
                                                     "4": (1, 0, 60), "6": (2, 20, 20), "7": (3, 40, 60)}),
}


@pytest.mark.parametrize("name", list(READINGS))
def test_each_reading_rule(name: str) -> None:
    """Each option changes exactly its rule: size, kill, raise, run -1, run 0; no processors is always
    left out. By default a job is told its request even when it ran longer (job 2), and sized by the
    larger of its allocated and requested processors (jobs 1 and 7)."""
    reading, expected = READINGS[name]
    w = workload(read_swf(rules_trace()), Machine(8), reading)
    assert {j.id: (j.procs, j.run, j.estimate) for j in w.jobs} == expected
    assert "1 jobs: no processor count: left out" in w.notes


def test_every_adjustment_is_counted_in_the_notes() -> None:
    """One note per rule that touched a job, with its count."""
    notes = workload(read_swf(rules_trace()), Machine(8)).notes
    assert notes == [
        "1 jobs: run time -1 (cancelled while waiting): counted as 10 s jobs",
        "1 jobs: run time 0 s: left out",
        "1 jobs: no processor count: left out",
        "2 jobs: allocated and requested processors differ: sized by the larger count",
        "1 jobs: ran past their requested time: the scheduler is told the request and they run their "
        "recorded time, not killed (SchedGym's rule)",
        "1 jobs: no requested time: the scheduler is told the run time",
    ]


def test_submit_ties_are_ordered_by_job_number_not_text() -> None:
    """Jobs 9999 and 10000 submitted together arrive, and start, 9999 first ("10000" < "9999" as text)."""
    tail = b" -1 10 1 -1 -1 1 10 -1 1 1 1 -1 0 -1 -1 -1\n"
    text = b"; MaxProcs: 1\n10000 5" + tail + b"9999 5" + tail + b"8 1" + tail
    w = workload(read_swf(text), Machine(1))
    assert [j.id for j in w.jobs] == ["8", "9999", "10000"]
    starts = {r.job.id: r.start for r in replay(w, "fcfs", FcfsParams(time_grain_s=1)).records}
    assert starts == {"8": 1, "9999": 11, "10000": 21}


def test_an_unknown_reading_option_is_refused() -> None:
    """A misspelt option is an error naming it, not a silent default."""
    with pytest.raises(ValueError, match="size is one of larger, allocated, requested"):
        workload(read_swf(TINY), Machine(8), Reading(size="alloc"))


def test_killing_and_raising_at_the_request_exclude_each_other() -> None:
    with pytest.raises(ValueError, match="exclude each other"):
        workload(read_swf(TINY), Machine(8), Reading(kill_at_request=True, raise_to_run=True))


def test_cores_per_node_packs_processors_into_nodes() -> None:
    t = read_swf(TINY)
    w = workload(t, default_machine(t, cores_per_node=2))
    assert w.machine.nodes == 4
    assert [(j.nodes, j.cpu) for j in w.jobs] == [(1, 2), (2, 2), (2, 2)]


def test_gzip_is_read_like_plain(tmp_path: Path) -> None:
    gz = tmp_path / "t.swf.gz"
    gz.write_bytes(gzip.compress(SDSC.read_bytes()))
    plain, packed = read_swf(SDSC), read_swf(gz)
    assert packed.jobs == plain.jobs and len(plain.jobs) == 1500
    assert read_swf(gzip.compress(TINY)).jobs == read_swf(TINY).jobs
    assert plain.queues[3] == "normal" and plain.header_int("MaxProcs") == 128


@pytest.mark.parametrize(("line", "msg"), [
    (b"1 2 3\n", "18 fields, this one has 3"),
    (b"1 0 5 ten 2 -1 -1 2 20 -1 1 7 1 -1 1 -1 -1 -1\n", "not a number"),
])
def test_malformed_line_is_named(line: bytes, msg: str) -> None:
    with pytest.raises(SwfError) as err:
        read_swf(TINY + line)
    assert err.value.line == 11 and msg in str(err.value)


def test_limit_keeps_the_first_jobs() -> None:
    assert len(read_swf(SDSC, limit=10).jobs) == 10


def test_memory_requests_become_per_node_mib_and_oversized_ones_are_noted() -> None:
    # job 1 asks 2 processors × 600,000 KB; job 2 asks 1 processor × 100,000 KB
    t = read_swf(b"; MaxProcs: 4\n"
                 b"1 0 -1 10 2 -1 -1 2 20 600000 1 1 1 -1 0 -1 -1 -1\n"
                 b"2 0 -1 10 1 -1 -1 1 20 100000 1 1 1 -1 0 -1 -1 -1\n")
    w = workload(t, default_machine(t, cores_per_node=2, mem_mib_per_node=1024))
    assert [(j.nodes, j.cpu, j.mem_mib) for j in w.jobs] == [(1, 2, 1024), (1, 1, 98)]
    assert any(n.startswith("1 jobs: asked more memory") for n in w.notes)


@pytest.mark.parametrize("bad", [b"inf", b"nan", b"1e300"])
def test_non_finite_or_absurd_values_are_named(bad: bytes) -> None:
    with pytest.raises(SwfError) as err:
        read_swf(TINY + b"4 0 -1 " + bad + b" 1 -1 -1 1 20 -1 1 7 1 -1 1 -1 -1 -1\n")
    assert err.value.line == 11 and "finite" in str(err.value)

"""SWF parsing: header comments, queues, unknown values, gzip, and malformed lines named by number."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from app.sim.swf import SwfError, read_swf
from app.sim.workload import default_machine, workload

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


def test_workload_leaves_out_unrunnable_jobs_and_says_so() -> None:
    t = read_swf(TINY)
    w = workload(t, default_machine(t))
    assert w.machine.nodes == 8 and w.machine.cores_per_node == 1
    assert [j.id for j in w.jobs] == ["1", "3"]
    assert w.jobs[1].estimate == 30.0  # no requested time: the run time stands in
    assert any("1 jobs left out" in n for n in w.notes) and any("stands in" in n for n in w.notes)
    assert w.jobs[0].trace_queue == "batch"


def test_cores_per_node_packs_processors_into_nodes() -> None:
    t = read_swf(TINY)
    w = workload(t, default_machine(t, cores_per_node=2))
    assert w.machine.nodes == 4
    assert [(j.nodes, j.cpu) for j in w.jobs] == [(1, 2), (2, 2)]


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
    assert any("1 jobs asked more memory" in n for n in w.notes)


@pytest.mark.parametrize("bad", [b"inf", b"nan", b"1e300"])
def test_non_finite_or_absurd_values_are_named(bad: bytes) -> None:
    with pytest.raises(SwfError) as err:
        read_swf(TINY + b"4 0 -1 " + bad + b" 1 -1 -1 1 20 -1 1 7 1 -1 1 -1 -1 -1\n")
    assert err.value.line == 11 and "finite" in str(err.value)

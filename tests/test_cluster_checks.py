"""`app.clusters.check_pending` (a pass on a cached cluster) refuses exactly what a plain check of
every job refuses, in the same order, though it looks one by one only at the jobs a check could
refuse."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.clusters import check_pending
from app.convert import promise_errors, shape_errors
from app.errors import ErrorDetail, InputError
from schemas.schedule import PendingJobIn

NODES = ["n1", "n2", "n3"]


def plain_errors(pending: list[PendingJobIn], total_nodes: int, running: set[str]) -> list[ErrorDetail]:
    """The spec: every job checked in the body's order (the windows left out)."""
    known = set(NODES)
    errors: list[ErrorDetail] = []
    seen: set[str] = set()
    for i, p in enumerate(pending):
        loc = ("body", "pending", i)
        if p.id in seen or p.id in running:
            what = "duplicate pending job id" if p.id in seen else "already running: job"
            errors.append(ErrorDetail((*loc, "id"), f"{what} {p.id!r}", "duplicate"))
        seen.add(p.id)
        if p.nodes > total_nodes:
            errors.append(ErrorDetail((*loc, "nodes"), f"asks for {p.nodes} nodes; the cluster has "
                                      f"{total_nodes}", "too_many_nodes"))
        errors += promise_errors(i, p, known) + shape_errors(i, p)
    return errors


@st.composite
def pending_job(draw: st.DrawFn) -> PendingJobIn:
    body: dict[str, Any] = {"id": draw(st.sampled_from(["a", "b", "c", "d", "e", "f"])),
                            "submit_time": 0, "walltime_s": 60, "nodes": draw(st.integers(1, 5))}
    if draw(st.booleans()):
        body["mem_mib_per_cpu"] = draw(st.sampled_from([100, 10**9 // 4]))
        body["cpu"] = draw(st.integers(1, 8))
        if draw(st.booleans()):
            body["mem_mib"] = 10
    if draw(st.integers(0, 3)) == 0:
        body["promised_nodes"] = draw(st.lists(st.sampled_from([*NODES, "nx"]), max_size=4))
    if draw(st.integers(0, 3)) == 0:
        body["promised_start"] = 100
    return PendingJobIn.model_validate(body)


def refused(pending: list[PendingJobIn], total_nodes: int, running: set[str]) -> list[ErrorDetail]:
    try:
        check_pending(pending, total_nodes, lambda ids: set(NODES).intersection(ids),
                      lambda ids: running.intersection(ids))
    except InputError as exc:
        return exc.errors
    return []


@settings(max_examples=300, deadline=None)
@given(st.lists(pending_job(), max_size=12), st.integers(1, 6),
       st.sets(st.sampled_from(["a", "b", "c", "z"]), max_size=2))
def test_the_checks_refuse_what_checking_every_job_refuses(pending: list[PendingJobIn], total: int,
                                                           running: set[str]) -> None:
    assert refused(pending, total, running) == plain_errors(pending, total, running)


def test_a_clean_deep_queue_passes_and_one_bad_job_among_many_is_named() -> None:
    jobs = [PendingJobIn.model_validate({"id": f"j{i}", "submit_time": 0, "walltime_s": 60})
            for i in range(1000)]
    assert refused(jobs, 3, set()) == []
    jobs[700] = PendingJobIn.model_validate({"id": "j700", "submit_time": 0, "walltime_s": 60,
                                             "nodes": 4})
    with pytest.raises(InputError) as exc:
        check_pending(jobs, 3, lambda ids: ids, lambda ids: ())
    assert [e.loc for e in exc.value.errors] == [("body", "pending", 700, "nodes")]

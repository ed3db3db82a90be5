"""What a decision costs grows with the work, not with shapes x nodes (issue 31).

A guard, not a timing: the pass's profile counts the node rows of the free-now table its
questions and the sure waits' counts read (`Profile.rows_read`), and on a fixed, busy cluster with
hundreds of distinct job shapes that count must stay under a bound linear in pending + nodes. The
sure waits once recounted every shape over every node after each start (73 s instead of 0.1 s on
10,000 nodes x 5,000 jobs): under `easy` without a budget that read 1,441,260 rows here, against a
bound of 50,000 (22,590 now).

Also: the compiled count of nodes covering each shape is the plain count, and the pass answers the
sure waits alike with and without a budget.
"""

from __future__ import annotations

from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.sched import backfill, sure_waits
from app.sched.budget import Budget
from app.sched.model import Job, Snapshot
from app.sched.policies import base
from app.sched.registry import decide
from app.sched.sure_waits import NO_CHECK, count_covering
from app.sched.timeline import Profile
from tests.builders import NOW, job, node, running, snapshot
from tests.invariants import check_decision

ROWS_PER_ITEM = 50  # rows a decision may read per pending job and node, whatever the shapes


def _many_shapes(n_nodes: int = 400, n_jobs: int = 600, seed: int = 3) -> tuple[Snapshot, list[Job]]:
    """Two queues of 64-core nodes, nearly all with 0-2 cores free and one in twenty with 16, for
    6-10 hours; jobs of 4-16 cores, up to 5 hours and mostly distinct memory demands (hundreds of
    shapes), most on one node, a few wide: a few start, the rest wait for resources. (A job blocked
    by a reservation is looked at, and its look reads its eligible nodes: that is the work of a
    job looked at, not the sure waits' overhead this guards.)"""
    rng = np.random.default_rng(seed)
    nodes, run = [], []
    for i in range(n_nodes):
        nid = f"n{i:04d}"
        nodes.append(node(nid, cpu=64, mem=262_144, queue="a" if i % 3 else "b"))
        used = 48 if rng.random() < 0.05 else int(rng.integers(62, 65))
        run.append(running(f"r{i}", {nid: (used, used * 3_000, 0)}, NOW + 60.0 * int(rng.integers(400, 600)),
                           queue="a" if i % 3 else "b"))
    jobs = [job(f"j{k:04d}", NOW - 60.0 * int(rng.integers(0, 1000)), 60.0 * int(rng.integers(1, 300)),
                nodes=int(rng.integers(2, 9)) if rng.random() < 0.05 else 1,
                cpu=int(rng.choice([4, 8, 16])), mem=int(rng.integers(1, 60_000)),
                queue="a" if rng.random() < 0.7 else "b")
            for k in range(n_jobs)]
    return snapshot(nodes, run), jobs


class _Counted(Profile):
    made: list[Profile] = []

    def __init__(self, *args, **kw) -> None:  # noqa: ANN002, ANN003
        super().__init__(*args, **kw)
        _Counted.made.append(self)


def _rows_read(snap: Snapshot, jobs: list[Job], policy: str, budget: Budget | None) -> int:
    _Counted.made = []
    with mock.patch.object(base, "Profile", _Counted):
        d = decide(snap, jobs, policy, None, budget)
    assert check_decision(snap, jobs, d) == []
    assert d.summary.started + d.summary.backfilled >= 3  # the sure waits' counts change as jobs start
    return sum(p.rows_read for p in _Counted.made)


@pytest.mark.parametrize("policy", ["easy", "priority", "memory_backfill"])
@pytest.mark.parametrize("budgeted", [False, True])
def test_rows_read_grow_with_pending_and_nodes_not_shapes_times_nodes(policy: str, budgeted: bool) -> None:
    snap, jobs = _many_shapes()
    assert len({(j.queue, j.cpu, j.mem_mib) for j in jobs}) > 500
    budget = Budget.starting_now(lambda: 0.0, 1e9) if budgeted else None
    rows = _rows_read(snap, jobs, policy, budget)
    assert rows <= ROWS_PER_ITEM * (len(jobs) + len(snap.nodes)), rows


amounts = st.integers(-3, 12)


@settings(max_examples=150, deadline=None)
@given(free=st.lists(st.tuples(amounts, amounts, amounts), max_size=40),
       need=st.lists(st.tuples(amounts, st.one_of(st.just(NO_CHECK), amounts),
                               st.one_of(st.just(NO_CHECK), amounts)), max_size=30),
       direct=st.booleans())
def test_count_covering_is_the_plain_count(free, need, direct) -> None:  # noqa: ANN001
    """The sweep and tree count what comparing every node with every threshold counts (and so does
    the direct count it falls back to when the tree would be too large)."""
    f = np.array(free, dtype=np.int64).reshape(-1, 3).T.copy()
    q = np.array(need, dtype=np.int64).reshape(-1, 3).T.copy()
    plain = [sum(all(f[r, m] >= q[r, s] for r in range(3)) for m in range(f.shape[1]))
             for s in range(q.shape[1])]
    with mock.patch.object(sure_waits, "GRID_CELLS_PER_ITEM", -10**6 if direct else 8):
        assert count_covering(f, q).tolist() == plain


@pytest.mark.parametrize("policy", ["easy", "priority", "conservative"])
@pytest.mark.parametrize("cap", [None, 150, 599])
@pytest.mark.parametrize("shortest", [1, backfill.SHORTEST_RUN])
def test_bulk_waits_under_a_budget_decide_as_one_by_one(policy: str, cap: int | None, shortest: int) -> None:
    """With a cap on the jobs looked at (or none), the pass that answers the sure waits at once
    (every run of them, or the longer ones) gives the decision of the pass that looks at each job."""
    snap, jobs = _many_shapes(200, 300)
    with mock.patch.object(backfill, "BULK_WAITS_FROM", 0), \
            mock.patch.object(backfill, "SHORTEST_RUN", shortest), \
            mock.patch.object(backfill, "WAITS_BEFORE_BULK", 2 * shortest):
        fast = decide(snap, jobs, policy, None, Budget(max_jobs=cap))
    with mock.patch.object(backfill, "BULK_WAITS_FROM", 10**9):
        plain = decide(snap, jobs, policy, None, Budget(max_jobs=cap))
    assert fast == plain

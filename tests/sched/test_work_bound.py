"""What a decision costs grows with the work, not with shapes x nodes (issue 31).

A guard, not a timing: the compiled pass counts the node rows its walks over an eligible set's
nodes touch (`PassResult.rows`), and on a fixed,
busy cluster with hundreds of distinct job shapes that count must stay under a bound linear in
pending + nodes. A pass that looked at every eligible node for each job that waits (no frontier of
demands that found too few nodes, no `low` place past the full nodes) would touch about
pending x eligible nodes; the test says how far over the bound that is. The sure waits of an
earlier pass once recounted every shape over every node after each start (73 s instead of 0.1 s on
10,000 nodes x 5,000 jobs): 1,441,260 rows here, against a bound of 50,000.

A start under the evaluation selector (priority's) once ranked every node with the demand free, then
walked them: on a roomy cluster where most jobs start, that is starts x nodes (240,000 rows on the
cluster below, against a bound of 50,000); its walk now stops at the first clear node, as the fixed
orders' does, and the nodes whose key a start changed are kept apart in short lists
(`core_kernel._shrunk_evaluated`), whose upkeep is counted too.

The nodes a reservation's search searches (`PassResult.searched`) are those its level bounds do not rule
out (`profile_kernels.bound_slot`): a deep pass (`priority`, `conservative`: every blocked job reserves)
searched reservations x eligible nodes before them (conservative: 1,773 reservations, 6.0 million nodes
on bench/workload.py's 10,000 nodes x 5,000 jobs; 574,000 with them; 235,000 once whole-node jobs and a
multi-node job's later candidates and sure start are bounded too), and is held here under a bound linear
in pending + nodes, below every job searching its whole eligible set. Not bounded: `memory_backfill`
(one reservation per node) searches every eligible node still.
"""
from __future__ import annotations

from collections.abc import Sequence
from unittest import mock

import numpy as np
import pytest

from app.sched.budget import Budget
from app.sched.core import CorePass, PassResult
from app.sched.model import Job, Snapshot
from app.sched.policies import base
from app.sched.registry import POLICIES, decide
from tests.builders import NOW, job, node, running, snapshot
from tests.invariants import check_decision

ROWS_PER_ITEM = 50  # rows a decision may read per pending job and node, whatever the shapes
SEARCHED_PER_ITEM = 20  # nodes a decision's reservations may search per pending job and node


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


def _rows(snap: Snapshot, jobs: list[Job], policy: str, budget: Budget | None,
          params: object = None) -> tuple[int, int, int]:
    """The node rows the decision's pass touched, the nodes its reservation searches searched, and
    the jobs it started."""
    seen: list[PassResult] = []

    class Counted(CorePass):
        def run(self, jobs: Sequence[Job]) -> PassResult:
            seen.append(super().run(jobs))
            return seen[-1]

    with mock.patch.object(base, "CorePass", Counted):
        d = decide(snap, jobs, policy, params, budget)  # type: ignore[arg-type]
    assert check_decision(snap, jobs, d) == []
    assert d.summary.started + d.summary.backfilled >= 3  # free shrinks as jobs start
    return sum(r.rows for r in seen), sum(r.searched for r in seen), d.summary.started + d.summary.backfilled


@pytest.mark.parametrize("policy", ["easy", "priority", "memory_backfill", "conservative"])
@pytest.mark.parametrize("budgeted", [False, True])
def test_rows_read_grow_with_pending_and_nodes_not_shapes_times_nodes(policy: str, budgeted: bool) -> None:
    snap, jobs = _many_shapes()
    assert len({(j.queue, j.cpu, j.mem_mib) for j in jobs}) > 500
    budget = Budget.starting_now(lambda: 0.0, 1e9) if budgeted else None
    rows, searched, _ = _rows(snap, jobs, policy, budget)
    bound = ROWS_PER_ITEM * (len(jobs) + len(snap.nodes))
    per_queue = {q: sum(1 for n in snap.nodes if n.queue == q) for q in ("a", "b")}
    every_look = sum(per_queue[j.queue] for j in jobs)  # each job walking its whole eligible set
    assert rows <= bound < every_look, (rows, bound, every_look)
    if policy != "memory_backfill":  # (one reservation per node: every eligible node is searched)
        most = SEARCHED_PER_ITEM * (len(jobs) + len(snap.nodes))
        assert searched <= most < every_look, (searched, most, every_look)


def _roomy(n_nodes: int = 400, n_jobs: int = 600, seed: int = 5) -> tuple[Snapshot, list[Job]]:
    """One queue of 64-core nodes with room on each (loads and memory free differ), and jobs of 1-4
    cores and distinct memory demands, most on one node: nearly all start, each lowering the
    evaluation of the nodes it takes."""
    rng = np.random.default_rng(seed)
    nodes, run = [], []
    for i in range(n_nodes):
        nid = f"n{i:04d}"
        nodes.append(node(nid, cpu=64, mem=262_144, load=float(rng.random())))
        used = int(rng.integers(0, 40))
        run.append(running(f"r{i}", {nid: (used, used * 4_000, 0)}, NOW + 60.0 * int(rng.integers(10, 600))))
    jobs = [job(f"j{k:04d}", NOW - 60.0 * int(rng.integers(0, 1000)), 60.0 * int(rng.integers(1, 300)),
                nodes=int(rng.integers(2, 5)) if rng.random() < 0.05 else 1,
                cpu=int(rng.integers(1, 5)), mem=int(rng.integers(1, 20_000)))
            for k in range(n_jobs)]
    return snapshot(nodes, run), jobs


@pytest.mark.parametrize("policy", ["priority", "easy"])
def test_starts_under_the_evaluation_selector_read_few_nodes_each(policy: str) -> None:
    """Priority (evaluation selector) and easy under it: the rows stay under the bound that a
    ranking of every able node per start (starts x nodes) is far over."""
    snap, jobs = _roomy()
    params = POLICIES[policy][0](selector="evaluation")
    rows, _, started = _rows(snap, jobs, policy, None, params)
    assert started >= len(jobs) * 9 // 10
    bound = ROWS_PER_ITEM * (len(jobs) + len(snap.nodes))
    assert rows <= bound < started * len(snap.nodes), (rows, bound, started * len(snap.nodes))

"""Fast paths of the core give exactly what the plain computation gives.

The step matrix's radix sort must order events as np.lexsort does (ties in input order), the
capacity types found one node type at a time must count what a scan of the nodes counts, a
promise's nodes checked at once must be checked as one by one, and a selector's best n must be the
first n of its best k. (The pass's own shortcuts are held to the reference pass whole:
tests/sched/test_reference.py.)
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.sched.cluster import ClusterIndex, NodeColumns
from app.sched.model import Node, NodeState, Snapshot
from app.sched.params import EvaluationParams
from app.sched.policies import base
from app.sched.selectors import SELECTORS, NodeView
from app.sched.timeline import INF, RADIX_MIN_EVENTS, Profile, _by_node_then_time
from tests.strategies import snapshots_and_jobs


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), nodes=st.sampled_from([1, 7, 300, 1 << 16, (1 << 16) + 1]),
       grain=st.sampled_from([1, 60]), on_grain=st.booleans(), spread=st.sampled_from([10, 70_000]),
       with_inf=st.booleans(), extra=st.integers(0, 3000))
def test_step_order_is_lexsorts(seed, nodes, grain, on_grain, spread, with_inf, extra) -> None:  # noqa: ANN001
    """Events by node, then time, ties in input order: on and off the grain, within and past 2**16
    grains, with never-ending steps, above and below the size where the radix sort takes over."""
    rng = np.random.default_rng(seed)
    k = RADIX_MIN_EVENTS - 1000 + extra
    xs = rng.integers(0, nodes, k)
    ts = 6_000.0 + rng.integers(0, spread, k).astype(np.float64) * grain
    if not on_grain:
        ts += rng.random(k) * (rng.random(k) < 0.1)
    if with_inf:
        ts[rng.random(k) < 0.05] = INF
    order = _by_node_then_time(xs, ts, nodes, grain)
    assert np.array_equal(order, np.lexsort((ts, xs)))


shapes = st.tuples(st.sampled_from([1, 4, 32, 64]), st.sampled_from([0, 1024, 4096, 262144]),
                   st.sampled_from([0, 1, 4]))


@settings(max_examples=80, deadline=None)
@given(caps=st.lists(st.tuples(shapes, st.booleans(), st.booleans()), min_size=1, max_size=60),
       demands=st.lists(shapes, min_size=1, max_size=6), spread=st.booleans())
def test_capacity_counts_match_a_scan(caps, demands, spread) -> None:  # noqa: ANN001
    """(eligible nodes whose capacity holds d, of those the usable) and the least capacity, for
    clusters of one to dozens of node types (past the eight taken out one at a time)."""
    nodes = [Node(f"n{i:03d}", "q", (cap[0] + (i if spread else 0), cap[1], cap[2]), (0, 0, 0),
                  frozenset({"x"}) if labelled else frozenset(),
                  state=NodeState.UP if up else NodeState.DOWN)
             for i, (cap, up, labelled) in enumerate(caps)]
    index = ClusterIndex(Snapshot(0.0, tuple(nodes), columns=NodeColumns.of(nodes, ())))
    for labels in (frozenset(), frozenset({"x"})):
        elig = index.eligible("q", labels)
        mine = [n for n in nodes if labels <= n.labels]
        for d in demands:
            hold = [n for n in mine if all(c >= v for c, v in zip(n.cap, d, strict=True))]
            assert index.capacity_counts(elig, d) == (
                len(hold), sum(n.state == NodeState.UP for n in hold))
        least = index.least_capacity(elig)
        if mine:
            assert least[:3] == tuple(min(n.cap[r] for n in mine) for r in range(3))
            assert least[3:] == (len(mine), sum(n.state == NodeState.UP for n in mine))
        else:
            assert least == (-1, -1, -1, 0, 0)


@settings(max_examples=60, deadline=None)
@given(caps=st.lists(st.tuples(shapes, st.booleans(), st.sets(st.sampled_from("abc"), min_size=1),
                               st.sampled_from([0, 1, 7])), min_size=1, max_size=40),
       demands=st.lists(shapes, min_size=1, max_size=4))
def test_capacity_counts_match_a_scan_when_queues_overlap(caps, demands) -> None:  # noqa: ANN001
    """With nodes in several queues (each queue an index array) and weights, a queue's counts and
    least capacity are those of the nodes serving it, which come in (weight, id) order."""
    nodes = [Node(f"n{i:03d}", sorted(qs)[0], cap, (0, 0, 0),
                  state=NodeState.UP if up else NodeState.DOWN, weight=w,
                  queues=tuple(sorted(qs)) if len(qs) > 1 else ())
             for i, (cap, up, qs, w) in enumerate(caps)]
    index = ClusterIndex(Snapshot(0.0, tuple(nodes), columns=NodeColumns.of(nodes, ())))
    for q in "abc":
        elig = index.eligible(q, frozenset())
        mine = sorted((n for n in nodes if q in n.serves), key=lambda n: (n.weight, n.id))
        assert [index.ids[x] for x in index.nodes_of(elig)] == [n.id for n in mine]
        for d in demands:
            hold = [n for n in mine if all(c >= v for c, v in zip(n.cap, d, strict=True))]
            assert index.capacity_counts(elig, d) == (
                len(hold), sum(n.state == NodeState.UP for n in hold))
        if mine:
            assert index.least_capacity(elig)[:3] == tuple(min(n.cap[r] for n in mine) for r in range(3))


@settings(max_examples=80, deadline=None)
@given(caps=st.lists(st.tuples(st.booleans(), st.sets(st.sampled_from("abc"), min_size=1),
                               st.sets(st.sampled_from("xy"))), min_size=1, max_size=30),
       overlap=st.booleans(), queue=st.sampled_from("abc"), labels=st.sets(st.sampled_from("xy")),
       picks=st.lists(st.integers(0, 40), max_size=8))
def test_promised_nodes_checked_at_once_as_one_by_one(caps, overlap, queue, labels, picks) -> None:  # noqa: ANN001
    """`positions` and `may_use` (a promise's nodes looked up and checked in one step) answer what
    checking each node does: every id known, every node up, serving the queue, with the labels."""
    nodes = [Node(f"n{i:03d}", sorted(qs)[0], (1, 0, 0), (0, 0, 0), frozenset(ls),
                  state=NodeState.UP if up else NodeState.DOWN,
                  queues=tuple(sorted(qs)) if overlap and len(qs) > 1 else ())
             for i, (up, qs, ls) in enumerate(caps)]
    index = ClusterIndex(Snapshot(0.0, tuple(nodes), columns=NodeColumns.of(nodes, ())))
    by_id = {n.id: n for n in nodes}
    ids = tuple(f"n{k % (len(nodes) + 1):03d}" for k in picks)  # n{len(nodes)}: no such node
    found = index.positions(ids)
    if any(i not in by_id for i in ids):
        assert found is None
        return
    assert found is not None and [index.ids[x] for x in found] == list(ids)
    one_by_one = all(by_id[i].state == NodeState.UP and queue in by_id[i].serves
                     and frozenset(labels) <= by_id[i].labels for i in ids)
    assert index.may_use(index.eligible(queue, frozenset(labels)), found) == one_by_one


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 30), bookings=st.integers(0, 12))
def test_a_demand_per_node_answers_as_each_nodes_own_triple(seed, n, bookings) -> None:  # noqa: ANN001
    """The profile's per-node demand (whole-node jobs) gives, node by node, what the same question
    with that node's triple gives: earliest starts, first cover, holding over a window."""
    rng = np.random.default_rng(seed)
    cap = rng.integers(1, 9, (3, n)).astype(np.int64)
    xs = rng.integers(0, n, 2 * n)
    amounts = np.minimum(rng.integers(0, 3, (3, 2 * n)), 1)
    ends = 6_000.0 + rng.integers(1, 50, 2 * n) * 60.0
    profile = Profile(cap - np.zeros_like(cap), (xs, ends, amounts), 6_000.0, 60)
    for _ in range(bookings):
        x = rng.integers(0, n, 1)
        t0 = 6_000.0 + float(rng.integers(0, 60)) * 60
        profile.block(x, t0, t0 + float(rng.integers(1, 30)) * 60, (1, 0, 0))
    nodes = np.arange(n)
    elig = ClusterIndex(Snapshot(0.0, tuple(Node(f"n{i:03d}", "q", (1, 0, 0), (0, 0, 0))
                                            for i in range(n)))).eligible("q", frozenset())
    whole = profile.earliest(elig, cap, 1_800.0)
    over = profile.holds_over(nodes, cap, 6_600.0, 9_000.0)
    cover = profile.first_cover(elig, cap)
    for x in range(n):
        one = (int(cap[0, x]), int(cap[1, x]), int(cap[2, x]))
        assert whole[x] == profile.earliest_of(np.array([x]), one, 1_800.0)[0]
        assert over[x] == profile.holds_over(np.array([x]), one, 6_600.0, 9_000.0)[0]
        assert cover[x] == profile.first_cover_of(np.array([x]), one)[0]


@pytest.mark.parametrize("name", sorted(SELECTORS))
@settings(max_examples=60, deadline=None)
@given(case=snapshots_and_jobs(), data=st.data())
def test_a_selectors_best_n_are_the_first_n_of_its_best_k(name, case, data) -> None:  # noqa: ANN001
    """`Selector.order` with a larger k extends the ranking of a smaller one (what a start's single
    ranking relies on), on random clusters with running jobs, after some starts."""
    snap, _ = case
    cluster = ClusterIndex(snap)
    profile = Profile(cluster.free_now(), base._releases(cluster, snap.now, 60), snap.now, 60)
    view = NodeView(cluster, profile, EvaluationParams())
    all_nodes = list(range(len(cluster)))
    for x in data.draw(st.lists(st.sampled_from(all_nodes), max_size=3, unique=True)):
        profile.start(np.array([x]), (1, 0, 0), snap.now + 600)
    cand = np.array(sorted(data.draw(st.lists(st.sampled_from(all_nodes), min_size=1, unique=True))),
                    dtype=np.int64)
    d = data.draw(st.tuples(st.integers(0, 4), st.integers(0, 4096), st.integers(0, 1)))
    k = data.draw(st.integers(1, len(cand)))
    n = data.draw(st.integers(1, k))
    selector = SELECTORS[name]()
    assert selector.order(view, cand, d, k)[:n].tolist() == selector.order(view, cand, d, n).tolist()


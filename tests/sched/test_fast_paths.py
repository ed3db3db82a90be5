"""Fast paths of the core give exactly what the plain computation gives.

The step matrix's radix sort must order events as np.lexsort does (ties in input order), and the
capacity types found one node type at a time must count what a scan of the nodes counts.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from app.sched.cluster import ClusterIndex, NodeColumns
from app.sched.model import Node, NodeState, Snapshot
from app.sched.timeline import INF, RADIX_MIN_EVENTS, _by_node_then_time


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

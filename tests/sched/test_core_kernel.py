"""The core's tree over an eligible set finds exactly the nodes a scan finds (app/sched/core_kernel.py).

The tree keeps, per range of places, the most of each resource any node there has free; those maxima
may come from different nodes, so a range can look able and hold no node that covers a demand whole.
The search must then go on to the right of it, and never step past the set's last place.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from app.sched import core_kernel as k

amount = st.integers(-2, 6)


@settings(max_examples=300, deadline=None)
@given(sets=st.lists(st.lists(st.tuples(amount, amount, amount), max_size=13), min_size=1, max_size=4),
       demand=st.tuples(st.integers(0, 5), st.integers(0, 5), st.integers(0, 5)),
       takes=st.lists(st.tuples(st.integers(0, 60), st.integers(0, 3), st.integers(0, 3), st.integers(0, 3)),
                      max_size=8))
def test_the_tree_finds_the_nodes_a_scan_finds(sets, demand, takes) -> None:  # noqa: ANN001
    """Every set's nodes with the demand free, found place after place, before and after some
    nodes' free shrinks (each node in its own place of each set here: sets side by side)."""
    nodes = [free for members in sets for free in members]
    free = np.array(nodes, dtype=np.int64).reshape(-1, 3).T.copy()
    sizes = [len(members) for members in sets]
    e_off = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
    e_rank = np.arange(len(nodes), dtype=np.int64)
    t_size = np.array([1 << max(s - 1, 0).bit_length() for s in sizes], dtype=np.int64)
    t_off = np.concatenate(([0], np.cumsum(2 * t_size)[:-1])).astype(np.int64)
    tree = np.empty((3, int(2 * t_size.sum())), dtype=np.int64)
    k.build_trees(free, e_off, e_rank, t_off, t_size, tree)
    m_off = np.arange(len(nodes) + 1, dtype=np.int64)
    m_set = (np.searchsorted(e_off, e_rank, side="right") - 1).astype(np.int64)
    m_pos = (e_rank - e_off[m_set]).astype(np.int64)
    c, m, g = demand
    for x, dc, dm, dg in [(-1, 0, 0, 0), *takes]:
        if 0 <= x < len(nodes):
            free[:, x] -= (dc, dm, dg)
            k._shrunk(free, t_off, t_size, tree, m_off, m_set, m_pos, x)
        for e, size in enumerate(sizes):
            found, p = [], k._next_fit(tree, t_off[e], t_size[e], 0, c, m, g)
            while p >= 0:
                found.append(p)
                p = k._next_fit(tree, t_off[e], t_size[e], p + 1, c, m, g)
            lo = e_off[e]
            plain = [p for p in range(size) if free[0, lo + p] >= c and (m == 0 or free[1, lo + p] >= m)
                     and (g == 0 or free[2, lo + p] >= g)]
            assert found == plain


small = st.integers(0, 3)


@settings(max_examples=300, deadline=None)
@given(notes=st.lists(st.tuples(small, small, small, st.integers(0, 6)), max_size=k.FRONTIER),
       asks=st.lists(st.tuples(small, small, small, st.integers(1, 8)), min_size=1, max_size=20))
def test_the_short_memory_answers_as_every_note_would(notes, asks) -> None:  # noqa: ANN001
    """The memory of demands that found too few nodes free drops the notes another covers; up to its
    size, it answers every question as the list of all the notes does."""
    fr, fr_n = np.zeros((1, k.FRONTIER, 4), dtype=np.int64), np.zeros(1, dtype=np.int64)
    for c, m, g, count in notes:
        k._note_short(fr, fr_n, 0, c, m, g, count)
    for c, m, g, n in asks:
        plain = any(c >= a and m >= b and g >= d and n > found for a, b, d, found in notes)
        assert k._short_known(fr, fr_n, 0, c, m, g, n) == plain


@settings(max_examples=300, deadline=None)
@given(notes=st.lists(st.tuples(st.integers(0, 1), small, st.integers(0, 4), st.integers(0, 2)),
                      max_size=k.FRONTIER),
       asks=st.lists(st.tuples(st.integers(0, 1), small, st.integers(1, 6)), min_size=1, max_size=20))
def test_the_blocked_memory_answers_as_every_current_note_would(notes, asks) -> None:  # noqa: ANN001
    """The memory of demands that found too few nodes clear keeps only the notes made since the last
    start, and drops those another covers; it answers as the list of the current notes does. A note:
    (demand, release, nodes found clear, starts so far), with 5 nodes free now for every demand."""
    bl, bl_n = np.zeros((1, k.FRONTIER, 7)), np.zeros(1, dtype=np.int64)
    starts = 0
    for c, until, clear, more in sorted(notes, key=lambda x: x[3]):  # the starts only grow
        starts = more
        k._note_blocked(bl, bl_n, 0, c, 0, 0, float(until), clear, 5, starts)
    current = [x for x in notes if x[3] == starts]
    for c, until, n in asks:
        plain = any(c == a and until >= u and clear < n <= 5 for a, u, clear, _ in current)
        assert k._blocked_known(bl, bl_n, 0, c, 0, 0, n, float(until), starts) == plain


@settings(max_examples=300, deadline=None)
@given(values=st.lists(st.sampled_from([0.0, 60.0, 120.0, 180.0, np.inf]), min_size=1, max_size=40),
       data=st.data())
def test_the_n_least_are_those_a_stable_sort_puts_first(values, data) -> None:  # noqa: ANN001
    """`_least` (the sure start's quietest nodes, by selection): the first n places of a stable sort
    by value, as a set, ties at the cut going to the earlier places (values drawn from few, to tie)."""
    n = data.draw(st.integers(1, len(values)))
    quiet = np.array(values)
    got = k._least(quiet, n)
    assert sorted(got.tolist()) == sorted(np.argsort(quiet, kind="stable")[:n].tolist())

"""The profile's compiled loops: warmed for every policy, and their searches held to the plain ones."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from numba.core.registry import CPUDispatcher as Dispatcher

from app.sched import core, core_kernel, profile_kernels


def test_after_warming_a_replay_of_every_policy_compiles_nothing_more() -> None:
    """`core.warm` (what the service runs before its first request) covers every argument type the
    pass and the profile pass: a decision of any policy finds its loops compiled already."""
    from tests.sim.replay_reference import POLICIES, run, sdsc

    loops = [f for module in (profile_kernels, core_kernel) for f in vars(module).values()
             if isinstance(f, Dispatcher)]  # every compiled loop
    assert {"earliest_slot", "fold", "step_matrix", "run", "hold_promises"} <= {f.__name__ for f in loops}
    core.warm()
    warmed = [len(loop.signatures) for loop in loops]
    w = sdsc()
    for label in POLICIES:
        run(w, label)
    assert [len(loop.signatures) for loop in loops] == warmed


times_drawn = st.lists(st.one_of(st.sampled_from([0.0, 60.0, 120.0, 1e9, math.inf]),
                                 st.floats(0, 1e6, allow_nan=False)), max_size=200)


@settings(max_examples=300, deadline=None)
@given(values=times_drawn, n=st.integers(1, 12))
def test_the_nth_smallest_is_selected_as_a_sort_would_find_it(values: list[float], n: int) -> None:
    """The selection the searches use in place of numpy's partition: the n-th smallest finite time
    (the least for n = 1), INF when fewer are finite; ties and INF included."""
    a = np.array(values)
    finite = np.sort(a[np.isfinite(a)])
    expected = finite[n - 1] if len(finite) >= n else math.inf
    if n == 1:
        expected = a.min() if len(a) else math.inf
    assert profile_kernels.nth_smallest(a, n) == expected


@settings(max_examples=300, deadline=None)
@given(values=times_drawn, data=st.data())
def test_doubtful_nodes_are_ordered_as_a_stable_sort_orders_them(values: list[float],
                                                                  data: st.DataObject) -> None:
    """Counted by distinct bound (or sorted, past `DISTINCT_BOUNDS` of them: values drawn from a wide
    range cross it), the doubtful nodes come in the order of numpy's stable argsort."""
    bound = np.array(values)
    doubt = np.array(sorted(data.draw(st.sets(st.integers(0, max(len(values) - 1, 0))))) if values else [],
                     dtype=np.int64)
    expected = doubt[np.argsort(bound[doubt], kind="stable")]
    assert profile_kernels._by_bound(doubt, bound).tolist() == expected.tolist()


@settings(max_examples=300, deadline=None)
@given(values=st.lists(st.sampled_from([0.0, 60.0, 120.0, 180.0]), min_size=1, max_size=40), data=st.data())
def test_the_latest_free_nodes_are_those_a_stable_sort_puts_first(values: list[float],
                                                                   data: st.DataObject) -> None:
    """`_latest`: the n allowed nodes free last, ties taken in position order, as the first n of a
    stable sort by decreasing time would take them."""
    ok = np.array(data.draw(st.lists(st.booleans(), min_size=len(values), max_size=len(values))))
    if not ok.any():
        return
    n = data.draw(st.integers(1, int(ok.sum())))
    nodes = np.arange(len(values), dtype=np.int64) * 3
    t = np.array(values)
    allowed = np.flatnonzero(ok)
    expected = np.sort(nodes[allowed[np.argsort(-t[allowed], kind="stable")[:n]]])
    got = profile_kernels._latest(nodes, t, ok, n, np.empty(len(values)))
    assert got.tolist() == expected.tolist()


def test_many_distinct_bounds_are_sorted_stably() -> None:
    """Past `DISTINCT_BOUNDS` distinct bounds the order comes from a stable sort: ties keep node order."""
    rng = np.random.default_rng(7)
    bound = rng.permutation(np.repeat(np.arange(3 * profile_kernels.DISTINCT_BOUNDS) * 60.0, 4))
    doubt = np.arange(len(bound), dtype=np.int64)
    expected = doubt[np.argsort(bound, kind="stable")]
    assert profile_kernels._by_bound(doubt, bound).tolist() == expected.tolist()

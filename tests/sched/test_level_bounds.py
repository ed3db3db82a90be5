"""A reservation's search over level bounds finds the nodes and start the plain search finds
(app/sched/profile_kernels.py, `bound_slot` against `earliest_slot`), for one node or several.

The bounds are kept across folds by a log of the nodes each fold changed, read by each level when it
is next asked; a ring too short for the folds between two asks makes the level read every node again.
Each level asked holds, for every node, the first instant with it free, as found afresh. Profiles
here are made of releases, then bookings, starts and given-back slots folded between the
questions, with first bookings and walltimes drawn freely (a walltime so short that `earliest` may
start a node before its demand is free: the bounds decline, and the plain search answers).
"""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from app.sched import core_kernel
from app.sched import profile_kernels as kernels

NOW = 1_000_000.0
GRAIN = 60
amount = st.integers(0, 8)
triple = st.tuples(amount, st.integers(0, 64), st.integers(0, 2))
at = st.integers(0, 40).map(lambda k: NOW + 30.0 * k)
fold = st.tuples(st.lists(st.integers(0, 11), min_size=1, max_size=4, unique=True), at, at, triple,
                 st.sampled_from([1, 1, -1]))
demand = st.one_of(st.sampled_from([(1, 0, 0), (2, 16, 0), (3, 40, 1), (4, 0, 0)]), triple)  # (asked again)
ask = st.tuples(demand, st.sampled_from([1e-9, 30.0, 60.0, 300.0, 900.0]),
                st.lists(st.integers(0, 11), min_size=1, max_size=12, unique=True), st.integers(1, 4),
                st.booleans())


def _profile(free: list[tuple[int, int, int]], releases: list[tuple[int, float, tuple]]) -> tuple:
    n = len(free)
    base = np.array(free, dtype=np.int64).T.copy()
    xs = np.array([r[0] % n for r in releases], dtype=np.int64)
    ts = np.array([r[1] for r in releases], dtype=np.float64)
    amounts = np.array([r[2] for r in releases], dtype=np.int64).reshape(-1, 3).T.copy()
    times, cum = kernels.step_matrix(base, xs, ts, amounts, NOW)
    width = int(np.isfinite(times).sum(axis=0).max()) + 1
    return times, cum, width


@settings(max_examples=400, deadline=None)
@given(free=st.lists(triple, min_size=1, max_size=12),
       releases=st.lists(st.tuples(st.integers(0, 11), at, triple), max_size=20),
       steps=st.lists(st.one_of(fold, ask), max_size=14),
       booked=st.lists(st.one_of(at, st.just(math.inf)), min_size=12, max_size=12),
       ring=st.sampled_from([0, 1, 3]))
def test_the_bound_search_finds_the_plain_search_s_nodes_and_start(free, releases, steps, booked,  # noqa: ANN001
                                                                   ring) -> None:  # noqa: ANN001
    times, cum, width = _profile(free, releases)
    n_nodes = times.shape[1]
    bounds = kernels.new_bounds(times, ring)
    first_booking = np.array(booked[:n_nodes])
    counters = np.zeros(8, dtype=np.int64)
    counters[core_kernel.WIDTH] = width
    for step in steps:
        if isinstance(step[0], list):  # a fold: a booking (or a slot given back) on some nodes
            nodes, t0, t1, d, sign = step
            nodes = np.array([x % n_nodes for x in dict.fromkeys(nodes)], dtype=np.int64)
            column = sign * np.array(d, dtype=np.int64).reshape(3, 1)
            times, cum = core_kernel._fold(times, cum, counters, nodes, min(t0, t1), max(t0, t1) + 30.0,
                                           column, False, NOW, bounds)
            continue
        (c, m, g), walltime, members, wanted, told = step
        elig = np.array(sorted({x % n_nodes for x in members}), dtype=np.int64)
        d = np.array([[c], [m], [g]], dtype=np.int64)
        check = np.array([True, m > 0, g > 0])
        width = int(counters[core_kernel.WIDTH]) or width
        any_booking = told or bool(np.isfinite(first_booking).any())  # (none booked: first bookings all INF)
        _, t, chosen = kernels.earliest_slot(times, cum, elig, d, False, check, wanted, walltime, GRAIN,
                                             width, 4, first_booking, any_booking, 1)
        got, nodes, searched = kernels.bound_slot(times, cum, bounds, elig, d, check, wanted, walltime, GRAIN,
                                                  width, first_booking, any_booking, 1)
        if walltime < 1e-3:
            assert searched == -1
            continue
        assert 0 <= searched <= len(elig)
        assert (np.isnan(got) and np.isnan(t)) or got == t
        assert nodes.tolist() == chosen.tolist()
        _bounds_are_fresh(times, cum, bounds)


def _bounds_are_fresh(times: np.ndarray, cum: np.ndarray, bounds: tuple) -> None:
    """Each level asked keeps, for every node, the first instant with the level free, as found afresh
    (the bounds of a level read the log only when asked: the last one asked is up to date)."""
    keys, first, synced, _, state, _ = bounds
    for row in range(state[0]):
        if synced[row] != state[1]:
            continue
        for x in range(times.shape[1]):
            covers = ((cum[0, :, x] >= keys[row, 0]) & (cum[1, :, x] >= keys[row, 1])
                      & (cum[2, :, x] >= keys[row, 2]) & np.isfinite(times[:, x]))
            fresh = times[np.argmax(covers), x] if covers.any() else math.inf
            assert first[row, x] == fresh, (row, x)

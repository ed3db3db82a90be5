"""A reservation's search over level bounds finds the nodes and start the plain search finds
(app/sched/profile_kernels.py, `bound_slot` against every node's earliest start, `earliest_starts`,
then `core_kernel._common`'s candidates and sure start), for one node or several, a demand column or a
whole-node job (each node's capacity), one candidate or several.

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
from hypothesis import example, given, settings
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
                st.booleans(), st.sampled_from([1, 2, 16]), st.booleans())


def _profile(free: list[tuple[int, int, int]], releases: list[tuple[int, float, tuple]]) -> tuple:
    n = len(free)
    base = np.array(free, dtype=np.int64).T.copy()
    xs = np.array([r[0] % n for r in releases], dtype=np.int64)
    ts = np.array([r[1] for r in releases], dtype=np.float64)
    amounts = np.array([r[2] for r in releases], dtype=np.int64).reshape(-1, 3).T.copy()
    times, cum = kernels.step_matrix(base, xs, ts, amounts, NOW)
    width = int(np.isfinite(times).sum(axis=0).max()) + 1
    return times, cum, width


# A first candidate fails, and at the next one a node the first pass left unsearched starts exactly then:
# it must be searched before that candidate is tried (a search that leaves out a bound equal to the
# candidate answers otherwise here).
LATER_CANDIDATE = dict(
    free=[(7, 15, 2), (3, 46, 1), (8, 40, 2), (4, 47, 0), (1, 57, 1)], releases=[(5, NOW + 180, (6, 33, 1))],
    steps=[([2, 1, 6], NOW + 420, NOW + 630, (2, 43, 1), 1), ([2, 9], NOW, NOW + 900, (0, 9, 0), 1),
           ((1, 0, 0), 30.0, [1, 2, 6], 2, True, 16, False), ([7, 10], NOW + 480, NOW + 900, (6, 50, 2), 1),
           ((2, 16, 0), 60.0, [4, 6, 9], 2, False, 16, True),
           ((3, 41, 2), 900.0, [0, 7, 1, 8, 4, 10], 3, False, 16, True),
           ([4, 7, 2], NOW + 990, NOW + 1170, (0, 49, 1), -1),
           ((4, 0, 0), 900.0, [11, 5, 3, 6], 2, False, 16, True)],
    booked=[math.inf, NOW + 1080, math.inf, NOW + 750, NOW + 480, math.inf, NOW + 480, math.inf, math.inf,
            NOW + 300, math.inf, math.inf], ring=3)


# No candidate holds (one tried): the sure start counts the nodes that ever hold the job. Node 2 was not
# searched (its bound is past the candidate); its level (2 cpus) is free from NOW + 300 on, never the
# demand (3): a search that took it for a node that holds the job from its last instant answers otherwise.
NEVER_HOLDS = dict(
    free=[(4, 0, 0), (0, 0, 0), (0, 0, 0)], releases=[(1, NOW + 60, (4, 0, 0)), (2, NOW + 300, (2, 0, 0))],
    steps=[([0], NOW + 930, NOW + 1170, (3, 0, 0), 1), ((3, 0, 0), 900.0, [0, 1, 2], 2, True, 1, False)],
    booked=[NOW + 930] + [math.inf] * 11, ring=0)


@settings(max_examples=600, deadline=None)
@example(**LATER_CANDIDATE)
@example(**NEVER_HOLDS)
@given(free=st.lists(triple, min_size=1, max_size=12),
       releases=st.lists(st.tuples(st.integers(0, 11), at, triple), max_size=20),
       steps=st.lists(st.one_of(fold, ask), max_size=14),
       booked=st.lists(st.one_of(at, st.just(math.inf)), min_size=12, max_size=12),
       ring=st.sampled_from([0, 1, 3]))
def test_the_bound_search_finds_the_plain_search_s_nodes_and_start(free, releases, steps, booked,  # noqa: ANN001
                                                                   ring) -> None:  # noqa: ANN001
    times, cum, width = _profile(free, releases)
    n_nodes = times.shape[1]
    full = cum.max(axis=1)  # (each node's capacity: what it has free once every release is in)
    bounds = kernels.new_bounds(times, full, ring=ring)
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
        (c, m, g), walltime, members, wanted, told, tries, whole = step
        elig = np.array(sorted({x % n_nodes for x in members}), dtype=np.int64)
        if whole:  # a whole-node job: each node's capacity, every resource compared
            d, check = full[:, elig].copy(), np.ones(3, dtype=np.bool_)
        else:
            d, check = np.array([[c], [m], [g]], dtype=np.int64), np.array([True, m > 0, g > 0])
        width = int(counters[core_kernel.WIDTH]) or width
        any_booking = told or bool(np.isfinite(first_booking).any())  # (none booked: first bookings all INF)
        # every node's start as `earliest_starts` finds it, all exact (n = every node); a search with
        # first bookings drawn freely, not from the folds, is held to what it answers
        plain = kernels.earliest_starts(times, cum, elig, d, whole, check, len(elig), walltime, GRAIN, width,
                                        width, first_booking, True)
        t, chosen = core_kernel._common(times, cum, elig, plain, d, whole, check, wanted, walltime, GRAIN,
                                        width, first_booking, any_booking, tries)
        got, nodes, searched, node_times = kernels.bound_slot(times, cum, bounds, elig, d, whole, check,
                                                              wanted, walltime, GRAIN, width, first_booking,
                                                              any_booking, tries)
        if walltime < 1e-3:
            assert searched == -1
            continue
        if np.isnan(got):
            got, nodes = core_kernel._when_quiet(times, elig, node_times, wanted, GRAIN)
        assert 0 <= searched <= len(elig)
        assert (np.isnan(got) and np.isnan(t)) or got == t
        assert nodes.tolist() == chosen.tolist()
        _bounds_are_fresh(times, cum, bounds)


def _bounds_are_fresh(times: np.ndarray, cum: np.ndarray, bounds: tuple) -> None:
    """Each level asked keeps, for every node, the first instant with the level free, as found afresh
    (the bounds of a level read the log only when asked: the last one asked is up to date)."""
    keys, first, synced, _, state, _, full = bounds
    for row in range(state[0]):
        if synced[row] != state[1]:
            continue
        for x in range(times.shape[1]):
            need = full[:, x] if keys[row, 0] == kernels.WHOLE else keys[row]
            covers = ((cum[0, :, x] >= need[0]) & (cum[1, :, x] >= need[1])
                      & (cum[2, :, x] >= need[2]) & np.isfinite(times[:, x]))
            fresh = times[np.argmax(covers), x] if covers.any() else math.inf
            assert first[row, x] == fresh, (row, x)


def test_a_decision_s_bounds_hold_the_levels_its_jobs_ask() -> None:
    """`levels_asked` counts the distinct levels (powers of two; one for every whole-node job), and
    the bounds hold that many rows, at most `LEVELS`."""
    demand = np.array([[1, 1, 3, 4, 64, 64], [100, 120, 0, 0, 9, 9], [0, 0, 0, 1, 0, 0]], dtype=np.int64)
    whole = np.array([False, False, False, False, True, True])
    assert kernels.levels_asked(demand, whole) == 4  # (1, 64), (2, none), (4, none, 1), whole
    times = np.zeros((2, 3))
    assert kernels.new_bounds(times, np.zeros((3, 3)), 4)[1].shape == (4, 3)
    assert kernels.new_bounds(times, np.zeros((3, 3)), 10_000)[1].shape == (kernels.LEVELS, 3)

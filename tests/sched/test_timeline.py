"""The availability profile: grain rules, earliest times, and the lazy start folding."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from app.sched.cluster import Eligible
from app.sched.selectors.fragment import fragment_scores
from app.sched.timeline import INF, Profile, align_up, release_time

NOW = 1000.0


def profile(free: list[tuple[int, int, int]], releases: list[tuple[int, float, tuple]],
            grain: int = 60) -> Profile:
    arr = np.array(free, dtype=np.int64).T.copy()
    rel = (np.array([r[0] for r in releases], dtype=np.int64),
           np.array([r[1] for r in releases], dtype=np.float64),
           np.array([r[2] for r in releases], dtype=np.int64).reshape(-1, 3).T)
    return Profile(arr, rel, NOW, grain)


def whole(n: int) -> Eligible:
    return Eligible(("q", frozenset()), slice(0, n), None)


def test_release_time_rounds_up_and_handles_overrun() -> None:
    """Ends round up to the grain; an end at or before now frees at the first grain after now."""
    assert release_time(1001, NOW, 60) == 1020
    assert release_time(1020, NOW, 60) == 1020
    assert release_time(900, NOW, 60) == 1020
    assert release_time(1020, 1020, 60) == 1080
    assert align_up(61, 60) == 120


def test_earliest_follows_releases() -> None:
    """Node 0 gets 4 cores at 1200, node 1 has them now, node 2 never."""
    p = profile([(0, 0, 0), (4, 0, 0), (1, 0, 0)], [(0, 1200.0, (4, 0, 0)), (2, 1500.0, (1, 0, 0))])
    assert p.earliest(whole(3), (4, 0, 0), 600).tolist() == [1200.0, NOW, INF]


def test_a_booking_in_the_window_is_seen() -> None:
    """A booking that starts inside the window takes its share for the rest of it."""
    p = profile([(4, 0, 0)], [])
    p.book(0, 2000.0, 3000.0, (3, 0, 0))
    node0 = np.array([0])
    assert p.holds_over(node0, (4, 0, 0), NOW, 2000.0).tolist() == [True]
    assert p.holds_over(node0, (4, 0, 0), NOW, 2060.0).tolist() == [False]
    assert p.holds_over(node0, (1, 0, 0), NOW, 5000.0).tolist() == [True]
    assert p.earliest(whole(1), (4, 0, 0), 960).tolist() == [NOW]  # ends 1980 <= 2000
    assert p.earliest(whole(1), (4, 0, 0), 1500).tolist() == [3000.0]
    assert p.earliest(whole(1), (1, 0, 0), 9000).tolist() == [NOW]


def test_earliest_starts_inside_a_gap_between_bookings() -> None:
    """A gap between two bookings is used when it is long enough, skipped when not."""
    p = profile([(4, 0, 0)], [])
    p.book(0, 1200.0, 1800.0, (4, 0, 0))
    p.book(0, 3000.0, 4000.0, (4, 0, 0))
    assert p.earliest(whole(1), (4, 0, 0), 1200).tolist() == [1800.0]
    assert p.earliest(whole(1), (4, 0, 0), 1260).tolist() == [4000.0]


triples = st.tuples(st.integers(0, 8), st.integers(0, 8), st.integers(0, 2))


def naive_free(free, releases, changes, x, t):  # noqa: ANN001, ANN201
    """What node x has free at t, summed from scratch."""
    out = list(free[x])
    for rx, rt, d in releases:
        if rx == x and rt <= t:
            out = [o + v for o, v in zip(out, d, strict=True)]
    for cx, t0, t1, d in changes:
        if cx == x and t0 <= t < t1:
            out = [o - v for o, v in zip(out, d, strict=True)]
    return tuple(out)


@settings(max_examples=150, deadline=None)
@given(
    free=st.lists(triples, min_size=1, max_size=5),
    rel=st.lists(st.tuples(st.integers(0, 4), st.integers(1, 20), triples), max_size=8),
    changes=st.lists(st.tuples(st.booleans(), st.integers(0, 4), triples, st.integers(0, 12),
                               st.integers(1, 12)), max_size=10),
    many=st.booleans(),
    built=st.booleans(),
    compiled=st.booleans(),
)
def test_profile_equals_a_sum_from_scratch(free, rel, changes, many, built, compiled) -> None:  # noqa: ANN001
    """Starts and bookings, taken by the build, or made after it and folded one change at a time
    or in one rebuild, give the free amounts a naive sum gives (the build, the fold and the rebuild
    in numpy or compiled)."""
    from unittest import mock

    from app.sched import timeline

    n = len(free)
    releases = [(x % n, NOW + 60 * t, d) for x, t, d in rel]
    switch = mock.patch.object(timeline, "COMPILED", compiled)
    switch.start()
    p = profile(free, releases)
    if built:
        p._flush_all()
    applied = []
    for is_start, x, d, a, length in changes:
        if is_start:
            p.start(np.array([x % n]), d, NOW + 60 * length)
            applied.append((x % n, NOW, NOW + 60 * length, d))
        else:
            p.book(x % n, NOW + 60 * a, NOW + 60 * (a + length), d)
            applied.append((x % n, NOW + 60 * a, NOW + 60 * (a + length), d))
    with mock.patch.object(timeline, "REBUILD_FROM", 1 if many else 1 << 30):
        p._flush_rows(np.arange(n))
    switch.stop()
    for x in range(n):
        for t in [NOW + 60 * k for k in range(0, 27)]:
            assert p.free_at(x, t) == naive_free(free, releases, applied, x, t)


def test_fragment_score_prefers_even_consumption() -> None:
    """A node whose cores and memory are used alike scores 0; a lopsided one scores higher."""
    cap = np.array([[4, 4], [100, 100], [0, 0]])
    free = np.array([[2, 0], [50, 100], [0, 0]])
    score, leftover = fragment_scores(cap, free)
    assert score[0] == 0.0 and score[1] == 0.5
    assert leftover.tolist() == [1.0, 1.0]


@given(ends=st.lists(st.floats(0, 5000, allow_nan=False), max_size=20),
       now=st.floats(0, 5000, allow_nan=False), grain=st.sampled_from([1, 60, 300]))
def test_vector_release_times_match_the_scalar_rule(ends, now, grain) -> None:  # noqa: ANN001
    """The vectorized release rule gives exactly what the scalar one gives."""
    from app.sched.timeline import release_times

    got = release_times(np.array(ends, dtype=np.float64), now, grain).tolist()
    assert got == [release_time(e, now, grain) for e in ends]


def rows_of(p: Profile) -> list[tuple[list[float], list[list[int]]]]:
    """Each node's instants and its amounts there, as lists (padding and width left out)."""
    p._flush_all()
    out = []
    for x in range(p.times.shape[1]):
        k = int(np.isfinite(p.times[:, x]).sum())
        out.append((p.times[:k, x].tolist(), p.cum[:, :k, x].tolist()))
    return out


changes_on_many = st.lists(
    st.tuples(st.sampled_from(["start", "book", "give back", "whole"]),
              st.lists(st.integers(0, 5), min_size=1, max_size=6),  # repeats allowed
              triples, st.integers(-2, 12), st.integers(0, 12), st.booleans()),
    max_size=12)


@settings(max_examples=300, deadline=None)
@given(free=st.lists(triples, min_size=1, max_size=6),
       rel=st.lists(st.tuples(st.integers(0, 5), st.integers(1, 20), triples), max_size=10),
       changes=changes_on_many, rebuild_from=st.sampled_from([1, 3, 1 << 30]), compiled=st.booleans())
def test_folding_a_change_on_many_nodes_at_once_equals_folding_node_by_node(
        free, rel, changes, rebuild_from, compiled) -> None:  # noqa: ANN001
    """`_fold` (a change on all its nodes in a few numpy steps, or in the compiled loop), or a
    rebuild when many changes wait, leaves every node with the instants and amounts `_fold_row`
    gives one node at a time, whatever the mix of starts, bookings on repeated nodes, given-back
    bookings (negative), per-node demands, intervals in force now or empty, and questions asked in
    between."""
    from unittest import mock

    from app.sched import timeline

    n = len(free)
    releases = [(x % n, NOW + 60 * t, d) for x, t, d in rel]
    got = {}
    for fast in (False, True):
        with mock.patch.object(timeline, "FOLD_BY_BATCH", fast), \
                mock.patch.object(timeline, "COMPILED", compiled), \
                mock.patch.object(timeline, "REBUILD_FROM", rebuild_from if fast else 1 << 30):
            p = profile(free, releases)
            p._flush_all()  # built: later changes are folded, not taken by the build
            for kind, xs, d, a, length, ask in changes:
                nodes = np.array([x % n for x in xs], dtype=np.int64)
                t0, t1 = NOW + 60 * max(a, 0), NOW + 60 * (max(a, 0) + length)
                if kind == "start":
                    p.start(np.unique(nodes), d, NOW + 60 * (length + 1))
                elif kind == "book":
                    p.book_many(nodes, t0, t1, d)
                elif kind == "give back":
                    p.book_many(nodes, t0, t1, (-d[0], -d[1], -d[2]))
                else:  # one amount per node
                    p.book_many(nodes, t0, t1, np.array([d] * len(nodes), dtype=np.int64).T)
                if ask:
                    p.earliest_of(nodes[:1], (1, 0, 0), 60.0)
            got[fast] = rows_of(p)
    assert got[True] == got[False]


questions = st.lists(
    st.tuples(st.sampled_from(["earliest", "first_cover", "holds_over", "earliest_starts", "common_start",
                               "earliest_slot"]),
              st.lists(st.integers(0, 5), min_size=1, max_size=6, unique=True), triples,
              st.booleans(), st.integers(0, 14), st.integers(0, 14), st.integers(0, 6)),
    min_size=1, max_size=8)


@settings(max_examples=300, deadline=None)
@given(free=st.lists(triples, min_size=1, max_size=6),
       rel=st.lists(st.tuples(st.integers(0, 5), st.integers(1, 20), triples), max_size=10),
       changes=changes_on_many, asked=questions, grain=st.sampled_from([1, 60]))
def test_compiled_questions_answer_as_the_numpy_ones(free, rel, changes, asked, grain) -> None:  # noqa: ANN001
    """`earliest`, `first_cover` (whole or within a head of instants), `holds_over` and the
    searches built on them (`earliest_starts`, `common_start`, `earliest_slot`), compiled, give the
    numpy answers exactly, on profiles made of releases, starts, bookings (some given back, some per
    node) and windows anywhere in time, for triple and per-node demands, walltimes off the grain
    included."""
    from unittest import mock

    from app.sched import timeline

    n = len(free)
    releases = [(x % n, NOW + 60 * t, d) for x, t, d in rel]
    p = profile(free, releases, grain)
    p._flush_all()
    for kind, xs, d, a, length, _ in changes:
        nodes = np.unique(np.array([x % n for x in xs], dtype=np.int64))
        t0, t1 = NOW + 60 * max(a, 0), NOW + 60 * (max(a, 0) + length)
        sign = -1 if kind == "give back" else 1
        p.book_many(nodes, t0, t1, (sign * d[0], sign * d[1], sign * d[2]))
    p._flush_all()
    for kind, xs, d, per_node, a, length, head in asked:
        nodes = np.array([x % n for x in xs], dtype=np.int64)
        demand = np.array([d] * len(nodes), dtype=np.int64).T if per_node else d
        walltime = 37.0 * length + 0.5 * a  # off the grain too
        answers = []
        for compiled in (False, True):
            with mock.patch.object(timeline, "COMPILED", compiled):
                if kind == "earliest":
                    answers.append(p.earliest_of(nodes, demand, walltime).tolist())
                elif kind == "first_cover":
                    answers.append(p.first_cover(whole(n), d, head=head or None).tolist())
                elif kind == "earliest_starts":  # for a job of 1 to 3 nodes
                    answers.append(p.earliest_starts(whole(n), np.arange(n), d, 1 + a % 3, walltime).tolist())
                elif kind == "earliest_slot":  # a job of 1 to 3 nodes: the search, then its slot
                    times, found = p.earliest_slot(whole(n), np.arange(n), d, 1 + a % 3, walltime, 1 + head)
                    slot = found if found is None else (found[0], found[1].tolist())
                    answers.append((times.tolist(), slot))
                elif kind == "common_start":  # 2 to 4 of the nodes, from when each first has d free
                    free_from = p.first_cover_of(nodes, demand)
                    found = p.common_start(nodes, free_from, demand, 2 + a % 3, walltime, 1 + head)
                    answers.append(found if found is None else (found[0], found[1].tolist()))
                else:
                    window = (NOW + 60 * a, NOW + 60 * (a + length))
                    answers.append(p.holds_over(nodes, demand, *window).tolist())
        assert answers[0] == answers[1], kind


def test_compiled_search_searches_ties_with_the_nth_best_as_the_numpy_one() -> None:
    """A node whose lower bound equals the best time found may tie with it, and a tie goes to the
    first node in node order: it is searched (its start made exact, not left INF), both for a bound
    past the head of instants and for a doubtful node; the compiled search agrees. (It was left
    INF, and a one-node job then took a later node of the tie: tests/sched/test_reference.py.)"""
    from unittest import mock

    from app.sched import timeline

    past_head = profile([(0, 0, 0), (0, 0, 0)],  # node 1 gets one cpu a minute: 4 only at 1240
                        [(0, 1240.0, (4, 0, 0))] + [(1, NOW + 60 * k, (1, 0, 0)) for k in range(1, 5)])
    doubtful = profile([(1, 0, 0), (1, 0, 0)], [])
    doubtful.book(1, 1060.0, 1120.0, (1, 0, 0))  # node 1 is free now, but not for the whole job
    cases = ((past_head, (4, 0, 0), [1240.0, 1240.0]), (doubtful, (1, 0, 0), [NOW, 1120.0]))
    for p, d, expected in cases:
        for compiled in (False, True):
            with mock.patch.object(timeline, "COMPILED", compiled):
                assert p.earliest_starts(whole(2), np.arange(2), d, 1, 120.0).tolist() == expected


def test_common_start_tries_only_the_candidates_it_is_allowed() -> None:
    """Three nodes free from 1000, 1060 and 1120, the first booked over [1120, 1180): a two-node,
    two-minute job cannot hold at 1060 (the booking cuts node 0's window) and holds at 1120 on
    nodes 1 and 2; with one candidate allowed, none is found. Both implementations agree."""
    from unittest import mock

    from app.sched import timeline

    p = profile([(1, 0, 0), (0, 0, 0), (0, 0, 0)], [(1, 1060.0, (1, 0, 0)), (2, 1120.0, (1, 0, 0))])
    p.book(0, 1120.0, 1180.0, (1, 0, 0))
    free_from = np.array([NOW, 1060.0, 1120.0])
    for compiled in (False, True):
        with mock.patch.object(timeline, "COMPILED", compiled):
            found = p.common_start(np.arange(3), free_from, (1, 0, 0), 2, 120.0, 2)
            assert found is not None and found[0] == 1120.0 and found[1].tolist() == [1, 2]
            assert p.common_start(np.arange(3), free_from, (1, 0, 0), 2, 120.0, 1) is None


@settings(max_examples=300, deadline=None)
@given(free=st.lists(triples, min_size=1, max_size=6),
       steps=st.lists(st.tuples(st.integers(0, 5), st.integers(-1, 12), triples, st.booleans()), max_size=80))
def test_compiled_build_gives_the_numpy_matrices(free, steps) -> None:  # noqa: ANN001
    """The profile's matrices built from steps (repeated times and nodes, steps at now or before it,
    negative amounts) are the same arrays, padding included, compiled or in numpy."""
    from unittest import mock

    from app.sched import timeline

    n = len(free)
    base = np.array(free, dtype=np.int64).T.copy()
    xs = np.array([x % n for x, *_ in steps], dtype=np.int64)
    ts = np.array([NOW + 60 * t for _, t, _, _ in steps], dtype=np.float64)
    signed = [[v if up else -v for v in d] for _, _, d, up in steps]
    amounts = np.array(signed, dtype=np.int64).reshape(-1, 3).T
    built = []
    for compiled in (False, True):
        with mock.patch.object(timeline, "COMPILED", compiled):
            times, cum = timeline._step_matrix(base.copy(), (xs, ts, amounts), NOW, 60)
            built.append((times.tolist(), cum.tolist()))
    assert built[0] == built[1]

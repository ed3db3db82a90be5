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


def test_lower_bounds_follow_releases() -> None:
    """Node 0 gets 4 cores at 1200, node 1 has them now, node 2 never."""
    p = profile([(0, 0, 0), (4, 0, 0), (1, 0, 0)], [(0, 1200.0, (4, 0, 0)), (2, 1500.0, (1, 0, 0))])
    assert p.lower_bounds(whole(3), (4, 0, 0)).tolist() == [1200.0, NOW, INF]


def test_window_ok_sees_a_booking_in_the_window() -> None:
    """A booking that starts inside the window takes its share for the rest of it."""
    p = profile([(4, 0, 0)], [])
    p.book(0, 2000.0, 3000.0, (3, 0, 0))
    assert p.window_ok(0, NOW, 2000.0, (4, 0, 0))
    assert not p.window_ok(0, NOW, 2060.0, (4, 0, 0))
    assert p.window_ok(0, NOW, 5000.0, (1, 0, 0))
    assert p.earliest_on(0, NOW, 1500, (4, 0, 0)) == 3000.0


triples = st.tuples(st.integers(0, 8), st.integers(0, 8), st.integers(0, 2))


@settings(max_examples=150, deadline=None)
@given(
    free=st.lists(triples, min_size=1, max_size=5),
    rel=st.lists(st.tuples(st.integers(0, 4), st.integers(1, 20), triples), max_size=8),
    starts=st.lists(st.tuples(st.integers(0, 4), triples, st.integers(1, 25)), max_size=8),
)
def test_lazy_folding_equals_applying_each_start(free, rel, starts) -> None:  # noqa: ANN001
    """However starts are folded in (all at once or row by row), the profile is the same."""
    n = len(free)
    releases = [(x % n, NOW + 60 * t, d) for x, t, d in rel]
    lazy, eager = profile(free, releases), profile(free, releases)
    for x, d, t in starts:
        for p in (lazy, eager):
            p.start(x % n, d, NOW + 60 * t)
        eager._flush_row(x % n)
    lazy._flush_all()
    for x in range(n):
        for t in [NOW] + [NOW + 60 * k for k in range(1, 27)]:
            assert lazy.base_at(x, t) == eager.base_at(x, t)
    for d in [(1, 0, 0), (4, 4, 0), (8, 8, 2)]:
        assert lazy.lower_bounds(whole(n), d).tolist() == eager.lower_bounds(whole(n), d).tolist()


def test_fragment_score_prefers_even_consumption() -> None:
    """A node whose cores and memory are used alike scores 0; a lopsided one scores higher."""
    cap = np.array([[4, 4], [100, 100], [0, 0]])
    free = np.array([[2, 0], [50, 100], [0, 0]])
    score, leftover = fragment_scores(cap, free)
    assert score[0] == 0.0 and score[1] == 0.5
    assert leftover.tolist() == [1.0, 1.0]

"""`GroupSlots` (the vectorised earliest start of mdl) equals the plain `Lane.earliest`, slot by slot."""

from __future__ import annotations

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from app.sched.dag.slots import GroupSlots
from app.sched.dag.state import Lane, reach

TIMES = st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.0, 4.5, 7.0, 10.0])  # few values: many exact ties
BOOKING = st.tuples(st.integers(0, 2), st.integers(0, 2), TIMES, TIMES)  # group, slot, ready, duration


def booked_lanes(slots: list[int], bookings: list[tuple[int, int, float, float]]) -> list[list[Lane]]:
    """Lanes with tasks booked at their earliest start: idle gaps wherever data came late."""
    lanes = [[Lane(0.0) for _ in range(n)] for n in slots]
    for r, k, ready, d in bookings:
        lane = lanes[r][k % slots[r]]
        start = lane.earliest(ready, d)
        lane.book(start, start + d)
    return lanes


def plain(lanes: list[Lane], ready: float, duration: float) -> float:
    return min(lane.earliest(ready, duration) for lane in lanes)


@given(st.lists(st.integers(1, 3), min_size=3, max_size=3), st.lists(BOOKING, max_size=25),
       st.lists(st.tuples(TIMES, TIMES), min_size=1, max_size=8))
@example([1, 1, 1], [(0, 0, 3.0, 1.0)], [(0.0, 3.0)])  # a task filling the gap [0, 3] exactly
def test_group_slots_equal_the_plain_search(slots: list[int], bookings: list[tuple[int, int, float, float]],
                                            tasks: list[tuple[float, float]]) -> None:
    lanes = booked_lanes(slots, bookings)
    gs = GroupSlots(lanes)
    ready = np.array([[t + r for r in range(3)] for t, _ in tasks])  # a different ready time per group
    dur = np.array([[d * (1 + r % 2) for r in range(3)] for _, d in tasks])
    want = np.array([[plain(lanes[r], ready[i, r], dur[i, r]) for r in range(3)] for i in range(len(tasks))])
    assert np.array_equal(gs.start_matrix(ready, dur), want)
    for r in range(3):
        assert np.array_equal(gs.start_row(r, ready[:, r].copy(), dur[:, r].copy()), want[:, r])
        for i in range(len(tasks)):
            slot, start = gs.choose(r, float(ready[i, r]), float(dur[i, r]))
            assert start == want[i, r] == lanes[r][slot].earliest(ready[i, r], dur[i, r])


@settings(max_examples=1000)  # a wrong shortcut shows only on a few bookings: look at many
@given(st.lists(st.integers(1, 3), min_size=3, max_size=3), st.lists(BOOKING, max_size=25), BOOKING,
       st.lists(st.tuples(TIMES, TIMES), min_size=1, max_size=8))
def test_start_after_a_booking_equals_a_full_search(
        slots: list[int], bookings: list[tuple[int, int, float, float]],
        booking: tuple[int, int, float, float], tasks: list[tuple[float, float]]) -> None:
    """The shortcut after a booking gives what a full search of the group's gaps gives."""
    lanes = booked_lanes(slots, bookings)
    gs = GroupSlots(lanes)
    r, k, ready0, d0 = booking
    lane = lanes[r][k % slots[r]]
    start = lane.earliest(ready0, d0)
    ready = np.array([t for t, _ in tasks])
    dur = np.array([d for _, d in tasks])
    est = gs.start_row(r, ready, dur)
    booked = lane.tail, float(gs.gap_end[r])
    lane.book(start, start + d0)
    gs.refresh(r)
    hit = (est < start + d0) & (est + dur >= start)
    got = gs.start_after(r, start, start + d0, booked, est[hit], ready[hit], dur[hit])
    assert np.array_equal(got, gs.start_row(r, ready[hit], dur[hit]))


@given(st.floats(-1e300, 1e300), st.floats(-1e300, 1e300))
@example(0.0, 0.0)
@example(0.0, -0.0)
@example(1.0, 2.0)
@example(0.0, -4.0)
@example(0.0, 5e-324)
def test_reach_margin_is_two_spacings(a: float, b: float) -> None:
    """`reach` takes the unit in the last place with math.ulp: it must be NumPy's spacing, sign included."""
    assert reach(a, b) == b - a + 2 * float(np.spacing(b))

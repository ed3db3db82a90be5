"""The invariant checker catches each kind of broken decision (a checker that cannot fail is a defect)."""

from __future__ import annotations

import dataclasses
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.sched.model import (
    Decision,
    Migration,
    NodeState,
    Pending,
    PriorityInfo,
    Reason,
    Reservation,
    Start,
    StartKind,
    Summary,
)
from app.sched.registry import decide
from tests.builders import NOW, job, node, running, snapshot, window
from tests.invariants import _capacity, _usage, check_decision
from tests.sched.test_contract import params_for
from tests.strategies import snapshots_and_jobs

SNAP = snapshot([node("n1"), node("n2", state=NodeState.DOWN), node("n3", queue="other")],
                [running("r1", {"n1": (2, 0, 0)}, 9000)])
JOBS = [job("A", 1, 3600, cpu=4), job("B", 2, 600, cpu=2), job("C", 3, 600, cpu=64),
        job("D", 4, 10_000, cpu=2)]
SUMMARY = Summary(0, 0, 0, 0, 0, 0, 3, 3, {})
PRIOS = tuple(PriorityInfo(j.id, 0.0, i + 1, {}) for i, j in enumerate(JOBS))


def decision(**kw: object) -> Decision:
    base = Decision(
        starts=(Start("B", ("n1",), StartKind.BACKFILL, "q", NOW + 600),),
        reservations=(Reservation("A", ("n1",), "q", 9000.0, 12600.0),),
        migrations=(),
        pending=(Pending("C", "q", Reason.never_fits),
                 Pending("D", "q", Reason.blocked_by_reservation)),
        priorities=PRIOS, summary=SUMMARY,
    )
    return dataclasses.replace(base, **kw)


def test_the_sound_decision_passes() -> None:
    """The reference decision is sound, so each case below fails for its own reason only."""
    assert check_decision(SNAP, JOBS, decision()) == []


BROKEN = [
    ("over-commit now", {"starts": (Start("B", ("n1",), StartKind.BACKFILL, "q", NOW + 600),
                                    Start("C", ("n1",), StartKind.START, "q", NOW + 600))},
     "over-committed"),
    ("backfill delays the reservation",
     {"starts": (Start("D", ("n1",), StartKind.BACKFILL, "q", NOW + 10_000),),
      "pending": (Pending("C", "q", Reason.never_fits), Pending("B", "q", Reason.resources))},
     "over-committed at 9000"),
    ("reservation before its resources are free",
     {"reservations": (Reservation("A", ("n1",), "q", 6060.0, 9660.0),)}, "over-committed"),
    ("reservation in the past",
     {"reservations": (Reservation("A", ("n1",), "q", NOW - 60, 12600.0),)}, "before now"),
    ("start on a down node",
     {"starts": (Start("B", ("n2",), StartKind.BACKFILL, "q", NOW + 600),)}, "down"),
    ("start in another queue",
     {"starts": (Start("B", ("n3",), StartKind.BACKFILL, "q", NOW + 600),)}, "of queue other"),
    ("dropped job", {"pending": (Pending("C", "q", Reason.never_fits),)}, "answered ids"),
    ("never_fits for a job that fits",
     {"pending": (Pending("C", "q", Reason.never_fits), Pending("B", "q", Reason.never_fits),
                  Pending("D", "q", Reason.resources)), "starts": ()}, "reported never_fits"),
    ("impossible job reserved", {"pending": (Pending("D", "q", Reason.resources),),
                                 "reservations": (
        Reservation("A", ("n1",), "q", 9000.0, 12600.0),
        Reservation("C", ("n1",), "q", 12600.0, 13200.0))}, "cannot run on any usable node"),
    ("reservation off the grain",
     {"reservations": (Reservation("A", ("n1",), "q", 9010.0, 12660.0),)}, "off the grain"),
    ("backfill with no reservation", {"reservations": (),
                                      "pending": (Pending("C", "q", Reason.never_fits),
                                                  Pending("A", "q", Reason.resources),
                                                  Pending("D", "q", Reason.resources))},
     "holds no reservation"),
    ("migrated job outranks a native one",
     {"migrations": (Migration("A", "q", "q", "test"),)}, "migrated job ranks above"),
]


@pytest.mark.parametrize(("change", "expected"), [b[1:] for b in BROKEN],
                         ids=[b[0] for b in BROKEN])
def test_checker_catches(change: dict, expected: str) -> None:  # type: ignore[type-arg]
    """Each broken decision yields a violation that names the problem."""
    problems = check_decision(SNAP, JOBS, decision(**change))
    assert any(expected in p for p in problems), problems


def _plain_capacity(snap, jobs, d, grain):  # noqa: ANN001, ANN202
    """The checker's capacity rule as a plain scan (its first form): the reference for the numpy one."""
    out = set()
    use = _usage(snap, jobs, d, grain)
    for n in snap.nodes:
        running_sum = [0, 0, 0]
        for rj in snap.running:
            for nid, amount in rj.alloc:
                if nid == n.id:
                    running_sum = [a + b for a, b in zip(running_sum, amount, strict=True)]
        offer = [c - (a - s) for c, a, s in zip(n.cap, n.alloc, running_sum, strict=True)]
        held = use.get(n.id, [])
        for t in sorted({h[0] for h in held}):
            active = [h for h in held if h[0] <= t < h[1]]
            if any(sum(h[2][r] for h in active) > offer[r] for r in range(3)):
                out.add((n.id, float(t), tuple(sorted(h[3] for h in active))))
    return out


@settings(max_examples=25, deadline=None)
@given(case=snapshots_and_jobs(), extra=st.lists(st.tuples(st.integers(0, 50), st.integers(0, 50)),
                                                 max_size=6))
def test_numpy_capacity_check_equals_the_plain_scan(case, extra) -> None:  # noqa: ANN001
    """On decisions made sound by `easy` and then broken by extra starts (over-commits), the numpy
    capacity check reports exactly the nodes, instants and holders the plain scan finds."""
    snap, jobs = case
    d = decide(snap, jobs, "easy", params_for("easy", {}, None))
    if snap.nodes and jobs:
        more = tuple(Start(jobs[j % len(jobs)].id, (snap.nodes[n % len(snap.nodes)].id,), StartKind.START,
                           "q", snap.now + 60) for j, n in extra)
        d = dataclasses.replace(d, starts=d.starts + more)
    found = {(m["node"], float(m["t"]), tuple(re.findall(r"'([^']*)'", m["who"])))
             for m in (re.match(r"node (?P<node>\S+) over-committed at (?P<t>\S+): .* by (?P<who>\[.*\])$", p)
                       for p in _capacity(snap, jobs, d, 60))}
    assert found == _plain_capacity(snap, jobs, d, 60)


# overlapping queues, a whole-node job, a maintenance window on n2 over [NOW+600, NOW+1200)
SNAP2 = snapshot([node("n1", queues=("q", "r")), node("n2"), node("n3", queue="r")], [],
                 windows=(window("w", ("n2",), NOW + 600, NOW + 1200),))
JOBS2 = [job("E", 1, 600, exclusive=True), job("F", 2, 600), job("G", 3, 600, queue="r"),
         job("H", 4, 3600)]
PRIOS2 = tuple(PriorityInfo(j.id, 0.0, i + 1, {}) for i, j in enumerate(JOBS2))


def decision2(**kw: object) -> Decision:
    base = Decision(
        starts=(Start("E", ("n1",), StartKind.START, "q", NOW + 600),
                Start("F", ("n2",), StartKind.START, "q", NOW + 600),
                Start("G", ("n3",), StartKind.START, "r", NOW + 600)),
        reservations=(Reservation("H", ("n2",), "q", NOW + 1200, NOW + 4800),),
        migrations=(), pending=(), priorities=PRIOS2, summary=SUMMARY,
    )
    return dataclasses.replace(base, **kw)


def test_the_sound_decision_with_windows_passes() -> None:
    """A job ending as a window starts, a reservation after it, a whole node alone: sound."""
    assert check_decision(SNAP2, JOBS2, decision2()) == []


BROKEN2 = [
    ("start runs into a window",
     {"starts": (Start("E", ("n1",), StartKind.START, "q", NOW + 600),
                 Start("H", ("n2",), StartKind.START, "q", NOW + 3600),
                 Start("G", ("n3",), StartKind.START, "r", NOW + 600)),
      "reservations": (Reservation("F", ("n2",), "q", NOW + 1200, NOW + 1800),)}, "into window w"),
    ("reservation overlaps a window",
     {"reservations": (Reservation("H", ("n2",), "q", NOW + 900, NOW + 4500),)}, "into window w"),
    ("whole-node job shares its node",
     {"starts": (Start("E", ("n1",), StartKind.START, "q", NOW + 600),
                 Start("F", ("n2",), StartKind.START, "q", NOW + 600),
                 Start("G", ("n1",), StartKind.START, "r", NOW + 600))}, "(whole nodes) shares n1"),
    ("start on a node not serving its queue",
     {"starts": (Start("E", ("n1",), StartKind.START, "q", NOW + 600),
                 Start("F", ("n3",), StartKind.START, "q", NOW + 600),
                 Start("G", ("n3",), StartKind.START, "r", NOW + 600))}, "of queue r, not q"),
]


@pytest.mark.parametrize(("change", "expected"), [b[1:] for b in BROKEN2],
                         ids=[b[0] for b in BROKEN2])
def test_checker_catches_window_queue_and_whole_node_breaks(change: dict, expected: str) -> None:  # type: ignore[type-arg]
    """Each broken decision yields a violation that names the problem."""
    problems = check_decision(SNAP2, JOBS2, decision2(**change))
    assert any(expected in p for p in problems), problems

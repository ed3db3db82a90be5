"""Hand-checked scenarios for what Slurm says about its cluster: maintenance windows, whole-node
jobs, node weights, nodes in several queues. Every time and node below was worked out by hand
(NOW = 6000, grain 60)."""

from __future__ import annotations

import pytest

from app.sched.model import Reason, StartKind
from app.sched.params import EasyParams, MemoryBackfillParams, MigrationParams
from app.sched.registry import POLICIES, decide
from tests.builders import NOW, job, node, running, snapshot, window
from tests.invariants import check_decision
from tests.sched.test_policies import reasons, reserved, starts


def test_easy_plans_the_reservation_after_a_window() -> None:
    """n1 frees at 9000, but a window holds it over [9600, 12000): 3600 s do not fit before it,
    so the head job is reserved at the window's end, not at 9000."""
    snap = snapshot([node("n1")], [running("r1", {"n1": (4, 0, 0)}, 9000)],
                    windows=(window("maint", ("n1",), 9600, 12000),))
    d = decide(snap, [job("A", 1, 3600, cpu=4)], "easy")
    assert reserved(d) == {"A": (("n1",), 12000.0)}
    assert check_decision(snap, [job("A", 1, 3600, cpu=4)], d) == []


def test_without_the_window_the_same_job_is_reserved_at_9000() -> None:
    """The control for the test above: the window alone moves the reservation."""
    snap = snapshot([node("n1")], [running("r1", {"n1": (4, 0, 0)}, 9000)])
    assert reserved(decide(snap, [job("A", 1, 3600, cpu=4)], "easy")) == {"A": (("n1",), 9000.0)}


def test_a_backfill_that_would_run_into_a_window_is_refused() -> None:
    """n1 is idle now and a window starts at 6600. A (1200 s) would cross it: reserved after it
    at 9000; D (700 s, ends 6700) fits now but would run into it: refused; C (600 s, ends at
    6600 exactly) backfills."""
    snap = snapshot([node("n1")], [], windows=(window("maint", ("n1",), 6600, 9000),))
    jobs = [job("A", 1, 1200, cpu=4), job("D", 2, 700), job("C", 3, 600)]
    d = decide(snap, jobs, "easy")
    assert reserved(d) == {"A": (("n1",), 9000.0)}
    assert starts(d) == {"C": (("n1",), StartKind.BACKFILL)}
    assert reasons(d) == {"D": Reason.blocked_by_reservation}
    assert "maintenance window" in {p.job_id: p.detail for p in d.pending}["D"]
    assert check_decision(snap, jobs, d) == []


def test_a_window_in_progress_holds_the_node_until_its_end() -> None:
    """n1 is in a window until 7000 (it began at 5000), n2 is busy until 9000: nothing starts,
    and the job is reserved on n1 at the first grain after the window's end, 7020."""
    snap = snapshot([node("n1"), node("n2")], [running("r1", {"n2": (4, 0, 0)}, 9000)],
                    windows=(window("maint", ("n1",), 5000, 7000),))
    d = decide(snap, [job("A", 1, 600)], "easy")
    assert starts(d) == {}
    assert reserved(d) == {"A": (("n1",), 7020.0)}


def test_a_window_over_already_changes_nothing() -> None:
    """A window that ended before now is ignored."""
    snap = snapshot([node("n1")], [], windows=(window("old", ("n1",), 1000, 5000),))
    assert starts(decide(snap, [job("A", 1, 600)], "easy")) == {"A": (("n1",), StartKind.START)}


def test_memory_backfill_plans_around_a_window_on_an_unreserved_node() -> None:
    """One reservation per node: a window is not a reservation (the node stays open to one), and
    the reservation's time is exact: n1 has the cores from 6600, but the window over [7200, 9000)
    leaves no room for 1200 s before it, so the job is reserved at 9000."""
    snap = snapshot([node("n1")], [running("r1", {"n1": (4, 0, 0)}, 6600)],
                    windows=(window("maint", ("n1",), 7200, 9000),))
    d = decide(snap, [job("A", 1, 1200, cpu=4)], "memory_backfill", MemoryBackfillParams())
    assert reserved(d) == {"A": (("n1",), 9000.0)}


def test_a_whole_node_job_takes_only_an_idle_node() -> None:
    """n1 has 3 of 4 cores free, n2 is idle: the exclusive job X goes to n2 (first fit would take
    n1 for a plain job), and takes all of it, so Y (one core) goes to n1."""
    snap = snapshot([node("n1"), node("n2")], [running("r1", {"n1": (1, 0, 0)}, 9000)])
    jobs = [job("X", 1, 600, exclusive=True), job("Y", 2, 600)]
    d = decide(snap, jobs, "easy")
    assert starts(d) == {"X": (("n2",), StartKind.START), "Y": (("n1",), StartKind.START)}
    assert check_decision(snap, jobs, d) == []


def test_a_whole_node_job_waits_for_a_node_to_empty() -> None:
    """No node is idle: the exclusive job is reserved when n1's only job ends (9000), though n2
    has cores free all along; the small job behind it backfills on n2, not on n1 before 9000
    past the reservation."""
    snap = snapshot([node("n1"), node("n2")],
                    [running("r1", {"n1": (1, 0, 0)}, 9000), running("r2", {"n2": (1, 0, 0)}, 12000)])
    jobs = [job("X", 1, 600, exclusive=True), job("Y", 2, 6000)]
    d = decide(snap, jobs, "easy")
    assert reserved(d) == {"X": (("n1",), 9000.0)}
    assert starts(d) == {"Y": (("n2",), StartKind.BACKFILL)}
    assert check_decision(snap, jobs, d) == []


def test_a_whole_node_job_books_the_whole_node() -> None:
    """The exclusive reservation at 9000 takes all 4 cores and all memory of n1: a one-core job
    that would still be running at 9000 cannot start on n1."""
    snap = snapshot([node("n1")], [running("r1", {"n1": (1, 0, 0)}, 9000)])
    jobs = [job("X", 1, 600, exclusive=True), job("Y", 2, 3600)]
    d = decide(snap, jobs, "conservative")
    assert reserved(d)["X"] == (("n1",), 9000.0)
    assert "Y" not in starts(d)
    assert check_decision(snap, jobs, d) == []


def test_first_fit_prefers_the_lower_weight() -> None:
    """Nodes in (weight, id) order: n3 (weight 0), then n2 (1), then n1 (5)."""
    snap = snapshot([node("n1", weight=5), node("n2"), node("n3", weight=0)], [])
    jobs = [job("A", 1, 600, cpu=4), job("B", 2, 600, cpu=4), job("C", 3, 600, cpu=4)]
    assert starts(decide(snap, jobs, "easy")) == {
        "A": (("n3",), StartKind.START), "B": (("n2",), StartKind.START),
        "C": (("n1",), StartKind.START)}


@pytest.mark.parametrize("selector", ["least_load", "evaluation", "fragment"])
def test_other_selectors_break_ties_by_weight(selector: str) -> None:
    """Two identical nodes score the same: the lower weight wins, not the lower id."""
    snap = snapshot([node("n1", weight=9), node("n2", weight=2)], [])
    d = decide(snap, [job("A", 1, 600)], "easy", EasyParams(selector=selector))
    assert starts(d) == {"A": (("n2",), StartKind.START)}


def overlap_cluster():  # noqa: ANN201
    """n1 serves queues a and b; n2 only a (full until 9000); n3 only b."""
    return snapshot([node("n1", queues=("a", "b")), node("n2", queue="a"), node("n3", queue="b")],
                    [running("r1", {"n2": (4, 0, 0)}, 9000, queue="a")])


def test_a_pending_job_may_use_any_node_of_its_queue() -> None:
    """P (queue a) takes the shared n1, since n2 is full; Q (queue b) then takes n3."""
    jobs = [job("P", 1, 600, cpu=4, queue="a"), job("Q", 2, 600, cpu=4, queue="b")]
    d = decide(overlap_cluster(), jobs, "easy")
    assert starts(d) == {"P": (("n1",), StartKind.START), "Q": (("n3",), StartKind.START)}
    assert check_decision(overlap_cluster(), jobs, d) == []


def test_a_shared_node_counts_in_each_queue_load() -> None:
    """Queue a: n1 + n2, 4 of 8 cores used = 0.5; queue b: n1 + n3, none used."""
    d = decide(overlap_cluster(), [], "easy")
    assert d.summary.queue_load == {"a": 0.5, "b": 0.0}


def test_queues_share_the_node_in_time() -> None:
    """R (queue b) is reserved on the shared n1 behind P (queue a) that started there: the two
    queues plan one timeline of n1 (and n3, b's own, is busy until 12000)."""
    snap = snapshot([node("n1", queues=("a", "b")), node("n3", queue="b")],
                    [running("r3", {"n3": (4, 0, 0)}, 12000, queue="b")])
    jobs = [job("P", 1, 1200, cpu=4, queue="a"), job("R", 2, 600, cpu=4, queue="b")]
    d = decide(snap, jobs, "easy")
    assert starts(d) == {"P": (("n1",), StartKind.START)}
    assert reserved(d) == {"R": (("n1",), NOW + 1200)}


def test_a_migrated_job_moves_to_a_node_of_its_new_queue() -> None:
    """Queue a (n1, shared n2) is full: load 1.0 over the threshold 0.6. Queue b (shared n2,
    n3) is at 0.5: the job moves to b and starts on n3, the only node of b with room."""
    snap = snapshot([node("n1", queue="a"), node("n2", queues=("a", "b")), node("n3", queue="b")],
                    [running("r1", {"n1": (4, 0, 0)}, 9000, queue="a"),
                     running("r2", {"n2": (4, 0, 0)}, 9000, queue="a")])
    jobs = [job("J", 1, 600, cpu=2, queue="a")]
    params = EasyParams(migration=MigrationParams(mode="static", threshold=0.6))
    d = decide(snap, jobs, "easy", params)
    assert [(m.job_id, m.from_queue, m.to_queue) for m in d.migrations] == [("J", "a", "b")]
    assert starts(d) == {"J": (("n3",), StartKind.START)}
    assert check_decision(snap, jobs, d) == []


def test_migration_counts_a_whole_node_job_by_the_nodes_it_takes() -> None:
    """Queue a (n1, n2) is full: load 1.0 over the threshold 0.6; queue b (n3, n4) is idle. Each
    one-core whole-node job takes a whole 4-core node of b, half of b: X moves (b at 0 -> 0.5), Y
    moves (0.5 < 0.6 -> 1.0), W stays in a. Counted by its one core, all three would move."""
    snap = snapshot([node("n1", queue="a"), node("n2", queue="a"), node("n3", queue="b"),
                     node("n4", queue="b")],
                    [running("r1", {"n1": (4, 0, 0)}, 9000, queue="a"),
                     running("r2", {"n2": (4, 0, 0)}, 9000, queue="a")])
    jobs = [job(j, i, 600, queue="a", exclusive=True) for i, j in enumerate("XYW", 1)]
    d = decide(snap, jobs, "easy", EasyParams(migration=MigrationParams(mode="static", threshold=0.6)))
    assert [(m.job_id, m.to_queue) for m in d.migrations] == [("X", "b"), ("Y", "b")]
    assert {j for j, (nodes, _) in starts(d).items()} == {"X", "Y"}
    assert check_decision(snap, jobs, d) == []


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_every_policy_keeps_whole_nodes_and_windows(name: str) -> None:
    """A mixed case through every policy: the invariant checker finds nothing."""
    snap = snapshot([node("n1", queues=("a", "b")), node("n2", queue="a", weight=0),
                     node("n3", queue="b")],
                    [running("r1", {"n2": (2, 0, 0)}, 8000, queue="a")],
                    windows=(window("w", ("n1", "n3"), 7200, 9000),))
    jobs = [job("X", 1, 1200, exclusive=True, queue="a"), job("Y", 2, 600, queue="b"),
            job("Z", 3, 3600, cpu=4, queue="b"), job("W", 4, 300, cpu=2, queue="a")]
    d = decide(snap, jobs, name)
    assert check_decision(snap, jobs, d) == []

"""Multi-queue load balancing (docs/methods.md §2): static and dynamic thresholds, hand-checked."""

from __future__ import annotations

from app.sched.model import Reason
from app.sched.params import EasyParams, MigrationParams
from app.sched.registry import decide
from tests.builders import NOW, job, node, running, snapshot


def busy_and_idle(end: float = 90_000):  # noqa: ANN201
    """Queue `busy` (2 nodes) is full until `end`; queue `idle` (2 nodes, one with a gpu) is empty."""
    nodes = [node("b1", queue="busy"), node("b2", queue="busy"),
             node("i1", queue="idle"), node("i2", queue="idle", gpu=1, labels=("gpu",))]
    run = [running("r1", {"b1": (4, 0, 0)}, end, queue="busy"),
           running("r2", {"b2": (4, 0, 0)}, end, queue="busy")]
    return snapshot(nodes, run)


STATIC = EasyParams(migration=MigrationParams(mode="static", threshold=0.85))


def test_static_moves_a_blocked_job_to_the_least_loaded_queue() -> None:
    """Load 1.0 > 0.85: the job bound for `busy` runs in `idle`, and the move says why."""
    d = decide(busy_and_idle(), [job("A", 1, 600, queue="busy")], "easy", STATIC)
    (m,) = d.migrations
    assert (m.job_id, m.from_queue, m.to_queue) == ("A", "busy", "idle")
    assert m.figures["from_load"] == 1.0 and m.figures["to_load"] == 0.0
    assert [(s.job_id, s.queue) for s in d.starts] == [("A", "idle")]


def test_static_under_threshold_moves_nothing() -> None:
    """A queue under the threshold keeps its jobs."""
    params = EasyParams(migration=MigrationParams(mode="static", threshold=0.85))
    snap = snapshot([node("b1", queue="busy", cpu=8), node("i1", queue="idle")],
                    [running("r1", {"b1": (4, 0, 0)}, 90_000, queue="busy")])
    d = decide(snap, [job("A", 1, 600, queue="busy", cpu=8)], "easy", params)
    assert d.migrations == ()


def test_static_never_moves_to_a_queue_that_cannot_run_the_job() -> None:
    """A gpu job only moves where a gpu node is; a job nobody else can take reports the overload."""
    nodes = [node("b1", queue="busy", gpu=2, labels=("gpu",)), node("i1", queue="idle")]
    snap = snapshot(nodes, [running("r1", {"b1": (4, 0, 2)}, 90_000, queue="busy")])
    jobs = [job(g, i, 600, queue="busy", gpu=1, labels=("gpu",)) for i, g in enumerate("GH")]
    d = decide(snap, jobs, "easy", STATIC)
    assert d.migrations == ()
    assert [r.job_id for r in d.reservations] == ["G"]  # the head is reserved in its own queue
    assert {p.job_id: p.reason for p in d.pending} == {"H": Reason.queue_overloaded}


def test_migrated_job_ranks_below_native_jobs_of_its_new_queue() -> None:
    """A job submitted earlier elsewhere still ranks after the target queue's own later job."""
    jobs = [job("moved", 1, 600, queue="busy", cpu=4), job("native", 500, 600, queue="idle",
                                                              cpu=4)]
    d = decide(busy_and_idle(), jobs, "easy", STATIC)
    ranks = {p.job_id: p.rank for p in d.priorities}
    assert ranks["native"] < ranks["moved"]
    by_job = {s.job_id: s.node_ids for s in d.starts}
    assert by_job["native"] == ("i1",)  # the native job had first pick


def test_static_stops_when_the_target_would_be_overloaded() -> None:
    """Each move adds its share to the target's projected load; moves stop at the threshold."""
    jobs = [job(f"j{i}", i, 600, queue="busy", cpu=4) for i in range(3)]
    d = decide(busy_and_idle(), jobs, "easy", STATIC)
    # idle has 8 cores: one 4-core job brings it to 0.5, a second to 1.0 (> 0.85 stops the third)
    assert [m.job_id for m in d.migrations] == ["j0", "j1"]


DYNAMIC = EasyParams(migration=MigrationParams(mode="dynamic", weight=1.0))


def test_dynamic_moves_when_waiting_costs_more_than_moving() -> None:
    """Busy for 84,000 s more vs a 600 s job: waiting cost far exceeds migration cost."""
    d = decide(busy_and_idle(end=90_000), [job("A", 1, 600, queue="busy")], "easy", DYNAMIC)
    (m,) = d.migrations
    assert m.to_queue == "idle"
    assert m.figures["waiting_cost"] > m.figures["migration_cost"]


def test_dynamic_keeps_jobs_when_the_wait_is_short() -> None:
    """Busy only until NOW+600 and the job runs 10 h: moving costs more than waiting."""
    d = decide(busy_and_idle(end=NOW + 600), [job("A", 1, 36_000, queue="busy")], "easy", DYNAMIC)
    assert d.migrations == ()

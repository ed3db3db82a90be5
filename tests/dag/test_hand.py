"""Small DAGs planned by hand (the arithmetic is in the comments) against MDL and HEFT."""

from __future__ import annotations

import pytest

from app.sched.dag.model import DagProblem, Edge, Group, Network, Task
from app.sched.registry import plan_dag
from tests.dag_invariants import check_plan

# The seed's 7-task shape: v1 -> v2, v3, v4; v2, v3 -> v5; v4 -> v6; v5, v6 -> v7.
# Group a has speed 1, group b speed 2; every edge carries 1e8 bytes at 1e8 B/s: 1 s between groups.
# C(v, a) = w, C(v, b) = w / 2, C̄ = 0.75 w.  SL: v7 1.5, v6 2.25, v5 3.75, v4 3.75, v3 6.75, v2 6, v1 8.25.
SEED_WORK = {"v1": 2, "v2": 3, "v3": 4, "v4": 2, "v5": 3, "v6": 1, "v7": 2}
SEED_EDGES = [("v1", "v2"), ("v1", "v3"), ("v1", "v4"), ("v2", "v5"), ("v3", "v5"), ("v4", "v6"),
              ("v5", "v7"), ("v6", "v7")]


def seed_problem() -> DagProblem:
    return DagProblem(
        tasks=tuple(Task(t, work=w) for t, w in SEED_WORK.items()),
        edges=tuple(Edge(a, b, 1e8) for a, b in SEED_EDGES),
        groups=(Group("a"), Group("b", speed=2)),
        network=Network(bandwidth=1e8),
    )


def table(result) -> dict[str, tuple[str, float, float]]:  # type: ignore[no-untyped-def]
    p = result.compiled.problem
    return {p.tasks[pl.task].id: (p.groups[pl.group].id, pl.start, pl.finish)
            for pl in result.plan.placements}


def test_seed_shape_static_levels() -> None:
    r = plan_dag(seed_problem(), "mdl")
    assert list(r.compiled.static_level) == [8.25, 6.0, 6.75, 3.75, 3.75, 2.25, 1.5]


def test_seed_shape_mdl() -> None:
    # L (upward rank, 1 s mean transfer per edge): v7 1.5, v6 3.25, v5 4.75, v4 5.75, v3 8.75, v2 8, v1 11.25.
    # step 1  v1: a 11.25-0-0.5 = 10.75, b 11.25+0.5 = 11.75                  -> v1 b [0, 1]
    # step 2  t_d = 2 on a, 1 on b; b free at 1. v3 b = 8.75-1+1 = 8.75 (v2 b 7.75) -> v3 b [1, 3]
    # step 3  b free at 3. v2 b = 8-3+0.75 = 5.75 > v2 a = 8-2-0.75 = 5.25     -> v2 b [3, 4.5]
    # step 4  v4 a = 5.75-2-0.5 = 3.25 > v4 b = 5.75-4.5+0.5 = 1.75, v5 b 1    -> v4 a [2, 4]
    # step 5  v5 b = 4.75-4.5+0.75 = 1 > v6 a = 3.25-4-0.25 = -1               -> v5 b [4.5, 6]
    # step 6  v6 a -1 > v6 b = 3.25-6+0.25 = -2.5                              -> v6 a [4, 5]
    # step 7  v7: t_d(a) = 6+1 = 7, t_d(b) = max(6, 5+1) = 6; b -4 > a -6      -> v7 b [6, 7]
    r = plan_dag(seed_problem(), "mdl", explain=True)
    assert table(r) == {
        "v1": ("b", 0, 1), "v3": ("b", 1, 3), "v2": ("b", 3, 4.5), "v4": ("a", 2, 4),
        "v5": ("b", 4.5, 6), "v6": ("a", 4, 5), "v7": ("b", 6, 7),
    }
    assert r.makespans == {"mdl": 7.0}
    steps = r.plan.steps
    assert [r.compiled.problem.tasks[s.task].id for s in steps] == ["v1", "v3", "v2", "v4", "v5", "v6", "v7"]
    assert [s.score for s in steps] == [11.75, 8.75, 5.75, 3.25, 1.0, -1.0, -4.0]
    assert (steps[1].runner_up_task, steps[1].runner_up_group, steps[1].runner_up_score) == (1, 1, 7.75)
    check_plan(r.compiled.problem, r.plan.placements, 7.0)


def test_seed_shape_heft() -> None:
    # mean transfer of an edge: 1e8 B × mean(1e-8, 1e-8) s/B = 1 s.
    # rank: v7 1.5, v6 3.25, v5 4.75, v4 5.75, v3 8.75, v2 8, v1 11.25 -> order v1 v3 v2 v4 v5 v6 v7
    # v1: finish a 2, b 1 -> b. v3: a 2+4, b 1+2 -> b [1, 3]. v2: a 2+3 = 5, b 3+1.5 = 4.5 -> b.
    # v4: a 2+2 = 4, b 4.5+1 -> a [2, 4]. v5: a 5.5+3, b 4.5+1.5 = 6 -> b. v6: a 4+1 = 5, b 6.5 -> a.
    # v7: a 7+2, b 6+1 = 7 -> b [6, 7]
    r = plan_dag(seed_problem(), "heft")
    assert [round(x, 9) for x in _ranks(r)] == [11.25, 8.0, 8.75, 5.75, 4.75, 3.25, 1.5]
    assert table(r) == {
        "v1": ("b", 0, 1), "v3": ("b", 1, 3), "v2": ("b", 3, 4.5), "v4": ("a", 2, 4),
        "v5": ("b", 4.5, 6), "v6": ("a", 4, 5), "v7": ("b", 6, 7),
    }
    assert r.makespans == {"heft": 7.0}


def _ranks(r) -> list[float]:  # type: ignore[no-untyped-def]
    from app.sched.dag.heft import upward_rank
    return list(upward_rank(r.compiled))


def gap_problem() -> DagProblem:
    # u runs only on P; w only on Q and needs u's 3e8 bytes (3 s at 1e8 B/s); z only on Q, independent.
    return DagProblem(
        tasks=(Task("u", costs={"P": 1}), Task("w", costs={"Q": 1}), Task("z", costs={"Q": 0.5})),
        edges=(Edge("u", "w", 3e8),),
        groups=(Group("P"), Group("Q")),
        network=Network(bandwidth=1e8),
    )


def test_heft_inserts_into_an_idle_gap() -> None:
    # rank u = 1 + 3 + 1 = 5, w = 1, z = 0.5: order u, w, z. u P [0, 1]; w waits for data: Q [4, 5];
    # z fits the idle gap [0, 4] of Q: [0, 0.5], so the makespan stays 5 (appending would give 5.5).
    r = plan_dag(gap_problem(), "heft")
    assert table(r) == {"u": ("P", 0, 1), "w": ("Q", 4, 5), "z": ("Q", 0, 0.5)}
    assert r.makespans["heft"] == 5.0


def test_mdl_picks_the_ready_task_that_can_start_now() -> None:
    # L u = 1 + 3 + 1 = 5, w 1, z 0.5. Step 1: u P = 5 > z Q = 0.5 -> u P [0, 1].
    # step 2: w Q = 1 - max(4, 0) = -3 < z Q = 0.5 -> z Q [0, 0.5]; step 3: w Q [4, 5].
    r = plan_dag(gap_problem(), "mdl")
    assert table(r) == {"u": ("P", 0, 1), "w": ("Q", 4, 5), "z": ("Q", 0, 0.5)}
    assert r.critical and [r.compiled.problem.tasks[v].id for v in r.critical] == ["u", "w"]


def test_mdl_inserts_into_an_idle_gap() -> None:
    # gap_problem with x (10 s, only on Q) after w: L u = 1 + 3 + 1 + 10 = 15, w 11, x 10, z 0.5.
    # step 1 u P [0, 1]; step 2 w Q = 11 - 4 = 7 > z 0.5 -> Q [4, 5]; step 3 x Q = 10 - 5 = 5 -> [5, 15];
    # step 4 z: Q is idle over [0, 4], so EST = 0 and z goes there, not after x at 15.
    p = gap_problem()
    p = DagProblem((*p.tasks, Task("x", costs={"Q": 10})), (*p.edges, Edge("w", "x", 0.0)), p.groups,
                   p.network)
    r = plan_dag(p, "mdl")
    assert table(r) == {"u": ("P", 0, 1), "w": ("Q", 4, 5), "x": ("Q", 5, 15), "z": ("Q", 0, 0.5)}
    assert r.makespans["mdl"] == 15.0


def test_slots_run_tasks_side_by_side() -> None:
    # Four independent tasks of 2 s on one group of 2 slots: two waves, makespan 4.
    p = DagProblem(tasks=tuple(Task(f"t{i}", work=2) for i in range(4)), edges=(),
                   groups=(Group("g", slots=2),))
    for algorithm in ("mdl", "heft"):
        r = plan_dag(p, algorithm)
        assert sorted((pl.start, pl.slot) for pl in r.plan.placements) == [(0, 0), (0, 1), (2, 0), (2, 1)]
        assert r.makespans[algorithm] == 4.0


def test_labels_decide_where_a_task_may_run() -> None:
    p = DagProblem(tasks=(Task("bwa", work=10, requires=frozenset({"bwa"})), Task("x", work=1)), edges=(),
                   groups=(Group("fast", speed=10), Group("bio", labels=frozenset({"bwa", "samtools"}))))
    for algorithm in ("mdl", "heft", "best"):
        r = plan_dag(p, algorithm)
        assert table(r)["bwa"] == ("bio", 0, 10)


@pytest.mark.parametrize("algorithm", ["mdl", "heft"])
def test_group_free_later_delays_its_tasks(algorithm: str) -> None:
    p = DagProblem(tasks=(Task("t", work=1),), edges=(), groups=(Group("g", free_at=50.0),), now=10.0)
    r = plan_dag(p, algorithm)
    assert table(r)["t"] == ("g", 50.0, 51.0)
    assert r.makespans[algorithm] == 41.0


@pytest.mark.parametrize("algorithm", ["mdl", "heft", "best"])
def test_far_now_keeps_millisecond_durations(algorithm: str) -> None:
    """At now = 1e12 (doubles 1.2e-4 s apart) a chain of three 1 ms tasks still has a 3 ms makespan."""
    p = DagProblem(tasks=tuple(Task(f"t{i}", work=0.001) for i in range(3)),
                   edges=(Edge("t0", "t1"), Edge("t1", "t2")), groups=(Group("g", free_at=1e12),), now=1e12)
    r = plan_dag(p, algorithm)
    assert abs(r.makespans[r.plan.algorithm] - 0.003) < 1e-15
    assert [pl.start for pl in r.plan.placements] == pytest.approx([1e12, 1e12 + 0.001, 1e12 + 0.002])


@pytest.mark.parametrize("algorithm", ["mdl", "heft", "peft", "best"])
def test_search_with_zero_length_tasks_answers_the_makespan_of_its_plan(algorithm: str) -> None:
    """Zero-length tasks share their start with the next task of their slot: the search must keep them
    first in its processing order, or it reads that slot as free from the zero-length task's finish,
    scores an overlapping timing (4 s here, below the 6 s optimum: both 4 s tasks at once on one slot)
    and answers that makespan with placements that end at 8 s. The search runs with no clock (only
    max_evaluations stops it), so the same evaluations give the same plan."""
    p = DagProblem(tasks=(Task("t0", work=0), Task("t1", work=0), Task("t2", work=2), Task("t3", work=4),
                          Task("t4", work=4)),
                   edges=(Edge("t0", "t1"),), groups=(Group("g0"), Group("g1")))
    for evaluations in range(2, 41):
        r = plan_dag(p, algorithm, search_s=1.0, max_evaluations=evaluations)
        assert r.search is not None and r.search.evaluations > 1
        check_plan(p, r.plan.placements, r.makespan)
        assert r.makespan == 6.0

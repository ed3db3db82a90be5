"""Random workflows through the whole HTTP path: always 200 with a valid plan, or a 422, never a 500."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.main import create_app
from app.sched.dag.model import DagProblem, Placement, TaskStatus
from app.settings import Settings
from tests.conftest import Client
from tests.dag.strategies import dag_problems
from tests.dag_invariants import check_plan

CLIENT = Client(create_app(Settings()))


def wire(p: DagProblem) -> dict[str, Any]:
    return {
        "now": p.now,
        "tasks": [{"id": t.id, **({"costs": dict(t.costs)} if t.costs is not None else
                                  {"work": t.work, "requires": sorted(t.requires)})} for t in p.tasks],
        "edges": [{"from": e.src, "to": e.dst, "data": e.data} for e in p.edges],
        "groups": [{"id": g.id, "speed": g.speed, "labels": sorted(g.labels), "free_at": g.free_at,
                    "slots": g.slots} for g in p.groups],
        "network": {"bandwidth": p.network.bandwidth, "latency": p.network.latency,
                    "links": [{"a": x.a, "b": x.b, "bandwidth": x.bandwidth, "latency": x.latency}
                              for x in p.network.links]},
    }


@settings(suppress_health_check=[HealthCheck.too_slow], max_examples=40)
@given(dag_problems(max_tasks=12), st.sampled_from(["mdl", "heft", "peft", "best"]))
def test_random_workflows_get_valid_plans_over_http(p: DagProblem, algorithm: str) -> None:
    r = CLIENT.post("/dag/plan", json=wire(p) | {"algorithm": algorithm, "explain": True})
    assert r.status_code == 200, r.text
    plan = r.json()
    group = {g.id: i for i, g in enumerate(p.groups)}
    placements = [Placement(i, group[t["group"]], t["slot"], t["start"], t["finish"], TaskStatus.PENDING)
                  for i, t in enumerate(plan["tasks"])]
    check_plan(p, placements, plan["makespan"])
    assert len(plan["steps"]) == len(p.tasks)


LEAF = st.one_of(st.text(max_size=2), st.floats(allow_nan=False, allow_infinity=False))
RECORDS = st.lists(st.dictionaries(st.sampled_from(["id", "work", "from", "to"]), LEAF), max_size=3)


@settings(max_examples=40)
@given(st.dictionaries(st.sampled_from(["now", "tasks", "edges", "groups", "network", "algorithm"]),
                       st.one_of(st.none(), st.integers(), st.text(max_size=3), RECORDS)))
def test_garbage_bodies_are_422_never_500(body: dict[str, Any]) -> None:
    r = CLIENT.post("/dag/plan", json=body)
    assert r.status_code in (200, 422), r.text

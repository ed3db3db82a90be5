"""POST /dag/plan and GET /dag/plan/{id} over HTTP: plans, WfFormat, replanning, SVG, errors."""

from __future__ import annotations

import copy
import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from app.main import create_app
from app.settings import Settings
from schemas.dag import EXAMPLE
from tests.conftest import Client

DATA = Path(__file__).parent.parent / "data"
EPIGENOMICS = DATA / "epigenomics-chameleon-hep-1seq-100k-001.json"
SVG = "{http://www.w3.org/2000/svg}"


def example(**changes: Any) -> dict[str, Any]:
    body = copy.deepcopy(EXAMPLE)
    body.update(changes)
    return body


def test_example_is_planned_kept_and_returned(client: Client) -> None:
    r = client.post("/dag/plan", json=example(explain=True))
    assert r.status_code == 200, r.text
    plan = r.json()
    assert {"mdl", "heft", "peft"} <= set(plan["makespans"]) and plan["used"] in plan["makespans"]
    assert plan["makespan"] <= min(plan["makespans"].values())
    search = plan["search"]
    assert search["before"] == min(plan["makespans"][m] for m in ("mdl", "heft", "peft"))
    assert search["after"] == plan["makespan"] and 0 <= search["gain"] < 1 and search["budget_s"] >= 0.05
    assert [t["id"] for t in plan["tasks"]] == [t["id"] for t in EXAMPLE["tasks"]]
    by_id = {t["id"]: t for t in plan["tasks"]}
    assert by_id["align_1"]["group"] in ("bio-a", "bio-b") and by_id["call"]["group"] == "bio-a"
    assert plan["critical_path"][-1] == "report" and by_id["report"]["critical"]
    assert len(plan["steps"]) == len(EXAMPLE["tasks"])
    again = client.get(f"/dag/plan/{plan['plan_id']}")
    assert again.status_code == 200 and again.json() == plan


def test_unknown_plan_is_404(client: Client) -> None:
    r = client.get("/dag/plan/nope")
    assert r.status_code == 404 and "nope" in r.json()["detail"][0]["msg"]


def test_svg_has_one_bar_per_task(client: Client) -> None:
    wf = json.loads(EPIGENOMICS.read_text())
    plan = client.post("/dag/plan", json={"workflow": wf}).json()
    r = client.get(f"/dag/plan/{plan['plan_id']}", params={"format": "svg"})
    assert r.status_code == 200 and r.headers["content-type"].startswith("image/svg+xml")
    root = ET.fromstring(r.text)
    bars = [e for e in root.iter(f"{SVG}rect") if "task" in e.get("class", "").split()]
    assert sorted(b.get("data-task") for b in bars) == sorted(t["id"] for t in plan["tasks"])
    critical = {b.get("data-task") for b in bars if "critical" in b.get("class", "").split()}
    assert critical == set(plan["critical_path"])


def test_wfformat_instance_is_planned_on_its_machines(client: Client) -> None:
    wf = json.loads(EPIGENOMICS.read_text())
    r = client.post("/dag/plan", json={"workflow": wf, "algorithm": "heft"})
    assert r.status_code == 200, r.text
    plan = r.json()
    assert plan["groups"] == ["compute-3"] and len(plan["tasks"]) == 41
    runtime = {t["id"]: t["runtimeInSeconds"] for t in wf["workflow"]["execution"]["tasks"]}
    finish = {t["id"]: t["finish"] for t in plan["tasks"]}
    for t in plan["tasks"]:
        assert t["finish"] - t["start"] == pytest.approx(runtime[t["id"]])
    for t in wf["workflow"]["specification"]["tasks"]:  # one group: no transfer, precedence only
        start = next(p["start"] for p in plan["tasks"] if p["id"] == t["id"])
        assert all(start >= finish[parent] - 1e-9 for parent in t["parents"])
    # 48 slots run every ready task at once: the plan is the critical path, under the recorded 594 s
    assert plan["makespan"] == pytest.approx(sum(runtime[t] for t in plan["critical_path"]))
    assert plan["makespan"] < wf["workflow"]["execution"]["makespanInSeconds"]


def test_wfformat_edges_carry_the_shared_files() -> None:
    from app.convert_dag import DagLimits, problem_from_wire
    from schemas.dag import DagPlanRequest

    wf = json.loads(EPIGENOMICS.read_text())
    problem, _ = problem_from_wire(DagPlanRequest(workflow=wf), DagLimits())
    spec = wf["workflow"]["specification"]
    size = {f["id"]: f["sizeInBytes"] for f in spec["files"]}
    task = {t["id"]: t for t in spec["tasks"]}
    assert len(problem.edges) == 48
    for e in problem.edges:
        shared = set(task[e.src]["outputFiles"]) & set(task[e.dst]["inputFiles"])
        assert e.data == sum(size[f] for f in shared) and e.data > 0


def test_replanning_keeps_done_and_running_tasks(client: Client) -> None:
    first = client.post("/dag/plan", json=example()).json()
    by_id = {t["id"]: t for t in first["tasks"]}
    split, a1 = by_id["split"], by_id["align_1"]
    now = a1["start"] + 1
    tasks = copy.deepcopy(EXAMPLE["tasks"])
    tasks[0].update(status="done", group=split["group"], start=split["start"], finish=split["finish"])
    tasks[1].update(status="running", group=a1["group"], start=a1["start"])
    r = client.post("/dag/plan", json=example(tasks=tasks, now=now))
    assert r.status_code == 200, r.text
    again = {t["id"]: t for t in r.json()["tasks"]}
    assert again["split"] | {"critical": False} == split | {"critical": False, "slot": None, "status": "done"}
    assert (again["align_1"]["group"], again["align_1"]["start"], again["align_1"]["status"]) == (
        a1["group"], a1["start"], "running")
    assert all(again[t]["start"] >= now for t in ("align_2", "call", "report"))
    assert r.json()["makespan"] == pytest.approx(r.json()["finish"] - now)


def test_wfformat_progress_replans_the_rest(client: Client) -> None:
    wf = json.loads(EPIGENOMICS.read_text())
    first = client.post("/dag/plan", json={"workflow": wf}).json()
    root = first["critical_path"][0]
    done = next(t for t in first["tasks"] if t["id"] == root)
    progress = [{"id": root, "status": "done", "group": done["group"], "finish": done["finish"]}]
    r = client.post("/dag/plan", json={"workflow": wf, "progress": progress, "now": done["finish"]})
    assert r.status_code == 200, r.text
    plan = r.json()
    assert next(t for t in plan["tasks"] if t["id"] == root)["status"] == "done"
    assert plan["makespan"] == pytest.approx(first["makespan"] - done["finish"])


def with_tasks(change: Any) -> dict[str, Any]:
    body = example()
    change(body)
    return body


ERRORS = [
    ("cycle", lambda b: b["edges"].append({"from": "report", "to": "split"}), ["body", "edges"],
     "cycle: 'split' -> 'align_1' -> 'call' -> 'report' -> 'split'"),
    ("no group has the labels", lambda b: b["tasks"][3].update(requires=["gatk", "gpu"]),
     ["body", "tasks", 3],
     "no group can run task 'call': it needs ['gatk', 'gpu']"),
    ("costs name no known group", lambda b: b["tasks"][4].update(costs={"moon": 3}),
     ["body", "tasks", 4, "costs", "moon"], "unknown group 'moon'"),
    ("edge to unknown task", lambda b: b["edges"].append({"from": "call", "to": "ghost"}),
     ["body", "edges", 5, "to"], "unknown task 'ghost'"),
    ("negative volume", lambda b: b["edges"][0].update(data=-1), ["body", "edges", 0, "data"],
     "greater than or equal to 0"),
    ("duplicate task", lambda b: b["tasks"].append({"id": "call", "work": 1}), ["body", "tasks", 5, "id"],
     "duplicate task id 'call'"),
    ("duplicate group", lambda b: b["groups"].append({"id": "login"}), ["body", "groups", 3, "id"],
     "duplicate group id 'login'"),
    ("duplicate edge", lambda b: b["edges"].append({"from": "split", "to": "align_1"}), ["body", "edges", 5],
     "duplicate edge 'split' -> 'align_1'"),
    ("self loop", lambda b: b["edges"].append({"from": "call", "to": "call"}), ["body", "edges", 5],
     "cannot depend on itself"),
    ("work and costs", lambda b: b["tasks"][0].update(costs={"login": 1}), ["body", "tasks", 0],
     "exactly one"),
    ("zero speed", lambda b: b["groups"][0].update(speed=0), ["body", "groups", 0, "speed"],
     "greater than or equal to 0.000001"),
    ("unknown algorithm", lambda b: b.update(algorithm="genetic"), ["body", "algorithm"],
     "'mdl', 'heft', 'peft' or 'best'"),
    ("negative search budget", lambda b: b.update(time_budget_s=-1), ["body", "time_budget_s"],
     "greater than or equal to 0"),
    ("unknown field", lambda b: b["tasks"][0].update(walltime=3), ["body", "tasks", 0, "walltime"],
     "not permitted"),
    ("done without finish", lambda b: b["tasks"][0].update(status="done", group="login"),
     ["body", "tasks", 0, "finish"], "actual finish"),
    ("running after a pending task", lambda b: b["tasks"][3].update(status="running", group="bio-a", start=0),
     ["body", "tasks", 3, "status"], "predecessor 'align_1' is pending"),
    ("link to unknown group", lambda b: b["network"].update(links=[{"a": "bio-a", "b": "x", "bandwidth": 1}]),
     ["body", "network", "links", 0, "b"], "unknown group 'x'"),
    ("duplicate link, other direction",
     lambda b: b["network"].update(links=[{"a": "bio-a", "b": "login", "bandwidth": 1},
                                          {"a": "login", "b": "bio-a", "bandwidth": 2}]),
     ["body", "network", "links", 1], "a second link between 'login' and 'bio-a'"),
    ("duplicate self-link",
     lambda b: b["network"].update(links=[{"a": "bio-a", "b": "bio-a", "bandwidth": 1},
                                          {"a": "bio-a", "b": "bio-a", "bandwidth": 1}]),
     ["body", "network", "links", 1], "a second link between 'bio-a' and 'bio-a'"),
    ("no groups", lambda b: b.pop("groups"), ["body", "groups"], "groups are required"),
    ("both formats", lambda b: b.update(workflow=json.loads(EPIGENOMICS.read_text())), ["body"], "not both"),
]


@pytest.mark.parametrize(("change", "loc", "msg"), [c[1:] for c in ERRORS], ids=[c[0] for c in ERRORS])
def test_bad_workflow_is_422_naming_it(client: Client, change: Any, loc: list, msg: str) -> None:  # type: ignore[type-arg]
    r = client.post("/dag/plan", json=with_tasks(change))
    assert r.status_code == 422, r.text
    detail = r.json()["detail"]
    assert any(d["loc"] == loc and msg in d["msg"] for d in detail), detail


def test_wfformat_errors_point_into_the_instance(client: Client) -> None:
    wf = json.loads(EPIGENOMICS.read_text())
    wf["workflow"]["specification"]["tasks"][2]["parents"].append("nowhere")
    progress = [{"id": "x", "status": "done", "group": "g"}]
    r = client.post("/dag/plan", json={"workflow": wf, "progress": progress})
    assert r.status_code == 422
    locs = [d["loc"] for d in r.json()["detail"]]
    assert ["body", "workflow", "workflow", "specification", "tasks", 2, "parents", 1] in locs
    assert ["body", "progress", 0, "id"] in locs


def test_workflow_over_the_task_limit_is_refused() -> None:
    small = Client(create_app(Settings(dag_max_tasks=3)))
    r = small.post("/dag/plan", json=example())
    assert r.status_code == 422
    assert r.json()["detail"][0]["loc"] == ["body", "tasks"] and "at most 3" in r.json()["detail"][0]["msg"]


def test_oversized_body_is_413() -> None:
    small = Client(create_app(Settings(max_body_bytes=2000)))
    r = small.post("/dag/plan", content=EPIGENOMICS.read_bytes(),
                   headers={"content-type": "application/json"})
    assert r.status_code == 413


@pytest.mark.parametrize(("path", "value"), [
    (("edges", 0, "data"), "Infinity"), (("groups", 0, "speed"), "Infinity"), (("now",), "NaN"),
    (("tasks", 0, "work"), "NaN"), (("network", "bandwidth"), "Infinity"), (("edges", 0, "data"), "1e300"),
    (("tasks", 0, "work"), "1e300"), (("groups", 0, "speed"), "1e-300"), (("network", "bandwidth"), "1e-300"),
])
def test_non_finite_or_absurd_numbers_are_422(client: Client, path: tuple, value: str) -> None:  # type: ignore[type-arg]
    body: Any = example()
    target = body
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = "__X__"
    raw = json.dumps(body).replace('"__X__"', value)
    r = client.post("/dag/plan", content=raw, headers={"content-type": "application/json"})
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["loc"] == ["body", *path]


def test_a_self_link_costs_the_transfer_inside_the_group(client: Client) -> None:
    """A link from a group to itself is a real transfer: 1e8 bytes at 1e8 B/s puts 1 s between a task
    and its successor on that group (it used to be dropped: 0 s)."""
    body = {"tasks": [{"id": "a", "work": 2}, {"id": "b", "work": 3}],
            "edges": [{"from": "a", "to": "b", "data": 1e8}],
            "groups": [{"id": "g"}], "algorithm": "heft"}
    plain = client.post("/dag/plan", json=body).json()
    assert plain["makespan"] == 5.0
    body["network"] = {"links": [{"a": "g", "b": "g", "bandwidth": 1e8, "latency": 0.5}]}
    r = client.post("/dag/plan", json=body)
    assert r.status_code == 200, r.text
    b = next(t for t in r.json()["tasks"] if t["id"] == "b")
    assert (b["start"], r.json()["makespan"]) == (3.5, 6.5)


def test_a_running_task_past_its_expected_end_is_said(client: Client) -> None:
    """split (30 s of work on bio-b, speed 1.5: 20 s) started at 0 and still runs at 100: warned."""
    tasks = copy.deepcopy(EXAMPLE["tasks"])
    tasks[0].update(status="running", group="bio-b", start=0)
    r = client.post("/dag/plan", json=example(tasks=tasks, now=100))
    assert r.status_code == 200, r.text
    split = next(t for t in r.json()["tasks"] if t["id"] == "split")
    assert split["finish"] == 100
    assert any("'split' was expected to end at 20.0" in w for w in r.json()["warnings"]), r.json()["warnings"]
    on_time = client.post("/dag/plan", json=example(tasks=tasks, now=10)).json()
    assert on_time["warnings"] == []


def test_best_budget_counts_from_the_start_of_planning(client: Client) -> None:
    """Parsing and checking a real workflow take time, reported apart in `timing_ms`; `best`'s
    default total is the whole setting all the same (it was the setting less that time)."""
    wf = json.loads(EPIGENOMICS.read_text())
    r = client.post("/dag/plan", json={"workflow": wf, "algorithm": "best"}).json()
    assert r["timing_ms"]["parse"] > 0 and r["timing_ms"]["validate"] > 0
    assert r["total_budget_s"] == Settings().dag_best_default_s


def test_search_budget_is_asked_capped_or_off() -> None:
    """time_budget_s 0: no search; a budget above HPCSCHED_DAG_MAX_SEARCH_S is cut to it."""
    small = Client(create_app(Settings(dag_max_search_s=0.01)))
    capped = small.post("/dag/plan", json=example(time_budget_s=5)).json()
    assert capped["search"]["budget_s"] == 0.01
    off = small.post("/dag/plan", json=example(time_budget_s=0)).json()
    assert off["search"] is None and off["makespan"] == off["makespans"]["mdl"]


def test_best_says_which_planners_it_skipped() -> None:
    """Without time_budget_s, `best` keeps to HPCSCHED_DAG_BEST_DEFAULT_S: at 0 only its first planner
    runs and the answer names the others and why; with time_budget_s every planner runs."""
    tight = Client(create_app(Settings(dag_best_default_s=0.0)))
    r = tight.post("/dag/plan", json=example(algorithm="best")).json()
    assert list(r["makespans"]) == ["heft"] and r["total_budget_s"] == 0.0
    assert set(r["skipped"]) == {"mdl", "peft"}
    assert set(r["skipped"].values()) <= {"time_budget", "reached_bound"}
    asked = tight.post("/dag/plan", json=example(algorithm="best", time_budget_s=0)).json()
    assert asked["total_budget_s"] is None
    assert set(asked["makespans"]) | set(asked["skipped"]) == {"heft", "mdl", "peft"}
    assert "time_budget" not in asked["skipped"].values()

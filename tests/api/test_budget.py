"""POST /schedule within the decision budget: the operator's ceiling (settings), the request's own
smaller budget, the summary saying which limit was hit, and the answer's direct JSON."""

from __future__ import annotations

import copy
import json

import pytest

from app.main import create_app
from app.settings import Settings
from schemas.schedule import EXAMPLE, ScheduleResponse
from tests.conftest import Client

POLICIES = ["fcfs", "firstfit", "easy", "conservative", "memory_backfill", "priority"]


def _client(**settings: object) -> Client:
    return Client(create_app(Settings(max_body_bytes=1_000_000, **settings)))  # type: ignore[arg-type]


def _body(policy: str = "easy", **extra: object) -> dict:
    b = copy.deepcopy(EXAMPLE)
    b["policy"] = {"name": policy}
    b.update(extra)
    return b


@pytest.mark.parametrize("policy", POLICIES)
def test_answer_is_exactly_what_the_wire_model_dumps(policy: str) -> None:
    """The route writes the decision's JSON directly; it equals ScheduleResponse's own dump of it."""
    out = _client().post("/schedule", json=_body(policy)).json()
    assert ScheduleResponse.model_validate(out).model_dump(mode="json") == out
    assert out["summary"]["budget"] == {"time_s": 10.0, "max_jobs": 100_000, "jobs_considered": 3,
                                        "hit": None}


def test_request_budget_is_capped_by_the_operators() -> None:
    """A request asking more than the service allows gets the service's limit, and says so."""
    out = _client(decision_max_jobs=2).post("/schedule", json=_body(budget={"max_jobs": 50})).json()
    budget = out["summary"]["budget"]
    assert budget == {"time_s": 10.0, "max_jobs": 2, "jobs_considered": 2, "hit": "max_jobs"}
    skipped = [p for p in out["pending"] if p["reason"] == "not_evaluated"]
    assert len(skipped) == out["summary"]["not_evaluated"] == 1
    assert "budget of 2 jobs" in skipped[0]["detail"]


def test_request_may_ask_for_less() -> None:
    """A smaller budget in the request is the one applied."""
    out = _client().post("/schedule", json=_body(budget={"max_jobs": 1})).json()
    assert out["summary"]["budget"]["max_jobs"] == 1 and out["summary"]["not_evaluated"] == 2


def test_time_budget_spent_before_the_pass_leaves_every_job_not_evaluated() -> None:
    """A budget smaller than parsing the body takes: no job is looked at, each says why, in the
    order sent; nothing is ranked (no priorities) and no load computed."""
    out = _client().post("/schedule", json=_body("conservative", budget={"time_s": 1e-9})).json()
    assert out["summary"]["budget"]["hit"] == "time" and out["summary"]["budget"]["jobs_considered"] == 0
    assert out["starts"] == [] and out["reservations"] == [] and out["priorities"] == []
    assert [p["job_id"] for p in out["pending"]] == [j["id"] for j in EXAMPLE["pending"]]
    assert {p["reason"] for p in out["pending"]} == {"not_evaluated"}
    assert out["summary"]["nodes_total"] == 3 and out["summary"]["queue_load"] == {}


@pytest.mark.parametrize("budget, field", [({"time_s": 0}, "time_s"), ({"time_s": 1e6}, "time_s"),
                                           ({"max_jobs": 0}, "max_jobs"), ({"max_jobs": 2**63}, "max_jobs")],
                         ids=["zero-time", "huge-time", "zero-jobs", "int64-jobs"])
def test_bad_budget_is_422_naming_the_field(budget: dict, field: str) -> None:
    """Out-of-range budgets are refused, naming the field."""
    r = _client().post("/schedule", json=_body(budget=budget))
    assert r.status_code == 422
    assert ["body", "budget", field] in [d["loc"] for d in r.json()["detail"]]


def test_asked_to_stop_before_checking_is_503() -> None:
    """A decision the service was told to stop before it began is a 503 saying to ask again."""
    from app import service
    from app.api.raw_body import parse
    from app.errors import StoppingError
    from app.sched.budget import Budget
    from schemas.schedule import ScheduleRequest

    req, _ = parse(ScheduleRequest, json.dumps(_body()).encode())
    with pytest.raises(StoppingError, match="shutting down"):
        service.schedule_data(req, budget=Budget(stop=lambda: True))


@pytest.mark.parametrize("policy", ["easy", "conservative", "priority"])
def test_a_queue_depth_cut_says_so(policy: str) -> None:
    """Jobs ranked below the policy's queue_depth are not_evaluated, and the summary names the cut
    (`depth`), not a silent null."""
    shallow = _body(policy) | {"policy": {"name": policy, "params": {"queue_depth": 2}}}
    out = _client().post("/schedule", json=shallow).json()
    assert out["summary"]["budget"]["hit"] == "depth"
    skipped = [p for p in out["pending"] if p["reason"] == "not_evaluated"]
    assert len(skipped) == out["summary"]["not_evaluated"] == 1 and "queue depth 2" in skipped[0]["detail"]

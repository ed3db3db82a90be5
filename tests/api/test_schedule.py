"""POST /schedule end to end through the ASGI app."""

from __future__ import annotations

import copy

import pytest

from schemas.schedule import EXAMPLE, ScheduleResponse
from tests.conftest import Client

POLICIES = ["fcfs", "firstfit", "easy", "conservative", "memory_backfill", "priority"]


@pytest.mark.parametrize("policy", POLICIES)
def test_every_job_is_answered_exactly_once(client: Client, policy: str) -> None:
    """Each pending job appears once: started, reserved or pending with a reason."""
    b = copy.deepcopy(EXAMPLE)
    b["policy"] = {"name": policy}
    r = client.post("/schedule", json=b)
    assert r.status_code == 200, r.text
    out = ScheduleResponse.model_validate(r.json())
    answered = ([s.job_id for s in out.starts] + [x.job_id for x in out.reservations]
                + [p.job_id for p in out.pending])
    assert sorted(answered) == sorted(j["id"] for j in b["pending"])
    assert sorted(p.job_id for p in out.priorities) == sorted(answered)
    assert out.summary.policy == policy
    assert set(out.summary.timing_ms) >= {"parse", "validate", "schedule", "total"}


def test_example_decision(client: Client) -> None:
    """The README example: the 2-node job waits for n1 and is reserved; the others backfill."""
    out = client.post("/schedule", json=EXAMPLE).json()
    assert [(x["job_id"], x["node_ids"], x["start_time"]) for x in out["reservations"]] == [
        ("align", ["n1", "n2"], 1_700_003_640.0)
    ]
    assert {s["job_id"]: (s["node_ids"], s["kind"]) for s in out["starts"]} == {
        "qc": (["n2"], "backfill"),  # ends before the reservation on n2 begins
        "gpu-call": (["n3"], "backfill"),
    }
    assert out["summary"]["queue_load"] == {"batch": 0.4}


def test_node_allocation_defaults_to_running_jobs(client: Client) -> None:
    """Without `allocated`, a node is as busy as its running jobs say."""
    b = copy.deepcopy(EXAMPLE)
    b["pending"] = [dict(b["pending"][1], cpu=32, mem_mib=1000)]
    b["nodes"] = b["nodes"][:1]
    out = client.post("/schedule", json=b).json()
    assert out["starts"] == [] and out["reservations"][0]["job_id"] == "qc"


def test_healthz(client: Client) -> None:
    """The liveness probe answers."""
    assert client.get("/healthz").json() == {"status": "ok"}

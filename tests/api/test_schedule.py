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


def test_a_fitted_order_ranks_by_its_score_and_explains_each_job(client: Client) -> None:
    """order=fitted through POST /schedule: each job's factors are the four terms of its score,
    computed from what the request says of it, their sum is the score, the priority is minus the
    score and the ranks go lowest score first. With the size weighted heavily, the 2-node job
    (64 cores) ranks last though it was submitted first."""
    import math

    b = copy.deepcopy(EXAMPLE)
    weights = {"fit_r": 1.0, "fit_n": 3.0, "fit_rn": 0.25, "fit_s": 0.5}
    b["policy"] = {"name": "priority", "params": {"order": "fitted", **weights}}
    r = client.post("/schedule", json=b)
    assert r.status_code == 200, r.text
    got = {p["job_id"]: p for p in r.json()["priorities"]}
    for j in b["pending"]:
        lr, ln = math.log10(j["walltime_s"]), math.log10(j.get("nodes", 1) * j["cpu"])
        f = got[j["id"]]["factors"]
        assert f["fit_r_term"] == pytest.approx(lr)
        assert f["fit_n_term"] == pytest.approx(3.0 * ln)
        assert f["fit_rn_term"] == pytest.approx(0.25 * lr * ln)
        assert f["fit_s_term"] == pytest.approx(0.5 * j["submit_time"] / 3600)
        terms = f["fit_r_term"] + f["fit_n_term"] + f["fit_rn_term"] + f["fit_s_term"]
        assert f["fitted_score"] == pytest.approx(terms)
        assert got[j["id"]]["priority"] == pytest.approx(-f["fitted_score"])
    by_rank = sorted(got.values(), key=lambda p: p["rank"])
    assert [p["job_id"] for p in by_rank][-1] == "align"
    assert [p["factors"]["fitted_score"] for p in by_rank] == sorted(p["factors"]["fitted_score"]
                                                                     for p in by_rank)


@pytest.mark.parametrize("bad", [{"fit_n": "inf"}, {"fit_s": 1e7}, {"order": "fitted2"}])
def test_a_bad_fitted_weight_is_refused_naming_it(client: Client, bad: dict[str, object]) -> None:
    b = copy.deepcopy(EXAMPLE)
    b["policy"] = {"name": "priority", "params": {"order": "fitted", **bad}}
    r = client.post("/schedule", json=b)
    assert r.status_code == 422
    assert next(iter(bad)) in r.text

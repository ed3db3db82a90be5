"""Slurm's multifactor priority, factor by factor: `sprio`'s recorded output parsed, and a cycle
over the recorded read with parked jobs sends each one's factors beside its total priority; the
service shows them in `priorities[].factors` (and so `explain`) without changing the order."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from app.bridges.slurm.cycle import Bridge
from app.bridges.slurm.read import SlurmText, priority_factors
from app.bridges.slurm.runner import RecordedRunner
from app.bridges.slurm.service import in_process
from app.bridges.slurm.state import BridgeState
from schemas.schedule import PendingJobIn, ScheduleRequest, ScheduleResponse
from tests.bridges import recorded

SPRIO = (recorded.DATA / "sprio.txt").read_text()
PARTS = ("site", "age", "assoc", "fairshare", "jobsize", "partition", "qos")
PARKED = {"4": "2", "5": "3", "6": "4", "7": "5"}  # the recording's pending job -> the sprio line it gets


def test_recorded_sprio_parses_into_factors_that_sum_to_slurms_priority() -> None:
    got = priority_factors(SPRIO)
    assert sorted(got) == ["2", "3", "4", "5"]
    for line in SPRIO.splitlines():
        jid, total = line.split()[:2]
        f = got[jid]
        assert sum(f[k] for k in PARTS) - f["nice"] == float(total)
    assert got["5"]["nice"] == 50 and got["4"]["jobsize"] == 62500 and got["2"]["partition"] == 5000


def test_lines_that_do_not_parse_are_left_out() -> None:
    header = "JOBID PRIORITY SITE AGE ASSOC FAIRSHARE JOBSIZE PARTITION QOS NICE"
    text = "\n".join([header, "9 1 2 3", "8 x 0 0 0 0 0 0 0 0", SPRIO.splitlines()[0], "2 1 1 1 1 1 1 1 1 1"])
    assert priority_factors(text) == {"2": priority_factors(SPRIO)["2"]}  # its first line kept


def _parked_read() -> SlurmText:
    """The recorded read with four pending jobs parked by the recipe, with sprio's totals."""
    base = recorded.text(idle=True)
    doc = json.loads(base.jobs)
    totals = {line.split()[0]: int(line.split()[1]) for line in SPRIO.splitlines()}
    for j in doc["jobs"]:
        if str(j["job_id"]) in PARKED:
            mark = f"hpcsched:held partition={j['partition']} park=hold"
            j.update(priority=totals[PARKED[str(j["job_id"])]], partition="hold",
                     state_reason="PartitionDown", admin_comment=mark)
    return SlurmText(base.nodes, json.dumps(doc), base.reservations, base.now)


class Counting(RecordedRunner):
    reads: int = 0

    def priority_factors(self) -> str:
        self.reads += 1
        return super().priority_factors()


def test_parked_jobs_carry_their_factors_to_the_service_and_explain(tmp_path: Path) -> None:
    renumbered = "".join(f"{jid} {line.split(' ', 1)[1]}\n" for jid, line in
                         zip(PARKED, SPRIO.splitlines(), strict=True))
    runner = Counting(_parked_read(), factors=renumbered)
    asked: list[ScheduleRequest] = []
    answered: list[ScheduleResponse] = []
    service = in_process()

    def decide(req: ScheduleRequest) -> ScheduleResponse:
        asked.append(req)
        answered.append(service(req))
        return answered[-1]
    bridge = Bridge(runner, decide, BridgeState(tmp_path / "s.json"), {"name": "priority", "params": {
        "order": "weighted", "preset_weight": 1, "user_weight": 0, "queue_weight": 0, "age_weight": 0,
        "max_priority": 1e15}}, dry_run=True, factors_every=3)
    for _ in range(4):
        assert bridge.cycle().ok
    assert runner.reads == 2  # cycles 1 and 4: at most once every 3 cycles
    sent = {p.id: p for p in asked[0].pending}
    want = priority_factors(renumbered)
    assert {j: sent[j].priority_factors for j in PARKED} == {j: want[j] for j in PARKED}
    assert not [p.id for p in asked[0].pending if p.id not in PARKED and p.priority_factors]
    prio = {p.job_id: p for p in answered[0].priorities}
    for j in PARKED:
        assert {f"preset_{k}": v for k, v in want[j].items()}.items() <= prio[j].factors.items()
        assert prio[j].factors["preset"] == sent[j].priority
    ranked = sorted(PARKED, key=lambda j: prio[j].rank)
    assert ranked == sorted(PARKED, key=lambda j: -sent[j].priority)  # Slurm's order, larger first


def test_the_factors_leave_the_decision_unchanged(tmp_path: Path) -> None:
    """The same request with and without the factors: the same starts, reservations and ranks."""
    req = Bridge(RecordedRunner(_parked_read()), in_process(), BridgeState(None), dry_run=True,
                 factors_every=0).cycle()
    assert req.ok and req.view is not None
    v = req.view
    body: dict[str, Any] = json.loads(json.dumps({"now": v.now, "nodes": v.nodes, "running": v.running,
                                                  "pending": v.pending, "windows": v.windows}))
    plain = in_process()(ScheduleRequest.model_validate(body))
    for p in body["pending"]:
        p["priority_factors"] = {"jobsize": 3.0, "nice": 1.0}
    told = in_process()(ScheduleRequest.model_validate(body))
    assert told.starts == plain.starts and told.reservations == plain.reservations
    assert [(p.job_id, p.rank, p.priority) for p in told.priorities] == \
        [(p.job_id, p.rank, p.priority) for p in plain.priorities]


@pytest.mark.parametrize("factors", [{"Age": 1.0}, {"a b": 1.0}, {"age": float("inf")},
                                     {f"f{i}": 1.0 for i in range(17)}])
def test_bad_factors_are_refused_naming_the_field(factors: dict[str, float]) -> None:
    job = {"id": "j", "submit_time": 1.0, "walltime_s": 60.0, "priority_factors": factors}
    with pytest.raises(ValidationError) as exc:
        PendingJobIn.model_validate(job)
    assert all(e["loc"][0] == "priority_factors" for e in exc.value.errors())

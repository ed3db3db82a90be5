"""Fair-share reaches the service: a real Slurm with accounting (its own mariadbd and slurmdbd,
tests/bridges/slurm_accounting.py), `priority/multifactor` weighing fair-share alone, two accounts
with different shares and one of them already used. The recipe parks new jobs; the bridge sends
each parked job's fair-share factor as `sprio` prints it, the service ranks the less-used
account's jobs first and shows the factor, and every job runs once."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from app.bridges.slurm.read import SPRIO, priority_factors
from app.bridges.slurm.service import in_process
from schemas.schedule import ScheduleRequest, ScheduleResponse
from tests.bridges import slurm_accounting
from tests.bridges.slurm_accounting import Accounting
from tests.bridges.slurm_cluster import LocalSlurm, NodeSpec, PartitionSpec, missing_binaries
from tests.bridges.test_slurm_outages import LUA, SLURM_ORDER, bridge, drain, ran_once, started, submit

MISSING = missing_binaries() + slurm_accounting.missing_binaries()
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(bool(MISSING), reason=f"not installed: {MISSING} (.ci/run installs "
                                 "slurm-wlm munge slurmdbd mariadb-server)")]
NODES = [NodeSpec(f"n{i}", cpus=4, mem_mib=4000) for i in range(1, 3)]
# fair-share alone; usage decays and is charged every minute (the shortest PriorityCalcPeriod)
FAIRSHARE = ("PriorityType=priority/multifactor", "PriorityWeightFairshare=10000",
             "PriorityWeightJobSize=0", "PriorityWeightAge=0", "PriorityWeightPartition=0",
             "PriorityWeightQOS=0", "PriorityCalcPeriod=1", "PriorityDecayHalfLife=1-0")


def usage(slurm: LocalSlurm, account: str) -> float:
    out = slurm.run("scontrol", "show", "assoc_mgr", "flags=assoc", f"accounts={account}")
    m = re.search(r"UsageRaw/Norm/Efctv=([\d.]+)", out)
    return float(m.group(1)) if m else 0.0


def test_fair_share_factor_reaches_the_service(tmp_path: Path) -> None:
    acct = Accounting(tmp_path / "acct")
    root = tmp_path / "slurm"
    slurm = LocalSlurm(root, NODES, [PartitionSpec("batch", ("n1", "n2"), True)], job_submit_lua=LUA,
                       park="hold", priority_conf=FAIRSHARE, accounting=acct.conf(root),
                       before_controller=acct.start)
    asked: list[ScheduleRequest] = []
    service = in_process()

    def decide(req: ScheduleRequest) -> ScheduleResponse:
        asked.append(req)
        return service(req)
    with started(slurm):
        acct.shares(slurm, {"heavy": 2, "light": 1})
        b = bridge(slurm, tmp_path, decide=decide, policy={"name": "priority", "params": SLURM_ORDER},
                   factors_every=1)
        used = submit(slurm, "-A", "heavy", "-N", "2", "--exclusive", sleep=90)
        assert b.cycle().started == [used]
        deadline = time.monotonic() + 150
        while usage(slurm, "heavy") <= 0:  # charged at the next priority pass, within a minute
            assert time.monotonic() < deadline, "no usage charged to `heavy`"
            time.sleep(2)
        waiting = [submit(slurm, "-A", a, "-n", "1", sleep=2) for a in ("heavy", "light", "heavy", "light")]
        sprio = priority_factors(slurm.run(*SPRIO))
        asked.clear()
        assert b.cycle().ok
        sent = {p.id: p for p in asked[0].pending}
        answer = service(asked[0])
        drain(b, slurm, [used, *waiting], timeout_s=180)
        ran_once(slurm, [used, *waiting])
    heavy, light = waiting[::2], waiting[1::2]
    fair = {j: sent[j].priority_factors["fairshare"] for j in waiting}
    assert fair == {j: sprio[j]["fairshare"] for j in waiting}
    assert all(0 < fair[h] < fair[lt] for h in heavy for lt in light), fair
    rank = {p.job_id: p for p in answer.priorities}
    assert max(rank[j].rank for j in light) < min(rank[j].rank for j in heavy)  # the less-used first
    assert all(rank[j].factors["preset_fairshare"] == fair[j] for j in waiting)

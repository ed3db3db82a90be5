"""Slurm's own priority in the service's order, against a real Slurm with `priority/multifactor`:
the recipe parks new jobs in a down partition (`hpcsched slurm recipe --park hold`) instead of
holding them, so they keep their multifactor priority (`sprio` lists them); the bridge sends it,
and a `priority` policy weighing only that priority starts them in Slurm's order. The fail-safe
moves parked jobs home when the bridge dies."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.bridges.slurm.failsafe import HANDED_BACK
from tests.bridges.failsafe_site import LUA, SLACK_S, Site, marks, never_held_past, running, until
from tests.bridges.slurm_cluster import NEEDS_SLURM, LocalSlurm, NodeSpec, PartitionSpec

pytestmark = NEEDS_SLURM
NODES = [NodeSpec(f"n{i}", cpus=4, mem_mib=4000) for i in range(1, 3)]
PARTITIONS = [PartitionSpec("batch", ("n1", "n2"), default=True)]
GRACE_S = 8
# job size alone ranks the jobs (larger first: Slurm's default), so the order differs from submission's
MULTIFACTOR = ("PriorityType=priority/multifactor", "PriorityWeightJobSize=100000", "PriorityWeightAge=0",
               "PriorityWeightPartition=0", "PriorityWeightFairshare=0", "PriorityWeightQOS=0")
# the service's weighted order with only the preset priority (Slurm's, sent by the bridge) weighed
SLURM_ORDER = {"order": "weighted", "preset_weight": 1, "user_weight": 0, "queue_weight": 0, "age_weight": 0,
               "max_priority": 1e15, "reserve_after_wait_s": 0}  # as docs/slurm-failsafe.md gives it


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Site]:
    slurm = LocalSlurm(tmp_path, NODES, PARTITIONS, job_submit_lua=LUA, heartbeat=tmp_path / "heartbeat",
                       grace_s=GRACE_S, park="hold", priority_conf=MULTIFACTOR)
    with running(slurm, tmp_path) as s:
        yield s


def _blocker(site: Site, sleep: int) -> str:
    """One job on both nodes, started by the bridge: what follows waits, parked."""
    (jid,) = site.submit(1, sleep=sleep, args=("-N", "2", "--exclusive"))
    until(lambda: jid in site.started_by("bridge"), 60, "the blocker's start")
    return jid


def _first_cycle_starting(site: Site, ids: list[str]) -> set[str]:
    for e in site.events("bridge"):
        if e["event"] == "cycle" and set(e["started"]) & set(ids):
            return set(e["started"])
    raise AssertionError("no cycle started them")


def test_parked_jobs_start_in_slurms_priority_order_and_are_handed_back(site: Site) -> None:
    site.bridge("bridge", "--policy", "priority", "--params", json.dumps(SLURM_ORDER))
    _blocker(site, sleep=10)
    small_to_large = site.submit(4, sleep=3)  # -n 1, 2, 3, 4: each a whole node (no memory asked)
    now = site.show()
    assert {now[j]["Partition"] for j in small_to_large} == {"hold"}
    prio = [int(now[j]["Priority"]) for j in small_to_large]
    assert 0 < prio[0] < prio[1] < prio[2] < prio[3], prio  # multifactor: larger first
    listed = site.slurm.run("sprio", "-h", "-o", "%i").split()
    assert set(small_to_large) <= set(listed)  # a held job (priority 0) would not be listed

    site.drain()
    site.ran_once()
    assert _first_cycle_starting(site, small_to_large) == set(small_to_large[2:])  # the two largest
    now = site.show()
    assert {now[j]["Partition"] for j in site.jobs} == {"batch"}

    _blocker(site, sleep=GRACE_S + 6)  # ends after the hand-back: Slurm's own scheduler runs the rest
    parked = site.submit(3, sleep=2)
    assert set(site.held(parked)) == set(parked)
    site.procs[0].send_signal(signal.SIGKILL)
    site.procs[0].wait()
    killed = time.monotonic()
    site.watchdog()
    site.drain(check=never_held_past(site, killed + GRACE_S + SLACK_S))
    site.ran_once()
    assert marks(site, parked) == {HANDED_BACK}
    assert not set(parked) & site.started_by("bridge")

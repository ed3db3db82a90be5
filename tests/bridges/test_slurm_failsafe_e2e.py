"""The fail-safe against a real Slurm (slurmctld + one slurmd per node, started here, with the
recipe rendered as `hpcsched slurm recipe` renders it): the bridge (`hpcsched slurm run`, its
service in process) killed with SIGKILL, the service it calls over HTTP killed with SIGKILL, and a
planned rollback (`hpcsched slurm handback`). Plain `sbatch -n P` jobs; each writes its id to a
file when it runs, so "ran exactly once" is read from what ran, not from Slurm's word."""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.bridges.slurm.failsafe import HANDED_BACK
from app.bridges.slurm.read import MARK
from tests.bridges.failsafe_site import LUA, SLACK_S, Site, marks, never_held_past, running, until
from tests.bridges.slurm_cluster import NEEDS_SLURM, LocalSlurm, NodeSpec, PartitionSpec, free_ports

pytestmark = NEEDS_SLURM
NODES = [NodeSpec(f"n{i}", cpus=4, mem_mib=4000) for i in range(1, 5)]
PARTITIONS = [PartitionSpec("batch", tuple(n.name for n in NODES), default=True)]
GRACE_S = 8


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Site]:
    slurm = LocalSlurm(tmp_path, NODES, PARTITIONS, job_submit_lua=LUA, heartbeat=tmp_path / "heartbeat",
                       grace_s=GRACE_S)
    with running(slurm, tmp_path) as s:
        yield s


def test_bridge_killed_slurm_takes_over_and_the_bridge_adopts_it_back(site: Site) -> None:
    """kill -9 of the bridge (and the service in it): jobs submitted within the grace are held, as
    the recipe cannot tell; past it, new jobs are not held and the watchdog hands the held ones
    back; the queue drains under Slurm's own scheduler, each job once. A bridge started again
    leaves the handed-back jobs to Slurm and holds and starts the new ones."""
    first = site.bridge("bridge1")
    early = site.submit(8, sleep=8)  # 4 nodes: the bridge starts some, holds the rest
    until(lambda: site.started_by("bridge1"), 60, "the bridge's first start")
    first.send_signal(signal.SIGKILL)
    first.wait()
    killed = time.monotonic()
    within = site.submit(3, sleep=2)
    assert set(site.held(within)) == set(within) and marks(site, within) == {MARK}
    site.watchdog()
    until(lambda: time.monotonic() > killed + GRACE_S + 1.5, 60, "the grace")
    after = site.submit(3, sleep=2)
    assert not site.held(after) and MARK not in marks(site, after)

    site.drain(check=never_held_past(site, killed + GRACE_S + SLACK_S))
    site.ran_once()
    handed = [j for j in early + within if j not in site.started_by("bridge1")]
    assert handed and marks(site, handed) == {HANDED_BACK}

    second = site.bridge("bridge2")
    later = site.submit(4, sleep=2)
    assert marks(site, later) == {MARK}  # held by the recipe again (the bridge may have released some)
    site.drain()
    site.ran_once()
    assert site.started_by("bridge2") == set(later)  # the new jobs, and none of Slurm's
    assert second.poll() is None


def test_service_killed_the_bridge_cannot_decide_slurm_takes_over(site: Site) -> None:
    """kill -9 of the service the bridge calls over HTTP: the bridge runs on but completes no cycle,
    so the fail-safe engages as if it had stopped; once the service is back, the bridge resumes."""
    (port,) = free_ports(1)
    url = f"http://127.0.0.1:{port}"
    serve = ("uvicorn", sys.executable, "-m", "uvicorn", "app.main:app", "--host", "127.0.0.1",
             "--port", str(port), "--log-level", "warning")
    service = site.spawn(*serve)
    until(lambda: _answers(url), 120, "the service")
    bridge = site.bridge("bridge", "--url", url)
    early = site.submit(8, sleep=8)
    until(lambda: site.started_by("bridge"), 60, "the bridge's first start")
    service.send_signal(signal.SIGKILL)
    service.wait()
    killed = time.monotonic()
    site.watchdog()
    until(lambda: time.monotonic() > killed + GRACE_S + 1.5, 60, "the grace")
    after = site.submit(3, sleep=2)
    assert not site.held(after)
    site.drain(check=never_held_past(site, killed + GRACE_S + SLACK_S))
    site.ran_once()
    assert bridge.poll() is None
    assert any(e["event"] == "cycle_failed" for e in site.events("bridge"))
    assert [j for j in early if j not in site.started_by("bridge")]  # some were handed back

    site.spawn(*serve)
    until(lambda: _answers(url), 120, "the service again")
    resumed = site.beat.stat().st_mtime
    until(lambda: site.beat.stat().st_mtime > resumed, 60, "a completed cycle")
    later = site.submit(3, sleep=2)
    assert marks(site, later) == {MARK}
    site.drain()
    site.ran_once()
    assert set(later) <= site.started_by("bridge")


def _answers(url: str) -> bool:
    import httpx

    try:
        return httpx.get(f"{url}/healthz", timeout=1).status_code < 500
    except httpx.HTTPError:
        return False


def test_handback_releases_every_held_job_once(site: Site) -> None:
    """The planned rollback: refused while the bridge runs; once it is stopped, every job it holds
    is released, unpinned, and runs once under Slurm's own scheduler; new jobs are not held; a
    second hand-back finds nothing."""
    bridge = site.bridge("bridge")
    jobs = site.submit(12, sleep=6)
    until(lambda: len(site.started_by("bridge")) >= 2, 60, "the bridge's starts")
    refused = site.hpcsched("handback", "--recipe", str(site.recipe), "--conf", str(site.slurm.conf))
    assert refused.returncode == 2 and "stop it first" in refused.stdout
    bridge.terminate()
    bridge.wait()
    held = site.held(jobs)
    assert len(held) >= 4, "too few held jobs to test a hand-back"

    done = site.hpcsched("handback", "--recipe", str(site.recipe), "--conf", str(site.slurm.conf))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{len(held)} released" in done.stdout
    assert not site.held() and marks(site, held) == {HANDED_BACK}
    again = site.hpcsched("handback", "--recipe", str(site.recipe), "--conf", str(site.slurm.conf))
    assert again.returncode == 0 and "0 released, 0 unparked, 0 unpinned, 0 marked" in again.stdout
    after = site.submit(2, sleep=1)
    assert not site.held(after)
    site.drain()
    site.ran_once()
    assert not set(held) & site.started_by("bridge")

"""The fail-safe against a real Slurm (slurmctld + one slurmd per node, started here, with the
recipe rendered as `hpcsched slurm recipe` renders it): the bridge (`hpcsched slurm run`, its
service in process) killed with SIGKILL, the service it calls over HTTP killed with SIGKILL, and a
planned rollback (`hpcsched slurm handback`). Plain `sbatch -n P` jobs; each writes its id to a
file when it runs, so "ran exactly once" is read from what ran, not from Slurm's word."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from app.bridges.slurm.failsafe import HANDED_BACK
from app.bridges.slurm.read import MARK
from tests.bridges.slurm_cluster import LocalSlurm, NodeSpec, PartitionSpec, free_ports, missing_binaries

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(bool(missing_binaries()), reason=f"Slurm/munge not installed: "
                                 f"{missing_binaries()} (.ci/run installs slurm-wlm munge)")]
REPO = Path(__file__).resolve().parents[2]
LUA = REPO / "app" / "bridges" / "slurm" / "job_submit.lua"
NODES = [NodeSpec(f"n{i}", cpus=4, mem_mib=4000) for i in range(1, 5)]
PARTITIONS = [PartitionSpec("batch", tuple(n.name for n in NODES), default=True)]
GRACE_S = 8
WATCH_EVERY_S = 1
# the grace, the watchdog's period, Slurm's release-to-scheduling delay and the tests' polling
SLACK_S = 5


@dataclass
class Site:
    """A Slurm with the recipe's fail-safe on, and the bridge, watchdog and service processes the
    test starts (all stopped at the end)."""

    slurm: LocalSlurm
    root: Path
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    jobs: list[str] = field(default_factory=list)

    @property
    def beat(self) -> Path:
        return self.root / "heartbeat"

    @property
    def recipe(self) -> Path:
        return self.root / "job_submit.lua"

    def hpcsched(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "app.cli", "slurm", *args], cwd=REPO, env=_env(),
                              capture_output=True, text=True, timeout=180)

    def spawn(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        out = open(self.root / f"{name}.out", "ab")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen(args, cwd=REPO, env=_env(), stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
        out.close()
        self.procs.append(proc)
        return proc

    def bridge(self, name: str, *extra: str) -> subprocess.Popen[bytes]:
        """`hpcsched slurm run`, cycling every second, until its first completed cycle."""
        before = self.beat.stat().st_mtime if self.beat.exists() else 0.0
        proc = self.spawn(name, sys.executable, "-m", "app.cli", "slurm", "run", "--interval", "1",
                          "--conf", str(self.slurm.conf), "--state", str(self.root / "state.json"),
                          "--heartbeat", str(self.beat), "--grace", str(GRACE_S),
                          "--log", str(self.root / f"{name}.jsonl"), *extra)
        _until(lambda: self.beat.exists() and self.beat.stat().st_mtime > before, 120, f"{name}: a cycle")
        return proc

    def watchdog(self) -> subprocess.Popen[bytes]:
        return self.spawn("watchdog", sys.executable, "-m", "app.cli", "slurm", "watchdog", "--recipe",
                          str(self.recipe), "--every", str(WATCH_EVERY_S), "--conf", str(self.slurm.conf))

    def submit(self, n: int, sleep: int) -> list[str]:
        """`n` plain `sbatch -n P` jobs (P = 1..4) that record their run, then sleep."""
        ids = []
        for i in range(n):
            out = self.slurm.run("sbatch", "--parsable", f"--chdir={self.root}", "-o", "/dev/null", "-t", "2",
                                 "-n", str(1 + i % 4), "--wrap",
                                 f"echo $SLURM_JOB_ID >> {self.root / 'ran'}; sleep {sleep}")
            ids.append(out.strip().split(";")[0])
        self.jobs += ids
        return ids

    def show(self) -> dict[str, dict[str, str]]:
        """Each job's state, priority, admin comment and restarts, from `scontrol show job -o`."""
        out = {}
        for line in self.slurm.run("scontrol", "show", "job", "-o").splitlines():
            kv = dict(re.findall(r"(\w+)=(\S*)", line))
            if "JobId" in kv:
                out[kv["JobId"]] = kv
        return out

    def held(self, ids: list[str] | None = None) -> list[str]:
        """The pending jobs (of `ids`) at priority 0: held."""
        now = self.show()
        return [j for j in (ids or self.jobs)
                if now[j]["JobState"] == "PENDING" and now[j]["Priority"] == "0"]

    def drain(self, timeout_s: float = 180, check: Callable[[], None] = lambda: None) -> None:
        """Wait until every submitted job ended, calling `check` at each look."""
        def ended() -> bool:
            check()
            now = self.show()
            return all(now[j]["JobState"] not in ("PENDING", "RUNNING", "COMPLETING") for j in self.jobs)
        _until(ended, timeout_s, "the queue to drain")

    def ran_once(self) -> None:
        """Every job completed, ran exactly once (by its own record) and was never requeued."""
        runs = (self.root / "ran").read_text().split()
        assert sorted(runs) == sorted(self.jobs), "a job ran twice or never"
        now = self.show()
        assert {j: now[j]["JobState"] for j in self.jobs} == {j: "COMPLETED" for j in self.jobs}
        assert all(now[j].get("Restarts", "0") == "0" for j in self.jobs)

    def events(self, name: str) -> list[dict]:
        import json

        path = self.root / f"{name}.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    def started_by(self, name: str) -> set[str]:
        return {e["job"] for e in self.events(name) if e["event"] == "start"}

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO)}


def _until(ok: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not ok():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.5)


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Site]:
    slurm = LocalSlurm(tmp_path, NODES, PARTITIONS, job_submit_lua=LUA, heartbeat=tmp_path / "heartbeat",
                       grace_s=GRACE_S)
    s = Site(slurm, tmp_path)
    try:
        slurm.start()
        yield s
    finally:
        s.stop()
        slurm.stop()


def _marks(site: Site, ids: list[str]) -> set[str]:
    now = site.show()
    return {now[j].get("AdminComment", "") for j in ids}


def _never_held_past(site: Site, since: float) -> Callable[[], None]:
    """A check for `drain`: after `since` (monotonic), no job is held."""
    def check() -> None:
        if time.monotonic() > since:
            assert not site.held(), "a job is still held past the grace"
    return check


def test_bridge_killed_slurm_takes_over_and_the_bridge_adopts_it_back(site: Site) -> None:
    """kill -9 of the bridge (and the service in it): jobs submitted within the grace are held, as
    the recipe cannot tell; past it, new jobs are not held and the watchdog hands the held ones
    back; the queue drains under Slurm's own scheduler, each job once. A bridge started again
    leaves the handed-back jobs to Slurm and holds and starts the new ones."""
    first = site.bridge("bridge1")
    early = site.submit(8, sleep=8)  # 4 nodes: the bridge starts some, holds the rest
    _until(lambda: site.started_by("bridge1"), 60, "the bridge's first start")
    first.send_signal(signal.SIGKILL)
    first.wait()
    killed = time.monotonic()
    within = site.submit(3, sleep=2)
    assert set(site.held(within)) == set(within) and _marks(site, within) == {MARK}
    site.watchdog()
    _until(lambda: time.monotonic() > killed + GRACE_S + 1.5, 60, "the grace")
    after = site.submit(3, sleep=2)
    assert not site.held(after) and MARK not in _marks(site, after)

    site.drain(check=_never_held_past(site, killed + GRACE_S + SLACK_S))
    site.ran_once()
    handed = [j for j in early + within if j not in site.started_by("bridge1")]
    assert handed and _marks(site, handed) == {HANDED_BACK}

    second = site.bridge("bridge2")
    later = site.submit(4, sleep=2)
    assert _marks(site, later) == {MARK}  # held by the recipe again (the bridge may have released some)
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
    _until(lambda: _answers(url), 120, "the service")
    bridge = site.bridge("bridge", "--url", url)
    early = site.submit(8, sleep=8)
    _until(lambda: site.started_by("bridge"), 60, "the bridge's first start")
    service.send_signal(signal.SIGKILL)
    service.wait()
    killed = time.monotonic()
    site.watchdog()
    _until(lambda: time.monotonic() > killed + GRACE_S + 1.5, 60, "the grace")
    after = site.submit(3, sleep=2)
    assert not site.held(after)
    site.drain(check=_never_held_past(site, killed + GRACE_S + SLACK_S))
    site.ran_once()
    assert bridge.poll() is None
    assert any(e["event"] == "cycle_failed" for e in site.events("bridge"))
    assert [j for j in early if j not in site.started_by("bridge")]  # some were handed back

    site.spawn(*serve)
    _until(lambda: _answers(url), 120, "the service again")
    resumed = site.beat.stat().st_mtime
    _until(lambda: site.beat.stat().st_mtime > resumed, 60, "a completed cycle")
    later = site.submit(3, sleep=2)
    assert _marks(site, later) == {MARK}
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
    _until(lambda: len(site.started_by("bridge")) >= 2, 60, "the bridge's starts")
    refused = site.hpcsched("handback", "--recipe", str(site.recipe), "--conf", str(site.slurm.conf))
    assert refused.returncode == 2 and "stop it first" in refused.stdout
    bridge.terminate()
    bridge.wait()
    held = site.held(jobs)
    assert len(held) >= 4, "too few held jobs to test a hand-back"

    done = site.hpcsched("handback", "--recipe", str(site.recipe), "--conf", str(site.slurm.conf))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{len(held)} released" in done.stdout
    assert not site.held() and _marks(site, held) == {HANDED_BACK}
    again = site.hpcsched("handback", "--recipe", str(site.recipe), "--conf", str(site.slurm.conf))
    assert again.returncode == 0 and "0 released, 0 unpinned, 0 marked" in again.stdout
    after = site.submit(2, sleep=1)
    assert not site.held(after)
    site.drain()
    site.ran_once()
    assert not set(held) & site.started_by("bridge")

"""A real Slurm with the recipe's fail-safe on, and the bridge, watchdog and service processes a
fail-safe test starts (tests/bridges/test_slurm_failsafe_e2e.py, test_slurm_park_e2e.py)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests.bridges.slurm_cluster import LocalSlurm

REPO = Path(__file__).resolve().parents[2]
LUA = REPO / "app" / "bridges" / "slurm" / "job_submit.lua"
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
        return subprocess.run([sys.executable, "-m", "app.cli", "slurm", *args], cwd=REPO, env=env(),
                              capture_output=True, text=True, timeout=180)

    def spawn(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        out = open(self.root / f"{name}.out", "ab")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen(args, cwd=REPO, env=env(), stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
        out.close()
        self.procs.append(proc)
        return proc

    def bridge(self, name: str, *extra: str) -> subprocess.Popen[bytes]:
        """`hpcsched slurm run`, cycling every second, until its first completed cycle."""
        before = self.beat.stat().st_mtime if self.beat.exists() else 0.0
        proc = self.spawn(name, sys.executable, "-m", "app.cli", "slurm", "run", "--interval", "1",
                          "--conf", str(self.slurm.conf), "--state", str(self.root / "state.json"),
                          "--heartbeat", str(self.beat), "--grace", str(self.slurm.grace_s),
                          "--log", str(self.root / f"{name}.jsonl"), *extra)
        until(lambda: self.beat.exists() and self.beat.stat().st_mtime > before, 120, f"{name}: a cycle")
        return proc

    def watchdog(self) -> subprocess.Popen[bytes]:
        return self.spawn("watchdog", sys.executable, "-m", "app.cli", "slurm", "watchdog", "--recipe",
                          str(self.recipe), "--every", str(WATCH_EVERY_S), "--conf", str(self.slurm.conf))

    def submit(self, n: int, sleep: int, args: tuple[str, ...] = ()) -> list[str]:
        """`n` plain `sbatch -n P` jobs (P = 1..4; or `args` instead) that record their run, then sleep."""
        ids = []
        for i in range(n):
            out = self.slurm.run("sbatch", "--parsable", f"--chdir={self.root}", "-o", "/dev/null", "-t", "2",
                                 *(args or ("-n", str(1 + i % 4))), "--wrap",
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
        """The pending jobs (of `ids`) held (priority 0) or parked (in the recipe's down partition)."""
        now = self.show()
        return [j for j in (ids or self.jobs) if now[j]["JobState"] == "PENDING"
                and (now[j]["Priority"] == "0" or now[j]["Partition"] == (self.slurm.park or None))]

    def drain(self, timeout_s: float = 180, check: Callable[[], None] = lambda: None) -> None:
        """Wait until every submitted job ended, calling `check` at each look."""
        def ended() -> bool:
            check()
            now = self.show()
            return all(now[j]["JobState"] not in ("PENDING", "RUNNING", "COMPLETING") for j in self.jobs)
        until(ended, timeout_s, "the queue to drain")

    def ran_once(self) -> None:
        """Every job completed, ran exactly once (by its own record) and was never requeued."""
        runs = (self.root / "ran").read_text().split()
        assert sorted(runs) == sorted(self.jobs), "a job ran twice or never"
        now = self.show()
        assert {j: now[j]["JobState"] for j in self.jobs} == {j: "COMPLETED" for j in self.jobs}
        assert all(now[j].get("Restarts", "0") == "0" for j in self.jobs)

    def events(self, name: str) -> list[dict]:
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


@contextmanager
def running(slurm: LocalSlurm, workdir: Path) -> Iterator[Site]:
    """A started Slurm and its site; both stopped at the end, whatever the test did."""
    s = Site(slurm, workdir)
    try:
        slurm.start()
        yield s
    finally:
        s.stop()
        slurm.stop()


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO)}


def until(ok: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not ok():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.5)



def marks(site: Site, ids: list[str]) -> set[str]:
    now = site.show()
    return {now[j].get("AdminComment", "") for j in ids}


def never_held_past(site: Site, since: float) -> Callable[[], None]:
    """A check for `drain`: after `since` (monotonic), no job is held (nor parked)."""
    def check() -> None:
        if time.monotonic() > since:
            assert not site.held(), "a job is still held past the grace"
    return check

"""The bridge against a real Slurm (slurmctld + a slurmd per node, started here) under the faults
of issue 30: plain `sbatch -n P` jobs Slurm lays out by block, the bridge stopped between writing
its state and releasing, a released job's node drained before it starts, and the service's Redis
restarted without persistence under the cached path. Each run asserts from Slurm's records that
every job ran exactly once and completed, no node was over-committed, no cycle was skipped and
nothing stayed held past the bound."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from app.bridges.slurm.cached import CachedCluster
from app.bridges.slurm.cycle import Bridge, CycleReport
from app.bridges.slurm.runner import CommandRunner
from app.bridges.slurm.service import in_process, over_http
from app.bridges.slurm.state import BridgeState
from app.main import create_app
from app.settings import Settings
from tests.app_server import served
from tests.bridges.slurm_cluster import NEEDS_SLURM, LocalSlurm, NodeSpec, PartitionSpec, submit
from tests.bridges.workload import Ran, records
from tests.redis_server import BINARY, RedisServer

pytestmark = NEEDS_SLURM
REPO = Path(__file__).resolve().parents[2]
LUA = REPO / "app" / "bridges" / "slurm" / "job_submit.lua"
NODES = [NodeSpec(f"n{i}", cpus=8, mem_mib=16_000) for i in range(1, 5)]
BOUND_S = 12.0


class Killed(BaseException):
    """Stands in for kill -9 of the bridge at one step of its cycle."""


@pytest.fixture
def slurm(tmp_path: Path) -> Iterator[LocalSlurm]:
    s = LocalSlurm(tmp_path / "slurm", NODES, [PartitionSpec("batch", tuple(n.name for n in NODES), True)],
                   job_submit_lua=LUA)
    try:
        s.start()
        yield s
    finally:
        s.stop()


def plain_mix(slurm: LocalSlurm) -> list[str]:
    """Plain `-n P` jobs (no --ntasks-per-node) that Slurm spreads by block over 8-CPU nodes, the
    issue's 20-CPU job beside 1-CPU jobs, --mem and --mem-per-cpu."""
    jobs = [submit(slurm, "-n", "20", "--mem=1000", sleep=6)]
    jobs += [submit(slurm, "-n", "1", "--mem=100") for _ in range(4)]
    jobs += [submit(slurm, "-N", "3", "-n", "12", "--mem=500", sleep=4)]
    jobs += [submit(slurm, "-n", "3", "--mem-per-cpu=300") for _ in range(3)]
    jobs += [submit(slurm, "-n", "10", "--mem=2000", sleep=2) for _ in range(2)]
    return jobs


def drain(bridge: Bridge, slurm: LocalSlurm, jobs: list[str], timeout_s: float = 150,
          each: Callable[[CycleReport], None] = lambda rep: None) -> list[CycleReport]:
    """Cycle every second until every job ended (or the time is up); the cycles' reports."""
    reps: list[CycleReport] = []
    deadline = time.monotonic() + timeout_s

    def done(rep: CycleReport) -> bool:
        reps.append(rep)
        each(rep)
        now = records(slurm)
        return time.monotonic() > deadline or all(now[j].state not in ("PENDING", "RUNNING", "COMPLETING")
                                                  for j in jobs)
    bridge.loop(1.0, done=done, wake=False)
    return reps


def assert_sound(slurm: LocalSlurm, jobs: list[str], reps: list[CycleReport],
                 events: Path) -> dict[str, Ran]:
    """Every job completed, started once (after the bridge's last release of it), on nodes never
    over-committed; no cycle skipped, none set aside; nothing held longer than the bound."""
    final = records(slurm)
    assert {j: final[j].state for j in jobs} == dict.fromkeys(jobs, "COMPLETED")
    assert [r.errors for r in reps if not r.ok] == []
    assert not [r.aside for r in reps if r.aside]
    lines = [json.loads(x) for x in events.read_text().splitlines()] if events.exists() else []
    last_release = {e["job"]: e["t"] for e in lines if e["event"] == "start"}
    for j in jobs:
        assert final[j].start >= last_release[j] - 1, j  # no start before (or besides) the release
        assert final[j].start - last_release[j] <= BOUND_S + 3, j
    _no_over_commit(final)
    return final


def _no_over_commit(final: dict[str, Ran]) -> None:
    cap = {n.name: (n.cpus, n.mem_mib) for n in NODES}
    for node in cap:
        spans = [(r.start, r.end, *r.nodes[node][:2]) for r in final.values() if node in r.nodes]
        for t in {s[0] for s in spans}:
            live = [s for s in spans if s[0] <= t < s[1]]
            for k in range(2):
                assert sum(s[2 + k] for s in live) <= cap[node][k], (node, t)


def test_plain_n_jobs_run_where_pinned_with_no_cycle_skipped(slurm: LocalSlurm, tmp_path: Path) -> None:
    """The issue's stall: a `-n 20` job Slurm lays 8+8+4 beside 1-CPU jobs. Every job runs once,
    on the nodes the service chose, with the CPUs the bridge predicted, and no cycle is skipped."""
    jobs = plain_mix(slurm)
    events = tmp_path / "events.jsonl"
    bridge = Bridge(CommandRunner(str(slurm.conf)), in_process(), BridgeState.load(tmp_path / "s.json"),
                    None, events=events, start_bound_s=BOUND_S)
    reps = drain(bridge, slurm, jobs)
    final = assert_sound(slurm, jobs, reps, events)
    lines = [json.loads(x) for x in events.read_text().splitlines()]
    starts = {e["job"]: e for e in lines if e["event"] == "start"}
    for j in jobs:
        assert set(final[j].nodes) == set(starts[j]["nodes"]), j
    big = final[jobs[0]]
    assert sorted(c for c, _, _ in big.nodes.values()) == [4, 8, 8]
    assert {n: c for n, (c, _, _) in big.nodes.items()} == starts[jobs[0]]["cpus"]


def test_killed_between_state_and_release(slurm: LocalSlurm, tmp_path: Path) -> None:
    """kill -9 of the bridge after it wrote its state and before `scontrol release` (and once more
    in the middle of a later read): the restarted bridge releases those jobs again; every job
    runs exactly once and none stays held."""
    jobs = plain_mix(slurm)
    state, events = tmp_path / "s.json", tmp_path / "events.jsonl"

    def kill_at(step: str) -> Callable[[str], None]:
        def hook(at: str) -> None:
            if at == step:
                raise Killed
        return hook
    first = Bridge(CommandRunner(str(slurm.conf)), in_process(), BridgeState.load(state), None,
                   events=events, hook=kill_at("state_saved"))
    with pytest.raises(Killed):
        first.cycle()
    held = json.loads(state.read_text())["started"]
    now = records(slurm)
    assert held and all(now[j].state == "PENDING" and now[j].priority == 0 for j in held)
    second = Bridge(CommandRunner(str(slurm.conf)), in_process(), BridgeState.load(state), None,
                    events=events, hook=kill_at("read"))
    with pytest.raises(Killed):
        second.cycle()
    third = Bridge(CommandRunner(str(slurm.conf)), in_process(), BridgeState.load(state), None,
                   events=events, start_bound_s=BOUND_S)
    reps = drain(third, slurm, jobs)
    lines = [json.loads(x) for x in events.read_text().splitlines()]
    again = [j for e in lines if e["event"] == "released_again" for j in e["jobs"]]
    assert sorted(again) == sorted(held)
    final = records(slurm)
    assert {j: final[j].state for j in jobs} == dict.fromkeys(jobs, "COMPLETED")
    assert [r.errors for r in reps if not r.ok] == []
    _no_over_commit(final)


def test_a_release_slurm_cannot_start_is_held_again(slurm: LocalSlurm, tmp_path: Path) -> None:
    """A released job's node is drained before Slurm starts it: once the bound passes the bridge
    holds it again, unpins it, decides it again and it runs on another node, once."""
    blocker = submit(slurm, "-n", "1", "--mem=100", sleep=1)
    events = tmp_path / "events.jsonl"
    victim: dict[str, str] = {}

    def drain_its_node(step: str) -> None:
        if step == "pinned" and not victim:
            pin = slurm.run("squeue", "-h", "-j", blocker, "-o", "%R %n").split()
            node = pin[-1] if pin else "n1"
            slurm.run("scontrol", "update", f"NodeName={node}", "State=DRAIN", "Reason=test")
            victim["node"] = node
    bridge = Bridge(CommandRunner(str(slurm.conf)), in_process(), BridgeState.load(tmp_path / "s.json"),
                    None, events=events, start_bound_s=BOUND_S, hook=drain_its_node)
    reps = drain(bridge, slurm, [blocker], timeout_s=90)
    final = records(slurm)[blocker]
    lines = [json.loads(x) for x in events.read_text().splitlines()]
    assert [e["job"] for e in lines if e["event"] == "held_again"] == [blocker]
    assert final.state == "COMPLETED" and victim["node"] not in final.nodes
    assert [r.errors for r in reps if not r.ok] == []


@pytest.mark.skipif(BINARY is None, reason="no redis-server")
def test_redis_restarted_without_persistence_under_cached(slurm: LocalSlurm, tmp_path: Path) -> None:
    """Under --cached, the service's Redis restarts empty while a whole-cluster job runs and
    nothing changes (no PATCH to fail): the next /schedule finds the cluster gone and the bridge
    PUTs it and asks again in the same cycle; every job runs once and no cycle is skipped."""
    servers = [RedisServer(tmp_path / "redis").start()]
    events = tmp_path / "events.jsonl"
    bridge: Bridge | None = None

    def restart_once(rep: CycleReport) -> None:
        if len(servers) == 1 and rep.view is not None and rep.view.pending and bridge.cache is not None \
                and bridge.cache.last_write == "unchanged":
            servers[0].kill()
            servers.append(RedisServer(tmp_path / "redis", port=servers[0].port).start())
    try:
        with served(create_app(Settings(redis_url=servers[0].url))) as url:
            service = over_http(url)
            jobs = [submit(slurm, "-n", "32", "--mem=1000", sleep=8), *plain_mix(slurm)]
            bridge = Bridge(CommandRunner(str(slurm.conf)), service, BridgeState.load(tmp_path / "s.json"),
                            None, events=events, cache=CachedCluster(service, "faults"),
                            start_bound_s=BOUND_S)
            try:
                reps = drain(bridge, slurm, jobs, each=restart_once)
            finally:
                service.close()
    finally:
        for server in servers:
            server.stop()
    assert len(servers) == 2
    lines = [json.loads(x) for x in events.read_text().splitlines()]
    assert any(e["event"] == "cluster_lost" for e in lines)
    final = records(slurm)
    assert {j: final[j].state for j in jobs} == dict.fromkeys(jobs, "COMPLETED")
    assert [r.errors for r in reps if not r.ok] == []
    _no_over_commit(final)


def test_an_array_runs_task_by_task(slurm: LocalSlurm, tmp_path: Path) -> None:
    """A held `--array=0-5` of plain `-n 3` tasks beside a `-n 20` job: each task is pinned and
    released on its own (Slurm splits it off), and every task runs exactly once."""
    big = submit(slurm, "-n", "20", "--mem=1000", sleep=4)
    array = submit(slurm, "--array=0-5", "-n", "3", "--mem=200", sleep=2)
    events = tmp_path / "events.jsonl"
    bridge = Bridge(CommandRunner(str(slurm.conf)), in_process(), BridgeState.load(tmp_path / "s.json"),
                    None, events=events, start_bound_s=BOUND_S)
    tasks = [f"{array}_{t}" for t in range(6)]

    def by_task() -> dict[str, Ran]:
        out = {}
        for line in slurm.run("squeue", "-h", "-t", "all", "-o", "%i %A").splitlines():
            name, jid = line.split()
            out[name] = records(slurm)[jid]
        return out

    reps: list[CycleReport] = []
    deadline = time.monotonic() + 120

    def done(rep: CycleReport) -> bool:
        reps.append(rep)
        now = by_task()
        return time.monotonic() > deadline or all(
            t in now and now[t].state not in ("PENDING", "RUNNING", "COMPLETING") for t in [*tasks, big])
    bridge.loop(1.0, done=done, wake=False)
    final = by_task()
    assert {t: final[t].state for t in [*tasks, big]} == dict.fromkeys([*tasks, big], "COMPLETED")
    lines = [json.loads(x) for x in events.read_text().splitlines()]
    started = [e["job"] for e in lines if e["event"] == "start"]
    assert sorted(started) == sorted([*tasks, big])
    assert [r.errors for r in reps if not r.ok] == [] and not [r.errors for r in reps if r.errors]
    _no_over_commit(records(slurm))

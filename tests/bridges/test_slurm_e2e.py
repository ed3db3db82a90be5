"""The bridge against a real Slurm (slurmctld + one slurmd per node, started here): a mixed
workload drains with every job run where the service chose, and shadow mode changes nothing.
Shadow mode runs through the CLI with the service in process and inline snapshots; the drain runs
the library against a real uvicorn on the cached path (PUT once, then PATCHes)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from app.bridges.slurm.cached import CachedCluster
from app.bridges.slurm.cycle import Bridge
from app.bridges.slurm.runner import CommandRunner
from app.bridges.slurm.service import over_http
from app.bridges.slurm.state import BridgeState
from tests.app_server import served
from tests.bridges.slurm_cluster import NEEDS_SLURM, LocalSlurm
from tests.bridges.workload import NODES, PARTITIONS, Ran, Submitted, records, submit_mix

pytestmark = NEEDS_SLURM
REPO = Path(__file__).resolve().parents[2]
LUA = REPO / "app" / "bridges" / "slurm" / "job_submit.lua"
INTERVAL_S = 2.0
WINDOW_NODES = ("n1", "n2")


@dataclass
class Outcome:
    slurm: LocalSlurm
    jobs: list[Submitted]
    window: tuple[float, float]
    before_shadow: dict[str, Ran]
    after_shadow: dict[str, Ran]
    shadow_events: list[dict]
    shadow_out: str
    events: list[dict]
    final: dict[str, Ran]
    state: Path


@pytest.fixture(scope="module")
def service_url() -> Iterator[str]:
    with served() as url:
        yield url


@pytest.fixture(scope="module")
def outcome(tmp_path_factory: pytest.TempPathFactory, service_url: str) -> Iterator[Outcome]:
    root = tmp_path_factory.mktemp("slurm")
    work = root / "work"
    work.mkdir()
    slurm = LocalSlurm(root, NODES, PARTITIONS, job_submit_lua=LUA)
    try:
        slurm.start()
        yield _drive(slurm, root, work, service_url)
    finally:
        slurm.stop()


def _drive(slurm: LocalSlurm, root: Path, work: Path, url: str) -> Outcome:
    jobs = submit_mix(slurm, work)
    slurm.run("scontrol", "create", "reservation", "ReservationName=maint", "starttime=now+20",
              "duration=1", f"nodes={','.join(WINDOW_NODES)}", "flags=maint", "user=root")
    window = _window(slurm)
    before = records(slurm)
    state, shadow_log, log = root / "state.json", root / "shadow.jsonl", root / "events.jsonl"
    out = subprocess.run([sys.executable, "-m", "app.cli", "slurm", "run", "--dry-run", "--cycles", "2",
                          "--interval", "1", "--conf", str(slurm.conf), "--state", str(root / "shadow.json"),
                          "--log", str(shadow_log)], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    after = records(slurm)
    service = over_http(url)
    bridge = Bridge(CommandRunner(str(slurm.conf)), service, BridgeState.load(state), None, False, log,
                    cache=CachedCluster(service, "e2e"))  # the cached path: PUT once, then PATCHes
    ours = {j.job_id for j in jobs if j.kind != "user_held"}
    deadline = time.monotonic() + 240

    def drained(_: object) -> bool:
        now = records(slurm)
        return time.monotonic() > deadline or all(
            now[j].state not in ("PENDING", "RUNNING", "COMPLETING") for j in ours)

    try:
        bridge.loop(INTERVAL_S, done=drained)
    finally:
        service.close()
    return Outcome(slurm, jobs, window, before, after, _lines(shadow_log), out.stdout, _lines(log),
                   records(slurm), state)


def _window(slurm: LocalSlurm) -> tuple[float, float]:
    from app.bridges.slurm.read import windows

    (w,) = windows(slurm.run("scontrol", "show", "-o", "reservation"))
    return w["start"], w["end"]


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _starts(o: Outcome) -> dict[str, set[str]]:
    return {e["job"]: set(e["nodes"]) for e in o.events if e["event"] == "start"}


def _kind(o: Outcome, kind: str) -> list[str]:
    return [j.job_id for j in o.jobs if j.kind == kind]


def test_workload_is_mixed(outcome: Outcome) -> None:
    """The workload has ≥ 40 jobs of every kind the issue asks for."""
    kinds = {j.kind for j in outcome.jobs}
    assert len(outcome.jobs) >= 40
    assert {"serial", "multi", "memory", "gpu", "gres", "wide", "dependent", "user_held", "exclusive",
            "mem_per_cpu"} <= kinds


def test_shadow_mode_changes_nothing(outcome: Outcome) -> None:
    """Shadow mode planned starts but Slurm's records (state, priority, comment, nodes) are as before."""
    assert any(e["event"] == "plan_start" for e in outcome.shadow_events)
    assert not [e for e in outcome.shadow_events if e["event"] == "start"]
    assert "shadow mode" in outcome.shadow_out
    for jid, ran in outcome.before_shadow.items():
        after = outcome.after_shadow[jid]
        assert (after.state, after.priority, after.comment, after.nodes) == \
            (ran.state, ran.priority, ran.comment, ran.nodes), jid


def test_queue_drains(outcome: Outcome) -> None:
    """Every job but the user-held one completed."""
    held = set(_kind(outcome, "user_held"))
    left = {j: r.state for j, r in outcome.final.items() if r.state != "COMPLETED" and j not in held}
    assert not left


def test_every_job_ran_where_the_service_chose(outcome: Outcome) -> None:
    """Slurm's records put each job on exactly the nodes the bridge released it to."""
    starts = _starts(outcome)
    completed = [jid for jid, ran in outcome.final.items() if ran.state == "COMPLETED"]
    assert len(completed) >= 40
    for jid in completed:
        assert set(outcome.final[jid].nodes) == starts[jid], jid


def test_nothing_ran_that_the_service_did_not_start(outcome: Outcome) -> None:
    """No job ran without a start from the bridge; the user-held job never ran."""
    starts = _starts(outcome)
    ran = {j for j, r in outcome.final.items() if r.start == r.start}  # has a start time
    assert ran <= set(starts)
    for jid in _kind(outcome, "user_held"):
        assert outcome.final[jid].state == "PENDING" and jid not in starts


def test_no_node_over_committed(outcome: Outcome) -> None:
    """At every instant, the CPUs, memory and GPUs Slurm gave on each node fit the node."""
    cap = {n.name: (n.cpus, n.mem_mib, n.gpus) for n in NODES}
    for node in cap:
        spans = [(r.start, r.end, *r.nodes[node]) for r in outcome.final.values()
                 if node in r.nodes and r.start == r.start]
        for t in {s[0] for s in spans}:
            live = [s for s in spans if s[0] <= t < s[1]]
            for k in range(3):
                assert sum(s[2 + k] for s in live) <= cap[node][k], (node, t, ("cpus", "mem", "gpus")[k])


def test_gres_jobs_got_their_gpus(outcome: Outcome) -> None:
    """Each `--gres=gpu:k` job ran on a GPU node and Slurm gave it k GPUs there; the six GPUs asked
    of four could not all run at once, so some GPU job waited for another's end."""
    asked = {jid: gpus for jid, gpus in zip(_kind(outcome, "gres"), (1, 1, 2, 2), strict=True)}
    gpu_nodes = {n.name for n in NODES if n.gpus}
    for jid, gpus in asked.items():
        ((node, (_, _, got)),) = outcome.final[jid].nodes.items()
        assert node in gpu_nodes and got == gpus, (jid, node, got)
    spans = [(outcome.final[j].start, outcome.final[j].end) for j in asked]
    assert any(start >= end for start, _ in spans for _, end in spans)


def test_nothing_ran_into_the_maintenance_window(outcome: Outcome) -> None:
    """No job on a reserved node overlaps the maintenance window."""
    ws, we = outcome.window
    for jid, r in outcome.final.items():
        if set(r.nodes) & set(WINDOW_NODES) and r.start == r.start:
            assert r.end <= ws or r.start >= we, jid


def test_service_planned_around_the_window(outcome: Outcome) -> None:
    """No start the service chose on a reserved node would run (by its walltime) into the window."""
    ws, we = outcome.window
    for e in outcome.events:
        if e["event"] == "plan_start" and set(e["nodes"]) & set(WINDOW_NODES):
            assert e["expected_end"] <= ws or e["expected_end"] - 60 >= we, e


def test_exclusive_job_ran_alone(outcome: Outcome) -> None:
    """The exclusive job shared its node with no other job while it ran."""
    (jid,) = _kind(outcome, "exclusive")
    me = outcome.final[jid]
    (node,) = me.nodes
    for other, r in outcome.final.items():
        if other != jid and node in r.nodes and r.start == r.start:
            assert r.end <= me.start or r.start >= me.end, other


def test_reserved_job_not_delayed_by_backfill(outcome: Outcome) -> None:
    """The wide job EASY reserved started no later than its first reservation (plus one cycle)."""
    (wide,) = _kind(outcome, "wide")
    reserved = [e for e in outcome.events if e["event"] == "plan_reservation" and e["job"] == wide]
    assert reserved, "the wide job was never reserved: the workload does not exercise EASY"
    assert outcome.final[wide].start <= reserved[0]["start"] + INTERVAL_S + 5


def test_dependency_waited(outcome: Outcome) -> None:
    """The dependent job started only after the job it depends on ended."""
    (wide,), (dep,) = _kind(outcome, "wide"), _kind(outcome, "dependent")
    assert outcome.final[dep].start >= outcome.final[wide].end


def test_cached_path_was_patched(outcome: Outcome) -> None:
    """The drain PUT the cluster once and then sent PATCHes (the cache followed Slurm)."""
    writes = [e["cache"] for e in outcome.events if e["event"] == "cycle"]
    assert writes[0] == "put" and any(w.startswith("patch") for w in writes)
    assert writes.count("put") == 1


def test_explain_reports_a_started_job(outcome: Outcome) -> None:
    """`hpcsched slurm explain` answers from the bridge's state file."""
    (wide,) = _kind(outcome, "wide")
    out = subprocess.run([sys.executable, "-m", "app.cli", "slurm", "explain", wide, "--state",
                          str(outcome.state)], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "released by hpcsched" in out.stdout

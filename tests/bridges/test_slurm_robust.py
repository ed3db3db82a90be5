"""The bridge keeps deciding whatever one job or node says: recorded Slurm JSON (tests/data/slurm)
edited into the inconsistent readings, stalled releases and lost caches of issue 30."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.bridges.slurm.cached import CachedCluster
from app.bridges.slurm.cycle import Bridge
from app.bridges.slurm.layout import block_fill
from app.bridges.slurm.read import PINNED, Ask, SlurmText
from app.bridges.slurm.runner import RecordedRunner
from app.bridges.slurm.service import InProcess, OverHttp, in_process
from app.bridges.slurm.state import BridgeState, state_path
from app.main import create_app
from app.settings import Settings
from schemas.schedule import ScheduleRequest, ScheduleResponse
from tests.bridges import recorded
from tests.conftest import Client

REPO = Path(__file__).resolve().parents[2]
Jobs = list[dict[str, Any]]


def edited(edit: Callable[[Jobs], None], idle: bool = True) -> SlurmText:
    """The recorded read with its jobs edited in place by `edit`."""
    base = recorded.text(idle=idle)
    doc = json.loads(base.jobs)
    edit(doc["jobs"])
    return SlurmText(base.nodes, json.dumps(doc), base.reservations, base.now)


def job(jobs: Jobs, jid: int) -> dict[str, Any]:
    return next(j for j in jobs if j["job_id"] == jid)


def bridge(tmp_path: Path, text: SlurmText, started: dict[str, float] | None = None, **kw: Any) -> Bridge:
    state = BridgeState(tmp_path / "state.json", dict(started or {}))
    return Bridge(RecordedRunner(text), kw.pop("decide", None) or in_process(), state, None,
                  events=tmp_path / "events.jsonl", **kw)


def released(cmds: list[list[str]]) -> list[str]:
    return [j for c in cmds if c[:2] == ["scontrol", "release"] for j in c[2].split(",")]


def commented(cmds: list[list[str]], jid: str) -> str:
    texts = [c[-1] for c in cmds if c[1] == "update" and jid in c[2].removeprefix("JobId=").split(",")
             and c[-1].startswith("Comment=")]
    return texts[-1] if texts else ""


# --- Slurm's block layout -------------------------------------------------------------------------

def test_block_fill_is_slurms_layout() -> None:
    """As measured on slurmctld 22.05 (cons_tres, block): -n 20 on three idle 8-CPU nodes is
    8+8+4, -n 12 is 8+3+1, and a busy first node takes only what it has free."""
    nodes = ["n1", "n2", "n3"]
    idle = dict.fromkeys(nodes, 8)
    assert block_fill(Ask(20, 1, False), nodes, idle) == {"n1": 8, "n2": 8, "n3": 4}
    assert block_fill(Ask(12, 1, False), nodes, idle) == {"n1": 8, "n2": 3, "n3": 1}
    assert block_fill(Ask(12, 1, False), nodes, {"n1": 5, "n2": 8, "n3": 8}) == {"n1": 5, "n2": 6, "n3": 1}
    assert block_fill(Ask(12, 2, False), nodes, idle) == {"n1": 8, "n2": 2, "n3": 2}
    assert block_fill(Ask(20, 1, False), nodes, {"n1": 8, "n2": 8, "n3": 3}) is None


@given(st.integers(1, 64), st.integers(1, 4), st.lists(st.integers(0, 16), min_size=1, max_size=6))
def test_block_fill_fits_or_refuses(total: int, per_task: int, free_list: list[int]) -> None:
    """A layout gives every node at least one task, never more than it has free, and exactly the
    job's tasks; it is refused only when the free CPUs cannot hold them."""
    nodes = [f"n{i}" for i in range(len(free_list))]
    free = dict(zip(nodes, free_list, strict=True))
    tasks = -(-total // per_task)
    got = block_fill(Ask(total, per_task, False), nodes, free)
    fits = tasks >= len(nodes) and all(f >= per_task for f in free_list) and \
        sum(f // per_task for f in free_list) >= tasks
    assert (got is not None) == fits
    if got is not None:
        assert sum(got.values()) == tasks * per_task
        assert all(per_task <= got[n] <= free[n] and got[n] % per_task == 0 for n in nodes)


def test_a_plain_n_job_is_pinned_with_slurms_layout(tmp_path: Path) -> None:
    """A pending `-n 20 -N 3` job (no --ntasks-per-node) released onto idle nodes is recorded with
    8+8+4 CPUs, and the next read counts exactly that on its nodes (not 7+7+7)."""
    def big(jobs: Jobs) -> None:
        j = job(jobs, 21)
        j.update(cpus=20, tasks=20, node_count=3, max_nodes=3, tasks_per_node=0)
    text = edited(big)
    b = bridge(tmp_path, text)
    rep = b.cycle()
    assert rep.ok and "21" in rep.started
    layout = b.state.layouts["21"]
    assert sorted(layout.values()) == [4, 8, 8]
    after = edited(lambda jobs: (big(jobs), job(jobs, 21).update(
        priority=1, required_nodes=",".join(layout))))
    b.runner = RecordedRunner(after)
    rep2 = b.cycle()
    held = next(r for r in rep2.view.running if r["id"] == "21")  # type: ignore[union-attr]
    assert {a["node"]: a["cpu"] for a in held["allocation"]} == layout
    assert rep2.ok and not rep2.aside


# --- set aside, never a skipped cycle -------------------------------------------------------------

def test_a_node_over_committed_by_slurm_is_drained_and_the_rest_decided(tmp_path: Path) -> None:
    """A running job holding more CPUs than its node has (what a reconfigured node reads like)
    drains that node in the service's view; the cycle still starts jobs elsewhere."""
    def over(jobs: Jobs) -> None:
        alloc = job(jobs, 18)["job_resources"]["allocated_nodes"][0]
        alloc["sockets"] = {str(i): {"cores": {"0": "allocated"}} for i in range(12)}
    b = bridge(tmp_path, edited(over, idle=False))
    rep = b.cycle()
    assert rep.ok and rep.started
    raw = job(json.loads(b.runner.read().jobs)["jobs"], 18)
    node = raw["job_resources"]["allocated_nodes"][0]["nodename"]
    assert any(k == f"node {node}" for k in rep.aside)
    starts = {s.job_id: s.node_ids for s in rep.response.starts}  # type: ignore[union-attr]
    assert not [j for j, nodes in starts.items() if node in nodes]


def test_an_impossible_pending_job_is_set_aside_with_its_reason(tmp_path: Path) -> None:
    """A job asking 7 nodes of a 6-node partition, and one the service refuses (cpu × mem per cpu
    beyond the wire's bound), are set aside with their reasons in their comments; the other
    jobs are decided and started in the same cycle."""
    def bad(jobs: Jobs) -> None:
        job(jobs, 20).update(node_count=7, max_nodes=7, cpus=7)
        job(jobs, 22).update(memory_per_node=None, memory_per_cpu=2**31, cpus=8, node_count=1, max_nodes=1)
    b = bridge(tmp_path, edited(bad))
    rep = b.cycle()
    cmds = b.runner.commands  # type: ignore[attr-defined]
    assert rep.ok and rep.started and not {"20", "22"} & set(released(cmds))
    assert "partition batch has 6" in rep.aside["20"] and "set aside" in commented(cmds, "20")
    assert "refused by the service" in rep.aside["22"] and "set aside" in commented(cmds, "22")
    assert b.state.explain["22"]["reason"] == "set_aside"


class JsonClient(Client):
    """The ASGI app as `OverHttp`'s client: every request declared JSON, as its httpx.Client does."""

    def request(self, method: str, url: str, **kw: Any) -> httpx.Response:
        return super().request(method, url, **kw | {"headers": {"content-type": "application/json",
                                                                **(kw.get("headers") or {})}})


def test_more_refused_jobs_than_a_422_lists_are_all_set_aside_in_one_cycle(tmp_path: Path) -> None:
    """250 jobs the service refuses (one user's array, cpu × mem per cpu beyond the bound), over
    HTTP: a 422 lists 100 problems, so the bridge asks three more times, each time without those
    named, and the other jobs still start in the same cycle (it gave up after three refusals)."""
    def bad(jobs: Jobs) -> None:
        model = job(jobs, 22)
        model.update(memory_per_node=None, memory_per_cpu=2**31, cpus=8, node_count=1, max_nodes=1)
        jobs.extend({**copy.deepcopy(model), "job_id": 5000 + i} for i in range(249))
    service = OverHttp("http://test")
    service.client = JsonClient(create_app(Settings()))  # type: ignore[assignment]
    b = bridge(tmp_path, edited(bad), decide=service)
    rep = b.cycle()
    refused = {"22"} | {str(5000 + i) for i in range(249)}
    assert rep.ok and rep.started and not refused & set(released(b.runner.commands))  # type: ignore[attr-defined]
    assert refused <= set(rep.aside) and all("refused by the service" in rep.aside[j] for j in refused)


# --- reconciling released jobs --------------------------------------------------------------------

def test_a_job_recorded_but_never_released_is_released_again(tmp_path: Path) -> None:
    """The bridge stopped after writing its state and before `scontrol release`: the job is held,
    marked and pinned. The next cycle releases it again and counts it on its nodes."""
    def stuck(jobs: Jobs) -> None:
        job(jobs, 5).update(required_nodes="n6", node_count=1)
    b = bridge(tmp_path, edited(stuck), {"5": recorded.NOW - 5})
    rep = b.cycle()
    cmds = b.runner.commands  # type: ignore[attr-defined]
    assert cmds[0] == ["scontrol", "release", "5"] and rep.ok
    assert any(r["id"] == "5" and r["allocation"][0]["node"] == "n6" for r in rep.view.running)  # type: ignore[union-attr]


def test_an_overdue_release_is_held_again_unpinned_and_decided_again(tmp_path: Path) -> None:
    """A job released 200 s ago that Slurm keeps pending (an association limit) is held, unpinned,
    forgotten as released (its nodes freed), its reason kept; it is decided again at once."""
    def limited(jobs: Jobs) -> None:
        job(jobs, 5).update(required_nodes="n6", priority=1000, state_reason="AssocGrpCpuLimit")
    b = bridge(tmp_path, edited(limited), {"5": recorded.NOW - 200}, start_bound_s=60)
    rep = b.cycle()
    cmds = b.runner.commands  # type: ignore[attr-defined]
    assert cmds[:2] == [["scontrol", "hold", "5"], ["scontrol", "update", "JobId=5", "ReqNodeList="]]
    assert "AssocGrpCpuLimit" in b.state.held_again["5"]
    assert rep.ok and any(p["id"] == "5" for p in rep.view.pending)  # type: ignore[union-attr]
    decided = {s.job_id for s in rep.response.starts} | {p.job_id for p in rep.response.pending}  # type: ignore[union-attr]
    assert "5" in decided
    if "5" not in rep.started:
        assert "held again" in commented(cmds, "5")


def test_a_fresh_release_is_left_to_start(tmp_path: Path) -> None:
    """Within the bound a released, pending job on up nodes is left alone and holds its nodes."""
    def waiting(jobs: Jobs) -> None:
        job(jobs, 5).update(required_nodes="n7", priority=1000, state_reason="Resources")
    b = bridge(tmp_path, edited(waiting), {"5": recorded.NOW - 10}, start_bound_s=60)
    rep = b.cycle()
    assert rep.ok and not [c for c in b.runner.commands if c[1] == "hold"]  # type: ignore[attr-defined]
    assert "5" in b.state.started


def test_a_fresh_release_on_a_drained_node_is_held_again_at_once(tmp_path: Path) -> None:
    """A release whose pinned node is drained (n6 in the recording) is not left to the bound:
    Slurm will not start it there, so it is held, unpinned and decided again in this cycle."""
    def waiting(jobs: Jobs) -> None:
        job(jobs, 5).update(required_nodes="n6", priority=1000, state_reason="ReqNodeNotAvail")
    b = bridge(tmp_path, edited(waiting), {"5": recorded.NOW - 10}, start_bound_s=60)
    rep = b.cycle()
    cmds = b.runner.commands  # type: ignore[attr-defined]
    assert cmds[:2] == [["scontrol", "hold", "5"], ["scontrol", "update", "JobId=5", "ReqNodeList="]]
    assert "n6 went down or drained" in b.state.held_again["5"]
    assert rep.ok and "5" not in b.state.started
    assert not any(s.job_id == "5" and "n6" in s.node_ids for s in rep.response.starts)  # type: ignore[union-attr]


def test_a_pin_never_released_is_unpinned_and_decided_again(tmp_path: Path) -> None:
    """A held, marked job on the bridge's pin that the bridge does not count released (the
    controller went down between its pin and its release) is unpinned and decided again, not
    left held as if its user had asked for the nodes; a user's own node list stays untouched."""
    def left(jobs: Jobs) -> None:
        job(jobs, 5).update(required_nodes="n6", comment=PINNED)
        job(jobs, 6).update(required_nodes="n7", comment="")
    b = bridge(tmp_path, edited(left), {})
    rep = b.cycle()
    cmds = b.runner.commands  # type: ignore[attr-defined]
    assert ["scontrol", "update", "JobId=5", "ReqNodeList="] in cmds
    assert not [c for c in cmds if "JobId=6" in c or c[-1] == "6"]
    assert rep.ok and any(p["id"] == "5" for p in rep.view.pending)  # type: ignore[union-attr]
    assert "6" in rep.view.skipped and "node list" in rep.view.skipped["6"]  # type: ignore[union-attr]


# --- the cycle's steps, stopped where a kill would stop them --------------------------------------

class Killed(BaseException):
    """A test's stand-in for kill -9 at one step of the cycle."""


def test_killed_between_state_and_release_then_restarted(tmp_path: Path) -> None:
    """Stopped after the state file is written and before the release: the restarted bridge
    (state loaded from the file) releases exactly those jobs, once, and starts nothing twice."""
    def kill_at(step: str) -> None:
        if step == "state_saved":
            raise Killed
    text = recorded.text(idle=True)
    first = bridge(tmp_path, text, hook=kill_at)
    with pytest.raises(Killed):
        first.cycle()
    assert not released(first.runner.commands)  # type: ignore[attr-defined]
    kept = BridgeState.load(tmp_path / "state.json")
    assert kept.started
    pins = {c[2].removeprefix("JobId="): c[5].removeprefix("ReqNodeList=")
            for c in first.runner.commands if len(c) > 5 and c[5].startswith("ReqNodeList=")}  # type: ignore[attr-defined]

    def as_left(jobs: Jobs) -> None:
        for jid, nodes in pins.items():
            job(jobs, int(jid))["required_nodes"] = nodes
    again = Bridge(RecordedRunner(edited(as_left)), in_process(), kept, None)
    rep = again.cycle()
    assert sorted(released(again.runner.commands)[:len(pins)]) == sorted(pins)  # type: ignore[attr-defined]
    assert not set(rep.started) & set(pins)


def test_hook_sees_every_step_in_order(tmp_path: Path) -> None:
    steps: list[str] = []
    bridge(tmp_path, recorded.text(idle=True), hook=steps.append).cycle()
    assert steps == ["read", "reconciled", "pinned", "state_saved", "released", "applied"]


# --- the cached path recovers by itself -----------------------------------------------------------

def test_a_lost_cluster_is_put_and_asked_again_in_the_same_cycle(tmp_path: Path) -> None:
    """The service's cache restarted empty: /schedule answers cluster_unknown; the bridge PUTs and
    asks again, and the cycle starts what a fresh bridge would."""
    service = in_process()
    b = bridge(tmp_path, recorded.text(), decide=service, cache=CachedCluster(service, "c1"), dry_run=True)
    assert b.cycle().ok
    service.clusters = InProcess().clusters  # everything the service held is gone
    rep = b.cycle()
    (tmp_path / "x").mkdir()
    fresh = bridge(tmp_path / "x", recorded.text(), dry_run=True).cycle()
    assert rep.ok, rep.errors
    assert [s.job_id for s in rep.response.starts] == [s.job_id for s in fresh.response.starts]  # type: ignore[union-attr]
    events = [json.loads(line)["event"] for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    assert "cluster_lost" in events


def test_an_answer_from_another_version_is_never_applied(tmp_path: Path) -> None:
    """An answer whose cluster_version is not the bridge's (a cache come back behind) is thrown
    away: the bridge PUTs and asks again; what it applies is the fresh answer."""
    service = in_process()
    seen: list[int | None] = []

    def behind_once(req: ScheduleRequest) -> ScheduleResponse:
        resp = service(req)
        if not seen:
            resp.summary.cluster_version = (resp.summary.cluster_version or 0) - 1
            resp.starts = []
        seen.append(resp.summary.cluster_version)
        return resp
    cache = CachedCluster(service, "c2")
    b = bridge(tmp_path, recorded.text(idle=True), decide=behind_once)
    b.cache = cache
    rep = b.cycle()
    assert rep.ok and len(seen) == 2 and seen[1] == cache.version and rep.started
    assert cache.last_write == "put"


# --- explain ---------------------------------------------------------------------------------------

def _explain(jid: str, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "app.cli", "slurm", "explain", jid, *args], cwd=REPO,
                          capture_output=True, text=True, timeout=120, env={**env, "COLUMNS": "200"})


def test_explain_finds_the_state_where_run_writes_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`explain` without --state reads the file `run` wrote (same resolution), shows a released
    job's nodes and CPUs and a reserved job's start and nodes, and says plainly when the file is
    missing."""
    import os

    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "xdg"), "PYTHONPATH": str(REPO)}
    env.pop("HPCSCHED_SLURM_STATE", None)
    missing = _explain("5", env)
    assert missing.returncode == 2 and "no bridge state file at" in missing.stdout
    monkeypatch.setenv("XDG_STATE_HOME", env["XDG_STATE_HOME"])
    monkeypatch.delenv("HPCSCHED_SLURM_STATE", raising=False)
    b = Bridge(RecordedRunner(recorded.text()), in_process(), BridgeState.load(state_path(None)))
    rep = b.cycle()
    assert rep.started and rep.response is not None and rep.response.reservations
    out = _explain(rep.started[0], env)
    assert out.returncode == 0 and "released by hpcsched at" in out.stdout and "CPUs" in out.stdout
    r = rep.response.reservations[0]
    out = _explain(r.job_id, env)
    assert out.returncode == 0 and "reserved start" in out.stdout and ",".join(r.node_ids) in out.stdout


def test_cpus_per_task_is_read_from_cpus_over_tasks() -> None:
    """22.05's `squeue --json` leaves cpus_per_task null: `-N 3 -c 4` (3 tasks, 12 CPUs) is laid out
    in tasks of 4 (4+4+4 on idle nodes), not CPU by CPU."""
    from app.bridges.slurm.read import ask_of

    ask = ask_of({"cpus": 12, "tasks": 3, "cpus_per_task": None, "tasks_per_node": 0}, 3)
    assert ask == Ask(12, 4, False)
    assert block_fill(ask, ["n1", "n2", "n3"], dict.fromkeys(["n1", "n2", "n3"], 8)) == dict.fromkeys(
        ["n1", "n2", "n3"], 4)


def test_a_release_handed_back_to_slurm_is_never_taken_back(tmp_path: Path) -> None:
    """A job the bridge released, then the watchdog handed back (unpinned, released, marked) while
    the bridge was down, is Slurm's: the bridge come back neither holds it again nor sends it."""
    def handed_back(jobs: Jobs) -> None:
        job(jobs, 5).update(required_nodes="", priority=1000, state_reason="Priority",
                            admin_comment="hpcsched:handed-back")
    b = bridge(tmp_path, edited(handed_back), {"5": recorded.NOW - 600}, start_bound_s=60)
    rep = b.cycle()
    cmds = b.runner.commands  # type: ignore[attr-defined]
    assert rep.ok and not [c for c in cmds if c[1] == "hold" or "JobId=5" in c[2:3]]
    assert "5" not in released(cmds) and "5" not in {p["id"] for p in rep.view.pending}  # type: ignore[union-attr]
    assert "handed back" in rep.view.skipped["5"]  # type: ignore[union-attr]

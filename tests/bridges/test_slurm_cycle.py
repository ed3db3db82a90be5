"""Bridge cycles replayed from recorded Slurm state: what is sent, what is refused, what survives."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pytest

from app.bridges.slurm.apply import comment, plan, reserved
from app.bridges.slurm.cycle import Bridge
from app.bridges.slurm.read import SlurmText, read
from app.bridges.slurm.runner import RecordedRunner, SlurmError
from app.bridges.slurm.service import in_process, over_http
from app.bridges.slurm.state import BridgeState
from tests.app_server import served
from tests.bridges import recorded


def _bridge(tmp_path: Path, runner: RecordedRunner | None = None, dry_run: bool = False) -> Bridge:
    runner = runner or RecordedRunner(recorded.text())
    state = BridgeState(tmp_path / "state.json", recorded.started())
    return Bridge(runner, in_process(), state, None, dry_run, tmp_path / "events.jsonl")


def _released(commands: list[list[str]]) -> list[str]:
    return [j for c in commands if c[:2] == ["scontrol", "release"] for j in c[2].split(",")]


def test_a_start_is_pinned_then_released(tmp_path: Path) -> None:
    """Each start pins the job to the chosen nodes (ReqNodeList, NumNodes=k-k, partition), then one
    release lets the cycle's pinned jobs go."""
    b = _bridge(tmp_path)
    rep = b.cycle()
    cmds = b.runner.commands  # type: ignore[attr-defined]
    assert rep.ok and rep.started
    starts = {s.job_id: s for s in rep.response.starts}  # type: ignore[union-attr]
    release_at = next(i for i, c in enumerate(cmds) if c[1] == "release")
    assert sorted(cmds[release_at][2].split(",")) == sorted(rep.started) == sorted(starts)
    for jid in rep.started:
        pin_at = next(i for i, c in enumerate(cmds) if c[2] == f"JobId={jid}" and "ReqNodeList=" in c[4])
        assert pin_at < release_at
        nodes = starts[jid].node_ids
        assert cmds[pin_at][3:6] == [f"Partition={starts[jid].queue}", f"ReqNodeList={','.join(nodes)}",
                                     f"NumNodes={len(nodes)}-{len(nodes)}"]


def test_no_job_is_released_twice(tmp_path: Path) -> None:
    """A second cycle on the same (stale) read releases none of the jobs the first released."""
    b = _bridge(tmp_path)
    first = b.cycle()
    b.runner.commands.clear()  # type: ignore[attr-defined]
    second = b.cycle()
    assert first.started and not set(first.started) & set(_released(b.runner.commands))  # type: ignore[attr-defined]
    assert second.ok


def test_only_marked_held_jobs_are_ever_released(tmp_path: Path) -> None:
    """The user-held job and the one waiting on a dependency are never released, cycle after cycle."""
    b = _bridge(tmp_path)
    for _ in range(3):
        b.cycle()
    assert not {"41", "42"} & set(_released(b.runner.commands))  # type: ignore[attr-defined]


def test_failed_pin_means_no_release(tmp_path: Path) -> None:
    """A job that vanished (its pin fails) is not released nor recorded; the rest is still applied."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    victim = _bridge(tmp_path / "a").cycle().started[0]
    runner = RecordedRunner(recorded.text(), fail=lambda args: args[1:3] == ["update", f"JobId={victim}"])
    b = _bridge(tmp_path / "b", runner)
    rep = b.cycle()
    assert victim not in _released(runner.commands) and victim not in b.state.started
    assert rep.ok and any(victim in e for e in rep.errors)
    assert any(c[-1].startswith("Comment=hpcsched: ") and "JobId=" in c[2] for c in runner.commands)


def test_refused_batch_release_is_retried_job_by_job(tmp_path: Path) -> None:
    """When the batch release fails, each job is released alone; one refused is taken back."""
    first = _bridge(tmp_path, RecordedRunner(recorded.text(idle=True))).cycle().started
    assert len(first) >= 2, "the recorded state must start two jobs for this test"
    victim = first[0]
    runner = RecordedRunner(recorded.text(idle=True),
                            fail=lambda a: a[1] == "release" and ("," in a[2] or a[2] == victim))
    (tmp_path / "b").mkdir()
    b = _bridge(tmp_path / "b", runner)
    rep = b.cycle()
    assert sorted(rep.started) == sorted(set(first) - {victim})
    assert victim not in b.state.started and set(rep.started) <= set(b.state.started)


def test_failed_release_is_taken_back(tmp_path: Path) -> None:
    """A release Slurm refuses is logged and the job is not kept as started."""
    runner = RecordedRunner(recorded.text(), fail=lambda args: args[:2] == ["scontrol", "release"])
    b = _bridge(tmp_path, runner)
    rep = b.cycle()
    assert not rep.started and rep.errors
    assert set(b.state.started) == set(recorded.started())
    events = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    assert any(e["event"] == "command_failed" for e in events)


def test_controller_down_skips_the_cycle(tmp_path: Path) -> None:
    """A read that fails changes nothing and sends nothing; the next cycle reads afresh."""
    class Down(RecordedRunner):
        def read(self) -> SlurmText:
            raise SlurmError("squeue: exit 1: slurm_load_jobs error: Unable to contact slurm controller")

    down = Down(recorded.text())
    b = _bridge(tmp_path, down)
    rep = b.cycle()
    assert not rep.ok and not down.commands and "Unable to contact" in rep.errors[0]
    b.runner = RecordedRunner(recorded.text())
    assert b.cycle().started


def test_service_unreachable_skips_the_cycle(tmp_path: Path) -> None:
    """With the service down (a closed port), the cycle is skipped and nothing is sent to Slurm."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    runner = RecordedRunner(recorded.text())
    service = over_http(f"http://127.0.0.1:{port}", timeout_s=5)
    try:
        b = Bridge(runner, service, BridgeState(None), None, False, None)
        rep = b.cycle()
    finally:
        service.close()
    assert not rep.ok and not runner.commands and "ConnectError" in rep.errors[0]


def test_dry_run_sends_nothing(tmp_path: Path) -> None:
    """Shadow mode decides and logs the plan but runs no Slurm command."""
    b = _bridge(tmp_path, dry_run=True)
    rep = b.cycle()
    events = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    assert rep.response is not None and rep.response.starts
    assert not b.runner.commands and not rep.started  # type: ignore[attr-defined]
    assert any(e["event"] == "plan_start" for e in events) and not any(e["event"] == "start" for e in events)


def test_comments_only_when_changed(tmp_path: Path) -> None:
    """Pending jobs get the reason and estimate as comment, reserved jobs their start and nodes,
    grouped by text, and not rewritten."""
    view = read(recorded.text(), recorded.started())
    resp = _bridge(tmp_path, dry_run=True).cycle().response
    assert resp is not None and resp.reservations
    view.comments = {}
    first = plan(resp, view)
    told = {j: c.text for c in first.comments for j in c.job_ids}
    want = {p.job_id: comment(p) for p in resp.pending} | {r.job_id: reserved(r) for r in resp.reservations}
    assert told == want
    for r in resp.reservations:
        assert "reserved, starts by" in told[r.job_id] and ",".join(r.node_ids) in told[r.job_id]
    assert len(first.comments) == len({c.text for c in first.comments})
    view.comments.update(told)
    assert not plan(resp, view).comments


def test_explain_keeps_priority_factors(tmp_path: Path) -> None:
    """Each pending job's reason, estimate, priority and factors are kept in the state file."""
    b = _bridge(tmp_path)
    rep = b.cycle()
    saved = BridgeState.load(tmp_path / "state.json")
    assert rep.response is not None
    for p in rep.response.pending:
        info = saved.explain[p.job_id]
        assert info["reason"] == p.reason.value and info["estimated_start"] == p.estimated_start
        assert info["factors"] is not None and info["rank"] is not None


def test_over_http_decides_as_in_process(tmp_path: Path) -> None:
    """The same recorded cycle through a real uvicorn gives the same starts as in process."""
    with served() as base:
        service = over_http(base)
        try:
            remote = Bridge(RecordedRunner(recorded.text(idle=True)), service, BridgeState(None),
                            dry_run=True).cycle()
        finally:
            service.close()
    local = Bridge(RecordedRunner(recorded.text(idle=True)), in_process(), BridgeState(None),
                   dry_run=True).cycle()
    assert remote.ok, remote.errors
    assert remote.response is not None and local.response is not None
    assert [(s.job_id, s.node_ids) for s in remote.response.starts] == \
        [(s.job_id, s.node_ids) for s in local.response.starts]


def test_loop_wakes_early_when_slurm_counters_move(tmp_path: Path) -> None:
    """The wait after a cycle ends at the first poll that sees the counters moved since just
    before that cycle (a submit during the cycle included), no sooner than the cycle took; with
    counters that never move it lasts the interval."""
    calls = iter(range(1000))
    for counters, short in ((lambda: "before" if next(calls) % 2 == 0 else "after", True),
                            (lambda: "same", False)):
        runner = RecordedRunner(recorded.text(), counters=counters)
        bridge = Bridge(runner, in_process(), BridgeState(None), dry_run=True, events=tmp_path / "e.jsonl")
        slept: list[float] = []
        t0 = time.monotonic()
        bridge.loop(10.0, cycles=2, sleep=slept.append)
        took = time.monotonic() - t0  # both cycles: the wait is at most the first's length, plus a poll
        if short:
            assert sum(slept) <= took + bridge.poll_s and '"wake"' in (tmp_path / "e.jsonl").read_text()
        else:
            assert sum(slept) == pytest.approx(10.0)


def test_job_counters_from_sdiag() -> None:
    """sdiag's five job counters make the fingerprint; other lines do not move it."""
    from app.bridges.slurm.runner import job_counters

    text = ("Server thread count:  3\nAgent queue size:     0\n\nJobs submitted: 12\nJobs started:   3\n"
            "Jobs completed: 1\nJobs canceled:  0\nJobs failed:    0\n\nJobs pending:   9\n")
    assert job_counters(text) == "12/3/1/0/0"
    assert job_counters(text.replace("Jobs pending:   9", "Jobs pending:   8")) == "12/3/1/0/0"
    assert job_counters(text.replace("Jobs completed: 1", "Jobs completed: 2")) == "12/3/2/0/0"



def test_shadow_mode_logs_both_plans(tmp_path: Path) -> None:
    """Shadow mode's --log keeps, each cycle, the service's plan and Slurm's own (`squeue --start`)
    for every job either plans."""
    from app.bridges.slurm.cli import _show

    b = _bridge(tmp_path, dry_run=True)
    rep = b.cycle()
    assert rep.response is not None
    first = rep.response.starts[0].job_id
    plan = f"{first} 2026-11-26T15:00:00 n[1-2] (Resources)\n99999 N/A (null) (Priority)\n"
    b.runner.plan = plan  # type: ignore[attr-defined]
    _show(b, rep)
    events = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    plans = next(e for e in events if e["event"] == "shadow")["plans"]
    assert plans[first]["slurm"].startswith("2026-11-26T15:00:00 n[1-2]")
    assert "now on" in plans[first]["hpcsched"]
    assert plans["99999"] == {"hpcsched": "-", "slurm": "N/A (null) (Priority)"}
    assert {p.job_id for p in rep.response.pending} <= set(plans)


def test_in_process_service_is_warmed_before_the_first_cycle(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """`hpcsched slurm run` with the service in process readies the decision's compiled loops
    before its first cycle (a queue's first decision once stopped 1-2 s per loop loaded, 38 s on a
    cold cache, while jobs waited: tests/bridges/test_slurm_side_by_side.py); over HTTP it is the
    service's own business."""
    from app.bridges.slurm import cli
    from app.bridges.slurm.service import InProcess

    warmed: list[InProcess] = []
    monkeypatch.setattr(InProcess, "warm", lambda self: warmed.append(self))
    args = (None, False, "easy", None, tmp_path / "s.json", None, RecordedRunner(recorded.text()))
    bridge = cli._bridge(None, *args)
    assert warmed == [bridge.decide]
    cli._bridge("http://127.0.0.1:9", *args).decide.close()  # type: ignore[attr-defined]
    assert len(warmed) == 1

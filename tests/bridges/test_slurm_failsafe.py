"""The fail-safe's pieces without a Slurm: the recipe's settings, the heartbeat, what a hand-back
tells Slurm (on the recorded read), the bridge's beat and the commands' refusals. The recipe and
the hand-back against a real slurmctld are in test_slurm_failsafe_e2e.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from app.bridges.slurm.apply import PINNED, STARTED
from app.bridges.slurm.cli import slurm_cli
from app.bridges.slurm.cycle import Bridge
from app.bridges.slurm.failsafe import (
    HANDED_BACK,
    HANDED_BACK_COMMENT,
    Controlled,
    Heartbeat,
    check,
    hand_back,
    recipe_settings,
    recipe_text,
    render,
    service_probe,
)
from app.bridges.slurm.read import parked, read
from app.bridges.slurm.runner import RecordedRunner
from app.bridges.slurm.service import in_process, over_http
from app.bridges.slurm.state import BridgeState
from tests.app_server import served
from tests.bridges import recorded
from tests.bridges.slurm_cluster import free_ports

SHIPPED = Path(__file__).resolve().parents[2] / "app" / "bridges" / "slurm" / "job_submit.lua"


def _jobs(**changes: dict) -> RecordedRunner:
    """The recorded read with some jobs changed (job id -> fields)."""
    text = recorded.text()
    doc = json.loads(text.jobs)
    for j in doc["jobs"]:
        j.update(changes.get(str(j["job_id"]), {}))
    return RecordedRunner(replace(text, jobs=json.dumps(doc)))


def _pending_held_marked() -> list[str]:
    return sorted(jid for jid, j in recorded.raw_jobs().items()
                  if j["job_state"] == "PENDING" and j["priority"] == 0 and j.get("admin_comment"))


def test_recipe_is_the_shipped_file_with_its_defaults() -> None:
    text = recipe_text()
    assert text == SHIPPED.read_text()
    assert recipe_settings(text) == (Path("/var/lib/hpcsched/heartbeat"), 300)


def test_render_sets_path_and_grace_and_nothing_else() -> None:
    text = recipe_text()
    out = render(text, Path("/run/hpc/beat"), 90)
    assert recipe_settings(out) == (Path("/run/hpc/beat"), 90)
    changed = [(a, b) for a, b in zip(text.splitlines(), out.splitlines(), strict=True) if a != b]
    assert len(changed) == 2
    assert recipe_settings(render(out, None, 90)) == (None, 90)


@pytest.mark.parametrize("path", ['/tmp/a"b', "/tmp/a\\b", "/tmp/a\nb"])
def test_render_refuses_a_path_lua_would_misread(path: str) -> None:
    with pytest.raises(ValueError, match="heartbeat path"):
        render(recipe_text(), Path(path), 60)


def test_render_refuses_another_script() -> None:
    with pytest.raises(ValueError, match="not hpcsched's"):
        render("function slurm_job_submit() end\n", Path("/x"), 60)


def test_heartbeat_age_and_staleness(tmp_path: Path) -> None:
    beat = Heartbeat(tmp_path / "sub" / "beat", grace_s=30)
    assert beat.age() is None and beat.stale()
    beat.beat(now=1000.0)
    assert beat.path.read_text().split()[:2] == ["1000", str(os.getpid())]
    assert beat.writer_alive() is True
    assert beat.age(now=1010.5) == 10.5
    assert not beat.stale(now=1030.9)  # the recipe compares whole seconds: 30 s is within 30 s
    assert beat.stale(now=1031.0)
    assert os.stat(beat.path).st_mode & 0o777 == 0o644  # slurmctld's user must read it
    beat.path.write_text("garbage\n")
    assert beat.age() is None and beat.stale()
    beat.stop()
    beat.stop()  # idempotent
    assert not beat.path.exists()


def test_controlled_jobs_of_the_recorded_read() -> None:
    """Held and marked: released; pinned by the bridge: unpinned; a user's hold, a running job and a
    job the user pinned himself (`-w`): left alone."""
    runner = _jobs(**{"39": {"comment": PINNED, "required_nodes": "n3"},  # pinned, died before release
                      "40": {"priority": 1234, "comment": STARTED, "required_nodes": "n4"},
                      "41": {"required_nodes": "n5"}})
    got = Controlled.of(runner.read().jobs)
    held = _pending_held_marked()
    assert {"39", "40", "41"} <= set(held)
    assert sorted(got.held) == sorted(set(held) - {"40"})
    assert sorted(got.pinned) == ["39", "40"]
    assert sorted(got.marked) == held
    raw = recorded.raw_jobs()
    user_held = [j for j, r in raw.items() if r["job_state"] == "PENDING" and not r.get("admin_comment")]
    assert user_held == ["42"] and "42" not in got.held + got.pinned + got.marked
    running = {j for j, r in raw.items() if r["job_state"] == "RUNNING"}
    assert running and not running & set(got.held + got.pinned + got.marked)


def test_hand_back_unpins_then_releases_then_marks() -> None:
    runner = _jobs(**{"40": {"comment": STARTED, "required_nodes": "n3"}})
    done = hand_back(runner)
    held = _pending_held_marked()
    assert sorted(done.released) == held and sorted(done.marked) == held and done.unpinned == ["40"]
    assert not done.errors
    assert runner.commands == [
        ["scontrol", "update", "JobId=40", "ReqNodeList=", f"Comment={HANDED_BACK_COMMENT}"],
        ["scontrol", "release", ",".join(done.released)],
        ["scontrol", "update", f"JobId={','.join(done.marked)}", f"AdminComment={HANDED_BACK}",
         f"Comment={HANDED_BACK_COMMENT}"]]


def test_a_refused_batch_is_retried_job_by_job() -> None:
    """A job that ended between the read and the release is refused alone; the rest are released."""
    runner = _jobs()
    gone = _pending_held_marked()[3]
    runner.fail = lambda args: args[1] == "release" and gone in args[2].split(",")
    done = hand_back(runner)
    assert sorted(done.released) == sorted(set(_pending_held_marked()) - {gone})
    assert len(done.errors) == 2  # the batch, then the job alone
    singles = [c[2] for c in runner.commands if c[1] == "release" and "," not in c[2]]
    assert sorted(singles) == _pending_held_marked()


def test_hand_back_stops_when_the_bridge_beats_again() -> None:
    runner = _jobs()
    done = hand_back(runner, proceed=lambda: False)
    assert runner.commands == [] and not done.released
    assert done.errors and "completed a cycle again" in done.errors[0]


def test_watchdog_does_nothing_while_the_heartbeat_is_fresh(tmp_path: Path) -> None:
    runner = _jobs()
    beat = Heartbeat(tmp_path / "beat", grace_s=60)
    beat.beat(now=time.time() - 59)
    seen = check(runner, beat)
    assert seen.handed is None and runner.commands == []
    assert "alive" in seen.line()
    beat.beat(now=time.time() - 62)
    seen = check(runner, beat)
    assert seen.handed is not None and sorted(seen.handed.released) == _pending_held_marked()
    assert "handed back" in seen.line()


def test_the_bridge_beats_after_each_completed_cycle_only(tmp_path: Path) -> None:
    beat = Heartbeat(tmp_path / "beat", grace_s=60)
    runner = RecordedRunner(recorded.text())
    bridge = Bridge(runner, in_process(), BridgeState(None, recorded.started()), heartbeat=beat)
    assert bridge.cycle().ok and beat.age() is not None and beat.age() < 5
    beat.stop()
    broken = RecordedRunner(replace(recorded.text(), jobs="{not json"))
    assert not Bridge(broken, in_process(), BridgeState(None), heartbeat=beat).cycle().ok
    assert not beat.path.exists()
    shadow = Bridge(runner, in_process(), BridgeState(None), dry_run=True, heartbeat=beat)
    assert shadow.cycle().ok and not beat.path.exists()


def test_a_heartbeat_it_cannot_write_is_a_cycle_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    beat = Heartbeat(tmp_path / "file" / "beat", grace_s=60)
    bridge = Bridge(RecordedRunner(recorded.text()), in_process(), BridgeState(None, recorded.started()),
                    heartbeat=beat)
    rep = bridge.cycle()
    assert rep.ok and any("heartbeat" in e for e in rep.errors)


def test_recipe_command_prints_and_installs(tmp_path: Path) -> None:
    cli = CliRunner()
    out = cli.invoke(slurm_cli, ["recipe", "--heartbeat", "/srv/beat", "--grace", "120"])
    assert out.exit_code == 0 and recipe_settings(out.output) == (Path("/srv/beat"), 120)
    target = tmp_path / "job_submit.lua"
    out = cli.invoke(slurm_cli, ["recipe", "--no-failsafe", "--install", str(target)])
    assert out.exit_code == 0 and recipe_settings(target.read_text()) == (None, 300)
    out = cli.invoke(slurm_cli, ["recipe", "--heartbeat", '/a"b'])
    assert out.exit_code != 0


def test_handback_refuses_while_the_bridge_cycles(tmp_path: Path) -> None:
    """A rollback while the bridge runs (its heartbeat fresh, its process alive) would be undone by
    its next cycle: refused (exit 2), the heartbeat kept; the watchdog, the same, does nothing.
    Neither touches Slurm (none is set up)."""
    beat = Heartbeat(tmp_path / "beat")
    beat.beat()
    cli = CliRunner()
    out = cli.invoke(slurm_cli, ["handback", "--heartbeat", str(beat.path)])
    assert out.exit_code == 2 and "stop it first" in out.output and beat.path.exists()
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True).stdout.strip()
    beat.path.write_text(beat.path.read_text().replace(f" {os.getpid()} ", f" {gone} "))
    assert beat.writer_alive() is False  # a stopped bridge: the rollback proceeds (tested on Slurm)
    installed = tmp_path / "job_submit.lua"
    installed.write_text(render(recipe_text(), beat.path, 60))
    out = cli.invoke(slurm_cli, ["watchdog", "--recipe", str(installed)])
    assert out.exit_code == 0 and "bridge alive" in out.output
    installed.write_text(render(recipe_text(), None, 60))
    out = cli.invoke(slurm_cli, ["watchdog", "--recipe", str(installed)])
    assert out.exit_code != 0 and "fail-safe is off" in out.output


def test_an_idle_cycle_beats_only_while_the_service_answers(tmp_path: Path) -> None:
    """A cycle with no pending job asks the service nothing: it beats only if the service answers
    its probe (a dead service on a handed-back queue must not pass for alive); a cycle the
    service decided beats without asking."""
    beat = Heartbeat(tmp_path / "beat", grace_s=60, probe=lambda: False)
    errors: list[str] = []
    beat.completed(errors, decided=False)
    assert not beat.path.exists() and "does not answer" in errors[0]
    beat.completed(errors, decided=True)
    assert beat.path.exists() and len(errors) == 1


def test_the_probe_asks_a_real_service_over_http() -> None:
    with served() as url:
        service = over_http(url)
        assert service_probe(service)()
        service.close()
    (port,) = free_ports(1)
    dead = over_http(f"http://127.0.0.1:{port}")
    assert not service_probe(dead, timeout_s=1)()
    dead.close()
    assert service_probe(in_process())()


PARK_MARK = "hpcsched:held partition=batch,short park=hold"


def _parked_read() -> RecordedRunner:
    """The recorded read as the recipe's PARK would have left it: jobs 21 and 22 parked (pending in
    the down partition `hold`, with Slurm's priority), every node also in `hold`."""
    runner = _jobs(**{jid: {"priority": prio, "partition": "hold", "admin_comment": PARK_MARK,
                            "state_reason": "PartitionDown"} for jid, prio in (("21", 1500), ("22", 1375))})
    doc = json.loads(runner.text.nodes)
    for n in doc["nodes"]:
        n["partitions"] = [*n["partitions"], "hold"]
    runner.text = replace(runner.text, nodes=json.dumps(doc))
    return runner


def test_render_sets_the_parking_partition() -> None:
    out = render(recipe_text(), Path("/b"), 60, park="hpc_park")
    assert 'local PARK = "hpc_park"' in out and recipe_settings(out) == (Path("/b"), 60)
    assert 'local PARK = ""' in render(recipe_text(), Path("/b"), 60)
    for bad in ("a b", 'x"', "a;b"):
        with pytest.raises(ValueError, match="parking partition"):
            render(recipe_text(), Path("/b"), 60, park=bad)


def test_a_parked_job_is_decided_in_its_own_partition_with_slurms_priority() -> None:
    view = read(_parked_read().read(), recorded.started())
    pending = {p["id"]: p for p in view.pending}
    assert pending["21"]["queue"] == "batch" and pending["21"]["priority"] == 1500.0
    assert pending["22"]["priority"] == 1375.0
    held = {p["id"]: p for p in read(recorded.text(), recorded.started()).pending}
    assert held["23"]["priority"] == pending["23"]["priority"] == 0.0  # a held job: its nice only
    assert all("hold" not in n["queues"] for n in view.nodes) and "hold" not in view.partitions


def test_a_job_moved_out_of_the_parking_partition_is_not_parked() -> None:
    """Moved by its pin or by a hand-back: released, so the bridge no longer decides it."""
    job = {"partition": "batch", "admin_comment": PARK_MARK, "priority": 1500}
    assert parked(job) == ""
    assert parked({**job, "partition": "hold"}) == "batch,short"
    assert parked({**job, "partition": "hold", "admin_comment": "hpcsched:held"}) == ""


def test_hand_back_moves_parked_jobs_home() -> None:
    runner = _parked_read()
    done = hand_back(runner)
    assert sorted(done.unparked) == ["21", "22"] and "21" not in done.released
    unpark = ["scontrol", "update", "JobId=21,22", "Partition=batch,short"]
    assert unpark in runner.commands
    kinds = [c[1] if c[1] == "release" else c[3].split("=")[0] for c in runner.commands]
    assert kinds == ["release", "Partition", "AdminComment"]  # released, moved home, then re-marked
    assert {"21", "22"} <= set(done.marked)


def test_a_cached_cluster_id_the_service_would_refuse_is_refused_at_once() -> None:
    """`--cached` takes a cluster id by the service's name rule: a bad one stops the command before
    any cycle, rather than every cycle failing on the service's 422."""
    from typer.testing import CliRunner

    from app.cli import cli

    r = CliRunner().invoke(cli, ["slurm", "run", "--cached", "dev:c1", "--cycles", "1"])
    assert r.exit_code == 2 and "cluster id" in r.output

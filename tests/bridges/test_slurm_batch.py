"""A cycle's commands in few round trips: which go to one scontrol process, how its errors are
tied back to their jobs, and that a failed pin is never released."""

from __future__ import annotations

from pathlib import Path

from app.bridges.slurm.apply import STARTED, Start
from app.bridges.slurm.cycle import Bridge
from app.bridges.slurm.runner import RecordedRunner, command_jobs, failed_jobs, stdin_line
from app.bridges.slurm.service import in_process
from app.bridges.slurm.state import BridgeState
from tests.bridges import recorded


def test_pins_and_releases_are_stdin_lines_and_blank_comments_are_not() -> None:
    """A pin, a release and an unpin fit scontrol's input; a comment with blanks (kept quoted by
    scontrol) and a program other than scontrol do not."""
    pin = Start("7", ("n1", "n2"), "batch").pin()
    assert stdin_line(pin) == ("update JobId=7 Partition=batch ReqNodeList=n1,n2 NumNodes=2-2 "
                               "Comment=hpcsched:pinned")
    assert stdin_line(["scontrol", "release", "7,8"]) == "release 7,8"
    assert stdin_line(["scontrol", "update", "JobId=7", "ReqNodeList="]) == "update JobId=7 ReqNodeList="
    assert stdin_line(["scontrol", "update", "JobId=7", "Comment=hpcsched: a b"]) is None
    assert stdin_line(["scontrol", "update", "JobId=7", 'Comment="x"']) is None
    assert stdin_line(["squeue", "-h"]) is None


def test_scontrol_errors_are_tied_to_their_jobs() -> None:
    """scontrol's '... for job N' lines name the failed jobs; other lines are kept as unnamed."""
    named, unnamed = failed_jobs("Invalid node name specified for job 5003\n"
                                 "Invalid job id specified for job 12_3\nslurm_update error: Busy\n")
    assert named == {"5003": "Invalid node name specified", "12_3": "Invalid job id specified"}
    assert unnamed == ["slurm_update error: Busy"]
    assert command_jobs(["scontrol", "update", "JobId=4,5", "Partition=a"]) == ["4", "5"]
    assert command_jobs(["scontrol", "release", "4,5"]) == ["4", "5"]


def test_a_cycle_pins_in_one_batch_and_never_releases_a_failed_pin(tmp_path: Path) -> None:
    """The pins go in one `run_all`; the job whose pin fails is neither released nor recorded
    as started, the others are, and the started ones get one shared comment."""
    probe = RecordedRunner(recorded.text(idle=True))
    starts = Bridge(probe, in_process(), BridgeState(None)).cycle().started
    assert len(starts) >= 2
    victim = starts[0]
    runner = RecordedRunner(recorded.text(idle=True),
                            fail=lambda a: a[:3] == ["scontrol", "update", f"JobId={victim}"] and
                            any(x.startswith("ReqNodeList=") for x in a))
    bridge = Bridge(runner, in_process(), BridgeState(tmp_path / "s.json"))
    rep = bridge.cycle()
    released = [j for c in runner.commands if c[:2] == ["scontrol", "release"] for j in c[2].split(",")]
    assert sorted(released) == sorted(rep.started) == sorted(set(starts) - {victim})
    assert victim not in bridge.state.started and any(victim in e for e in rep.errors)
    commented = [j for c in runner.commands if c[-1] == f"Comment={STARTED}" for j in c[2][6:].split(",")]
    assert sorted(commented) == sorted(rep.started)
    assert runner.batches == 2  # the pins, then the moves and comments; the release is its own command

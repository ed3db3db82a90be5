"""Start latency against a real Slurm (slurmctld + a slurmd per node, started here): the compact
read (squeue's text, scontrol's job and node lines) gives the JSON read's wire state on the mixed
workload, a drained node in two partitions included, a cycle's pins go to one scontrol
process with each failure tied to its job, and a job submitted to an idle cluster is started by
the bridge's event-driven loop within about two seconds (a behaviour check, not a benchmark:
bench/bench_bridge.py --latency measures)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from app.bridges.slurm.apply import Start
from app.bridges.slurm.cycle import Bridge
from app.bridges.slurm.read import SlurmText, read
from app.bridges.slurm.runner import CommandRunner
from app.bridges.slurm.service import in_process
from app.bridges.slurm.state import BridgeState
from tests.bridges.slurm_cluster import NEEDS_SLURM, LocalSlurm
from tests.bridges.workload import NODES, PARTITIONS, records, submit_mix

pytestmark = NEEDS_SLURM
LUA = Path(__file__).resolve().parents[2] / "app" / "bridges" / "slurm" / "job_submit.lua"


@pytest.fixture(scope="module")
def slurm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalSlurm]:
    s = LocalSlurm(tmp_path_factory.mktemp("slurm"), NODES, PARTITIONS, job_submit_lua=LUA)
    try:
        s.start()
        yield s
    finally:
        s.stop()


def _view(text: SlurmText, started: dict[str, float], now: float) -> dict[str, Any]:
    v = asdict(read(SlurmText(text.nodes, text.jobs, text.reservations, now), started))
    for n in v["nodes"]:
        n.pop("cpu_load")  # moves between two reads
    for key in ("running", "pending"):
        v[key].sort(key=lambda r: r["id"])  # squeue sorts its text, the JSON is in Slurm's table order
    return v


def test_idle_cluster_starts_a_submitted_job_within_two_seconds(slurm: LocalSlurm, tmp_path: Path) -> None:
    """With the bridge looping (10 s ceiling), a job submitted to an idle cluster runs, by
    Slurm's own records, at most ~2 s after its submission: the loop woke on the submit."""
    bridge = Bridge(CommandRunner(str(slurm.conf)), in_process(), BridgeState(tmp_path / "s.json"))
    bridge.cycle()  # the service warm (its first decision compiles) before the clock matters
    stop = threading.Event()
    loop = threading.Thread(target=bridge.loop, args=(10.0,),
                            kwargs={"done": lambda rep: stop.is_set(), "sleep": stop.wait})
    loop.start()
    try:
        time.sleep(1.0)
        jid = slurm.run("sbatch", "--parsable", f"--chdir={slurm.root}", "-o", "/dev/null", "-t", "1",
                        "-n", "2", "--mem=500", "--wrap", "sleep 1").strip()
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and records(slurm)[jid].state == "PENDING":
            time.sleep(0.2)
    finally:
        stop.set()
        loop.join(timeout=60)
    assert records(slurm)[jid].state != "PENDING", "not started within 15 s"
    line = slurm.run("scontrol", "show", "job", "-o", jid)
    submit, start = (_stamp(line, key) for key in ("SubmitTime", "StartTime"))
    assert start - submit <= 2, f"started {start - submit:.0f} s after its submission"


def _stamp(line: str, key: str) -> float:
    from datetime import datetime

    value = line.split(f" {key}=", 1)[1].split(" ", 1)[0]
    return datetime.strptime(value, "%Y-%m-%dT%H:%M:%S").timestamp()


def test_compact_read_gives_the_json_reads_wire_state(slurm: LocalSlurm, tmp_path: Path) -> None:
    """On the mixed workload (arrays split by a pin, dependencies, --mem-per-cpu, GRES, exclusive,
    a user hold), with jobs running and released, both reads give the same wire view."""
    submit_mix(slurm, tmp_path)
    slurm.run("sbatch", "--parsable", "-o", "/dev/null", f"--chdir={tmp_path}", "-a", "0-5", "-n", "1",
              "--mem-per-cpu=200", "--wrap", "sleep 30")
    slurm.run("sbatch", "--parsable", "-o", "/dev/null", f"--chdir={tmp_path}", "-n", "1", "-x", "n3",
              "--mem=100", "--wrap", "sleep 30")
    fast, by_json = CommandRunner(str(slurm.conf)), CommandRunner(str(slurm.conf), compact=False)
    bridge = Bridge(fast, in_process(), BridgeState(tmp_path / "s.json"))
    assert bridge.cycle().started
    slurm.run("scontrol", "update", "NodeName=n6", "State=DRAIN", "Reason=drained State=IDLE by a test")
    try:
        time.sleep(1.0)
        for _ in range(3):  # a read can straddle a job's start or end: the two must agree on one of three
            a, b = fast.read(), by_json.read()
            va, vb = _view(a, bridge.state.started, b.now), _view(b, bridge.state.started, b.now)
            if va == vb:
                break
    finally:
        slurm.run("scontrol", "update", "NodeName=n6", "State=RESUME")
    assert va == vb
    assert {n["id"]: n["state"] for n in va["nodes"]}["n6"] == "drain"  # scontrol's nodes as sinfo's JSON
    assert va["running"] and va["pending"] and va["skipped"]
    assert any("excluded nodes" in why for why in va["skipped"].values())
    assert any(p.get("mem_mib_per_cpu") for p in va["pending"])


def test_pins_in_one_scontrol_process_tie_each_failure_to_its_job(slurm: LocalSlurm, tmp_path: Path) -> None:
    """Forty pins fed to one scontrol: the one naming a node Slurm does not have fails alone, the
    others took (their ReqNodeList is set), and nothing is released."""
    ids = [slurm.run("sbatch", "--parsable", "-o", "/dev/null", f"--chdir={tmp_path}", "-n", "1",
                     "--mem=100", "--begin=now+1hour", "--wrap", "true").strip() for _ in range(40)]
    pins = [Start(j, (f"n{1 + i % 6}",), "batch").pin() for i, j in enumerate(ids)]
    pins[7] = Start(ids[7], ("nosuch",), "batch").pin()
    failed = CommandRunner(str(slurm.conf)).run_all(pins)
    assert list(failed) == [7] and ids[7] in failed[7]
    shown = {line.split()[0]: line.split()[1:] for line in
             slurm.run("squeue", "-h", "-j", ",".join(ids), "-o", "%i %n %t").splitlines()}
    assert all(shown[j] == [f"n{1 + i % 6}", "PD"] for i, j in enumerate(ids) if i != 7)
    assert shown[ids[7]] == ["PD"]
    slurm.run("scancel", *ids)

"""A slice of a real trace replayed, time-compressed, into Slurm alone and into a bridge-run Slurm,
one after the other (tests/bridges/test_slurm_side_by_side.py, bench/bench_side_by_side.py).

The slice is turned into ordinary submissions: `sbatch -n P` with no layout hint for most jobs,
`-N k -n P` for some, every job with `--mem` or `--mem-per-cpu`, two `--exclusive`, one array
(`--array=0-3`, which the bridge splits into tasks), one `--dependency=afterok:`; a maintenance
reservation (`Flags=maint`) takes one node out for a minute. Each job's script appends its job id
to a file before it sleeps its compressed runtime, so a job that ran twice is seen.

Both sides get the same slice, compression, node layout and SchedulerParameters. Slurm alone
schedules with its own sched/backfill (priority/basic: first come, first served, then backfill);
the bridge side runs the job_submit.lua recipe (fail-safe on) and `hpcsched slurm run` as a
subprocess, with the service in process (`easy`). Everything measured comes from Slurm's records
(`scontrol show job`: whole seconds).
"""

from __future__ import annotations

import json
import math
import re
import statistics
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from app.bridges.slurm.read import windows
from app.sim.swf import read_swf
from tests.bridges.failsafe_site import LUA, REPO, Site, running, until
from tests.bridges.slurm_cluster import LocalSlurm, NodeSpec, PartitionSpec
from tests.bridges.workload import Ran, records

TRACE = REPO / "tests" / "data" / "SDSC-SP2-1998-4.2-cln.first1500.swf"
NODES = [NodeSpec(f"n{i}", cpus=8, mem_mib=16_000) for i in range(1, 9)]
PARTITIONS = [PartitionSpec("batch", tuple(n.name for n in NODES), default=True)]
MAINT_NODE = "n8"
# Slurm's backfill every second (its least; 30 s by default, far too slow at this compression) and
# a job's start inside its submit or release RPC: the same on both sides
SCHED = "bf_interval=1,batch_sched_delay=0"
TAU_S = 10.0  # bounded slowdown's threshold, in trace seconds
DEPENDS_BACK = 3  # the dependent job waits on the job this many places before it in the slice


@dataclass(frozen=True)
class Slice:
    """Which jobs of the trace, and how time is compressed."""

    first: int = 440      # index among the trace's jobs with a known runtime and size
    count: int = 80
    factor: float = 1200  # trace seconds per test second: one trace-hour is 3 s
    max_run_s: int = 20   # compressed runtimes longer than this are cut (the test stays short)
    maint_at_s: float = 70  # the maintenance window opens this long after the first submit (1 min)

    @property
    def tau_s(self) -> float:
        """TAU_S compressed, but never under Slurm's one-second resolution."""
        return max(1.0, TAU_S / self.factor)


@dataclass(frozen=True)
class Job:
    index: int
    at_s: float  # seconds after the first submit
    tasks: int
    sleep_s: int
    args: tuple[str, ...]  # the sbatch options besides the script
    kind: str


def jobs_of(s: Slice) -> list[Job]:
    """The slice as submissions: half the trace's processors as tasks (128 -> 64 CPUs), runtimes
    compressed, each job given a shape by its place in the slice."""
    trace = [j for j in read_swf(TRACE).jobs if j.run > 0 and j.procs > 0][s.first:s.first + s.count]
    t0 = trace[0].submit
    out = []
    special = _special(trace)
    for i, j in enumerate(trace):
        tasks = min(56, math.ceil(j.procs / 2))
        sleep = max(1, min(s.max_run_s, round(j.run / s.factor)))
        kind = special.get(i, "plain")
        out.append(Job(i, (j.submit - t0) / s.factor, tasks, sleep, _shape(i, tasks, kind), kind))
    return out


def _special(trace: list[Any]) -> dict[int, str]:
    """The slice's place of each special job (small ones, past the first ten): two exclusive, one
    array, one dependent on the job DEPENDS_BACK places before it (never the array)."""
    small = [i for i, j in enumerate(trace) if j.procs <= 8 and i >= 10]
    out = {small[0]: "exclusive", small[len(small) // 2]: "exclusive", small[2]: "array"}
    dep = next(i for i in small[len(small) // 3:] if i not in out and out.get(i - DEPENDS_BACK) != "array")
    return {**out, dep: "dependent"}


def _shape(i: int, tasks: int, kind: str) -> tuple[str, ...]:
    """Mostly `-n P` alone; every fifth job also `-N k`; memory per node or per CPU alternately;
    every ninth job memory-heavy (12 GB of a node's 16)."""
    args: tuple[str, ...] = ("-n", str(tasks))
    if i % 5 == 0:
        args = ("-N", str(math.ceil(tasks / 8)), *args)
    if i % 9 == 4 and tasks <= 8:
        args += ("--mem=12000",)
    elif i % 2:
        args += (f"--mem={1000 + 500 * min(tasks, 8)}",)
    else:
        args += (f"--mem-per-cpu={600 + 100 * (i % 7)}",)
    if kind == "exclusive":
        args += ("--exclusive",)
    if kind == "array":
        args += ("--array=0-3",)
    return args


@dataclass(frozen=True)
class Record:
    """One job of Slurm's records, named as the bridge names it (`ARRAY_TASK` for a task)."""

    name: str
    job_id: str
    submit: float
    restarts: int
    ran: Ran


@dataclass
class Side:
    label: str
    bridged: bool
    jobs: list[Job]
    names: dict[int, list[str]] = field(default_factory=dict)  # slice index -> the jobs it became
    warm: str = ""
    window: tuple[float, float] = (0.0, 0.0)
    records: dict[str, Record] = field(default_factory=dict)
    ran: list[str] = field(default_factory=list)  # the job ids the scripts wrote, one per run
    events: list[dict[str, Any]] = field(default_factory=list)
    drained: bool = False
    took_s: float = 0.0

    def trace_records(self) -> list[Record]:
        return [self.records[n] for names in self.names.values() for n in names]

    def named(self, kind: str) -> list[str]:
        return [n for j in self.jobs if j.kind == kind for n in self.names[j.index]]


def run_side(label: str, bridged: bool, s: Slice, root: Path, drain_s: float = 240) -> Side:
    """Start a cluster, replay the slice into it in real time, wait until it drained, read Slurm's
    records; the cluster (and the bridge) stopped at the end."""
    root.mkdir(parents=True, exist_ok=True)
    side = Side(label, bridged, jobs_of(s))
    beat = root / "heartbeat"
    slurm = LocalSlurm(root, NODES, PARTITIONS, job_submit_lua=LUA if bridged else None,
                       heartbeat=beat, sched_params=SCHED)
    t0 = time.monotonic()
    with running(slurm, root) as site:
        if bridged:
            _start_bridge(site, beat)
        side.warm = _warm(site)
        _replay(site, side, s)
        side.drained = _drain(slurm, drain_s)
        _read(site, side)
    side.took_s = time.monotonic() - t0
    return side


def _start_bridge(site: Site, beat: Path) -> None:
    """`hpcsched slurm run` as an administrator runs it, until its first completed cycle."""
    site.spawn("bridge", sys.executable, "-m", "app.cli", "slurm", "run", "--conf", str(site.slurm.conf),
               "--state", str(site.root / "state.json"), "--log", str(site.root / "events.jsonl"),
               "--heartbeat", str(beat), "--grace", "300")
    until(beat.exists, 120, "the bridge's first cycle")


def _warm(site: Site) -> str:
    """One small job run to its end first: the bridge's service has decided once (its compiled
    loops loaded) before the clock matters; Slurm alone gets the same job."""
    jid = _sbatch(site, ("-n", "1", "--mem=100"), 1)
    until(lambda: not site.slurm.run("squeue", "-h", "-o", "%i").strip(), 120, "the warm-up job")
    return jid


def _sbatch(site: Site, args: tuple[str, ...], sleep_s: int) -> str:
    out = site.slurm.run("sbatch", "--parsable", f"--chdir={site.root}", "-o", "/dev/null", "-t", "1",
                         *args, "--wrap", f"echo $SLURM_JOB_ID >> {site.root / 'ran'}; sleep {sleep_s}")
    return out.strip().split(";")[0]


def _replay(site: Site, side: Side, s: Slice) -> None:
    """Each job submitted at its compressed trace time; the maintenance reservation made at the first."""
    t0 = time.monotonic()
    for j in side.jobs:
        time.sleep(max(0.0, t0 + j.at_s - time.monotonic()))
        args = j.args
        if j.kind == "dependent":
            (on,) = side.names[j.index - DEPENDS_BACK]
            args += (f"--dependency=afterok:{on}",)
        jid = _sbatch(site, args, j.sleep_s)
        side.names[j.index] = [f"{jid}_{t}" for t in range(4)] if j.kind == "array" else [jid]
        if j.index == 0:
            site.slurm.run("scontrol", "create", "reservation", "ReservationName=maint",
                           f"starttime=now+{int(s.maint_at_s)}", "duration=1", f"nodes={MAINT_NODE}",
                           "flags=maint", "user=root")
            (w,) = windows(site.slurm.run("scontrol", "show", "-o", "reservation"))
            side.window = (w["start"], w["end"])


def _drain(slurm: LocalSlurm, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not slurm.run("squeue", "-h", "-o", "%i").strip():
            return True
        time.sleep(1.0)
    return False


def _read(site: Site, side: Side) -> None:
    ran = records(site.slurm)
    for line in site.slurm.run("scontrol", "show", "job", "-o").splitlines():
        kv = dict(re.findall(r"(\w+)=(\S*)", line))
        if "JobId" not in kv:
            continue
        task = kv.get("ArrayTaskId")
        name = f"{kv['ArrayJobId']}_{task}" if task not in (None, "", "N/A") else kv["JobId"]
        side.records[name] = Record(name, kv["JobId"], _stamp(kv["SubmitTime"]), int(kv.get("Restarts", "0")),
                                    ran[kv["JobId"]])
    path = site.root / "ran"
    side.ran = path.read_text().split() if path.exists() else []
    log = site.root / "events.jsonl"
    side.events = [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []


def _stamp(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S").timestamp()


# ---- the invariants, from Slurm's records (each returns what breaks it: empty when it holds) ----

def not_once(side: Side) -> list[str]:
    """Jobs that did not complete, ran other than exactly once, or were requeued."""
    bad = [f"{r.name}: {r.ran.state}" for r in side.records.values() if r.ran.state != "COMPLETED"]
    bad += [f"{r.name}: restarted {r.restarts}" for r in side.records.values() if r.restarts]
    runs = sorted(side.ran)
    want = sorted(r.job_id for r in side.records.values())
    if runs != want:
        bad.append(f"runs written {len(runs)} ({len(set(runs))} distinct), jobs {len(want)}")
    missing = [n for names in side.names.values() for n in names if n not in side.records]
    return bad + [f"{n}: no record" for n in missing]


def over_committed(side: Side) -> list[str]:
    """(node, instant, resource) where the jobs Slurm ran there at once asked more than it has."""
    cap = {n.name: (n.cpus, n.mem_mib) for n in NODES}
    bad = []
    for node, (cpus, mem) in cap.items():
        spans = [(r.ran.start, r.ran.end, *r.ran.nodes[node][:2]) for r in side.records.values()
                 if node in r.ran.nodes and r.ran.start == r.ran.start]
        for t in {sp[0] for sp in spans}:
            live = [sp for sp in spans if sp[0] <= t < sp[1]]
            if sum(sp[2] for sp in live) > cpus:
                bad.append(f"{node} at {t:.0f}: cpus")
            if sum(sp[3] for sp in live) > mem:
                bad.append(f"{node} at {t:.0f}: mem")
    return bad


def not_where_chosen(side: Side) -> list[str]:
    """Bridge side: jobs that ran without the bridge's release, or not on the nodes it pinned."""
    starts = {e["job"]: set(e["nodes"]) for e in side.events if e["event"] == "start"}
    bad = []
    for r in side.records.values():
        if r.name not in starts:
            bad.append(f"{r.name}: ran, never released by the bridge")
        elif set(r.ran.nodes) != starts[r.name]:
            bad.append(f"{r.name}: ran on {sorted(r.ran.nodes)}, released to {sorted(starts[r.name])}")
    return bad


def into_window(side: Side) -> list[str]:
    """Jobs that ran on the maintenance node while its window was open."""
    ws, we = side.window
    return [r.name for r in side.records.values()
            if MAINT_NODE in r.ran.nodes and r.ran.start < we and r.ran.end > ws]


def not_alone(side: Side) -> list[str]:
    """Jobs that shared a node with an exclusive job while it ran."""
    bad = []
    for name in side.named("exclusive"):
        me = side.records[name].ran
        bad += [f"{r.name} beside {name}" for r in side.records.values() if r.name != name
                and set(r.ran.nodes) & set(me.nodes) and r.ran.start < me.end and r.ran.end > me.start]
    return bad


def dependency_broken(side: Side) -> list[str]:
    """The dependent job, unless it started after the job it waits on completed."""
    (dep,) = side.named("dependent")
    first = next(j.index for j in side.jobs if j.kind == "dependent") - DEPENDS_BACK
    (on,) = side.names[first]
    d, o = side.records[dep].ran, side.records[on].ran
    ok = o.state == "COMPLETED" and d.start >= o.end
    return [] if ok else [f"{dep} started {d.start}, {on} ended {o.end} ({o.state})"]


# ---- the figures ----

def figures(side: Side, s: Slice) -> dict[str, Any]:
    """Waits (StartTime - SubmitTime) and bounded slowdown of the slice's jobs (array tasks each
    one), whole seconds; the bridge's submit-to-release, cycles and longest decision from its log."""
    rs = side.trace_records()
    waits = [r.ran.start - r.submit for r in rs]
    runs = [r.ran.end - r.ran.start for r in rs]
    bsld = [max(1.0, (w + x) / max(x, s.tau_s)) for w, x in zip(waits, runs, strict=True)]
    row: dict[str, Any] = {
        "side": side.label, "jobs": len(rs), "mean_wait_s": statistics.fmean(waits),
        "median_wait_s": statistics.median(waits), "p90_wait_s": statistics.quantiles(waits, n=10)[8],
        "mean_bsld": statistics.fmean(bsld),
        "makespan_s": max(r.ran.end for r in rs) - min(r.submit for r in rs),
        "started_at_submit": sum(w == 0 for w in waits)}
    if side.bridged:
        submit = {r.name: r.submit for r in rs}
        rel = [e["t"] - submit[e["job"]] for e in side.events if e["event"] == "start" and e["job"] in submit]
        row["median_release_s"] = statistics.median(rel) if rel else None
        cycles = [e["timing_ms"] for e in side.events if e["event"] == "cycle"]
        row["cycles"] = len(cycles)
        row["max_decide_ms"] = max((c.get("decide", 0.0) for c in cycles), default=None)
    return row


def markdown(rows: list[dict[str, Any]]) -> str:
    keys = list(dict.fromkeys(k for r in rows for k in r))
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(_fmt(r.get(k)) for k in keys) + " |" for r in rows]
    return "\n".join(lines)


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    return f"{v:.2f}" if isinstance(v, float) else str(v)

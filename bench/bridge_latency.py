"""Submit-to-start on a real Slurm, the bridge against Slurm alone, and the read and apply
candidates of a bridge cycle on a large queue (used by bench_bridge.py).

Latency: the same small workload of plain `sbatch -n P` jobs (no --ntasks-per-node), submitted at
random gaps in real time, to two throw-away clusters one after the other: Slurm alone
(`sched/backfill`; SchedulerParameters as given, the same on both sides) and Slurm with the
job_submit.lua recipe driven by `Bridge.loop` (service in process, `easy`, woken by sdiag's
counters). The waits are Slurm's
own records (StartTime - SubmitTime, whole seconds).
"""

from __future__ import annotations

import random
import re
import shutil
import statistics
import subprocess
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path
from typing import Any

from app.bridges.slurm import compact
from app.bridges.slurm import read as readmod
from app.bridges.slurm.apply import Start
from app.bridges.slurm.cycle import Bridge
from app.bridges.slurm.read import SlurmText, read
from app.bridges.slurm.runner import READS, CommandRunner, one_by_one
from app.bridges.slurm.service import in_process
from app.bridges.slurm.state import BridgeState

REPO = Path(__file__).resolve().parent.parent
LUA = REPO / "app" / "bridges" / "slurm" / "job_submit.lua"
SIZES = (1, 1, 2, 2, 4, 6, 8, 12)


def workload(n_jobs: int, gap_s: float, seed: int = 7) -> list[tuple[float, int, int]]:
    """(seconds after the first submit, CPUs, seconds of sleep) of each job."""
    rng, at, out = random.Random(seed), 0.0, []
    for _ in range(n_jobs):
        out.append((at, rng.choice(SIZES), rng.randint(2, 8)))
        at += rng.expovariate(1 / gap_s)
    return out


def latency_runs(n_jobs: int, gap_s: float, sched: str, policy: str = "easy") -> list[dict[str, Any]]:
    """One row per side: the waits of the same workload under Slurm alone and under the bridge,
    both with SchedulerParameters `sched`."""
    from tests.bridges.slurm_cluster import missing_binaries

    if missing_binaries():
        return []
    jobs = workload(n_jobs, gap_s)
    return [_side("Slurm alone (sched/backfill)", jobs, False, policy, sched),
            _side(f"bridge ({policy}, event-driven)", jobs, True, policy, sched)]


def _side(label: str, jobs: list[tuple[float, int, int]], bridged: bool, policy: str,
          sched: str) -> dict[str, Any]:
    from tests.bridges.slurm_cluster import LocalSlurm, NodeSpec, PartitionSpec

    root = Path(tempfile.mkdtemp(prefix="bench-latency-"))
    nodes = [NodeSpec(f"n{i}", 8, 16_000) for i in range(1, 5)]
    slurm = LocalSlurm(root, nodes, [PartitionSpec("batch", tuple(n.name for n in nodes), True)],
                       job_submit_lua=LUA if bridged else None, sched_params=sched)
    stop, loop, bridge = threading.Event(), None, None
    try:
        slurm.start()
        if bridged:
            bridge = Bridge(CommandRunner(str(slurm.conf)), in_process(), BridgeState(root / "state.json"),
                            {"name": policy}, events=root / "events.jsonl")
            bridge.cycle()  # warm
            loop = threading.Thread(target=bridge.loop, args=(10.0,),
                                    kwargs={"done": lambda rep: stop.is_set(), "sleep": stop.wait})
            loop.start()
        ids, sent = _submit(slurm, root, jobs)
        waits = _waits(slurm, ids)
        sent_at = dict(zip(ids, sent, strict=True))
        released = _released_after(root / "events.jsonl", sent_at) if bridged else []
    finally:
        stop.set()
        if loop is not None:
            loop.join(timeout=60)
        slurm.stop()
        shutil.rmtree(root, ignore_errors=True)
    return {"side": label, "jobs": len(jobs), "ran": len(waits),
            "median_wait_s": statistics.median(waits) if waits else None,
            "mean_wait_s": statistics.fmean(waits) if waits else None,
            "p90_wait_s": statistics.quantiles(waits, n=10)[8] if len(waits) > 1 else None,
            "started_within_1s": sum(w <= 1 for w in waits),
            "release_after_submit_median_s": statistics.median(released) if released else None,
            "released_within_1s": sum(r <= 1 for r in released) if bridged else None}


def _released_after(events: Path, sent: dict[str, float]) -> list[float]:
    """Seconds from sbatch's return to the bridge's release of each job (its `start` event)."""
    import json

    out = []
    for line in events.read_text().splitlines():
        e = json.loads(line)
        if e["event"] == "start" and e["job"] in sent:
            out.append(e["t"] - sent[e["job"]])
    return out


def _submit(slurm: Any, root: Path, jobs: list[tuple[float, int, int]]) -> tuple[list[str], list[float]]:
    """The jobs' ids, and when each sbatch returned (wall clock)."""
    t0, ids, sent = time.monotonic(), [], []
    for at, cpus, sleep in jobs:
        time.sleep(max(0.0, t0 + at - time.monotonic()))
        ids.append(slurm.run("sbatch", "--parsable", "-o", "/dev/null", f"--chdir={root}", "-t", "1",
                             "-n", str(cpus), f"--mem={cpus * 200}", "--wrap", f"sleep {sleep}").strip())
        sent.append(time.time())
    return ids, sent


def _waits(slurm: Any, ids: list[str], timeout_s: float = 300) -> list[float]:
    """StartTime - SubmitTime of every job, once none is pending or running."""
    from tests.bridges.workload import records

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        now = records(slurm)
        if all(now[j].state not in ("PENDING", "RUNNING", "COMPLETING", "CONFIGURING") for j in ids):
            break
        time.sleep(1.0)
    submitted = _submit_times(slurm)
    now = records(slurm)
    return [now[j].start - submitted[j] for j in ids if now[j].start == now[j].start]


def _submit_times(slurm: Any) -> dict[str, float]:
    args = ["squeue", "-h", "-t", "all", "-o", "%i %V"]
    text = subprocess.run(args, env={**slurm.env(), "SLURM_TIME_FORMAT": "%s"}, capture_output=True,
                          text=True, check=True).stdout
    return {jid: float(stamp) for jid, stamp in (line.split() for line in text.splitlines())}


def read_candidates(slurm: Any, rounds: int = 3) -> dict[str, Any]:
    """The same state read by each candidate, alternately (medians of `rounds`): Slurm's JSON
    through the client programs (the old read), the compact read (squeue's text and scontrol's
    details, kept between cycles; its first, every-job-new read apart) as it is and as it was on
    2026-11-26 (`_Before`), its commands alone, slurmrestd's JSON, and slurmrestd's `update_time`
    poll when nothing changed; whether they give the same wire state; and what slurmctld itself
    took per job-table RPC of the two squeue readers (sdiag's REQUEST_JOB_INFO time, the floor)."""
    by_json, fast, before = (CommandRunner(str(slurm.conf), compact=False), CommandRunner(str(slurm.conf)),
                             _Before(str(slurm.conf)))
    t0 = time.perf_counter()
    fast.read()
    first = (time.perf_counter() - t0) * 1e3
    before.read()
    floor = ["squeue", "-h", "-o", "%i"]  # the job-table RPC alone: no read of every job beats it
    squeue = compact.SQUEUE, None, compact.SQUEUE_ENV
    readers: dict[str, Any] = {"json_cli": by_json.read, "compact_cli": fast.read,
                               "compact_before": before.read, "squeue_ids_only": lambda: fast._call(floor),
                               "squeue_compact_alone": lambda: fast._call(*squeue),
                               "scontrol_nodes_alone": lambda: fast._call(compact.SCONTROL_NODES),
                               "sinfo_json_alone": lambda: fast._call(READS["nodes"])}
    http = _rest(slurm)
    if http is not None:
        from app.bridges.slurm.rest import API, RestReader

        readers["json_rest"] = RestReader(http).read
        since = {"update_time": int(time.time()) + 5}
        readers["rest_unchanged"] = lambda: http.get(API + "/jobs", params=since)
    took: dict[str, list[float]] = {k: [] for k in readers}
    server = {k: [0, 0] for k in ("squeue_ids_only", "squeue_compact_alone")}
    texts: dict[str, Any] = {}
    previous = fast.read()
    for _ in range(rounds):
        previous = texts.get("compact_cli", previous)
        for k, reader in readers.items():
            rpc = _job_info_rpc(slurm) if k in server else (0, 0)
            t0 = time.perf_counter()
            texts[k] = reader()
            took[k].append((time.perf_counter() - t0) * 1e3)
            if k in server:
                server[k] = [a + b - c for a, b, c in zip(server[k], _job_info_rpc(slurm), rpc, strict=True)]
    views = [_view(texts[k], texts["json_cli"].now)
             for k in ("json_cli", "compact_cli", "compact_before", "json_rest") if k in texts]
    out = {f"{k}_ms": statistics.median(v) for k, v in took.items()}
    out.update({f"slurmctld_{k}_ms": total / 1e3 / count if count else None
                for k, (count, total) in server.items()})
    out.update({"compact_first_ms": first, "same_view": all(v == views[0] for v in views)})
    out.update(_converts(previous, texts["compact_cli"]))
    t0 = time.perf_counter()
    read(texts["json_cli"], {})
    out["json_convert_ms"] = (time.perf_counter() - t0) * 1e3
    return out


def _converts(previous: SlurmText, text: SlurmText) -> dict[str, float]:
    """The compact text's convert with nothing parsed before (every line new) and after the
    previous round's read (its lines' parse kept, `compact.LineCache`: what a cycle pays)."""
    out = {}
    for key, before in (("compact_convert_fresh_ms", None), ("compact_convert_ms", previous)):
        readmod.JOB_LINES = compact.LineCache()
        if before is not None:
            read(before, {})
        t0 = time.perf_counter()
        read(text, {})
        out[key] = (time.perf_counter() - t0) * 1e3
    return out


def _job_info_rpc(slurm: Any) -> tuple[int, int]:
    """sdiag's REQUEST_JOB_INFO count and total time (microseconds) so far."""
    m = re.search(r"REQUEST_JOB_INFO\s.*?count:(\d+)\s+ave_time:\d+\s+total_time:(\d+)", slurm.run("sdiag"))
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


class _Before(CommandRunner):
    """The compact read as it was on 2026-11-26: nodes from `sinfo -N --json`, squeue run without
    TZ (its strftime re-read /etc/localtime for every time it printed)."""

    def read(self) -> SlurmText:
        now = time.time()
        reads = dict(READS, jobs=compact.SQUEUE)
        with ThreadPoolExecutor(len(reads)) as pool:
            env = {"jobs": {"SLURM_TIME_FORMAT": "%s"}}
            futures = {k: pool.submit(self._call, cmd, None, env.get(k)) for k, cmd in reads.items()}
            texts = {k: f.result() for k, f in futures.items()}
        return SlurmText(texts["nodes"], self._with_details(texts["jobs"]), texts["reservations"], now)


def _rest(slurm: Any) -> Any:
    if shutil.which("slurmrestd") is None:
        return None
    from app.bridges.slurm.rest import connect

    listen = f"unix:{slurm.root / 'rest.sock'}"
    if not (slurm.root / "rest.sock").exists():
        slurm.start_rest(listen)
    return connect(listen)


def _view(text: SlurmText, now: float) -> dict[str, Any]:
    v = asdict(read(SlurmText(text.nodes, text.jobs, text.reservations, now), {}, take_unheld=True))
    for n in v["nodes"]:
        n.pop("cpu_load")
    for key in ("running", "pending"):
        v[key].sort(key=lambda r: r["id"])
    return v


def apply_candidates(slurm: Any, n_pins: int) -> dict[str, Any]:
    """Pinning `n_pins` pending jobs: one `scontrol update` process per pin (the old way; 20 timed)
    against all of them fed to one scontrol process; both undone after (pins only: nothing is
    released)."""
    listed = slurm.run("squeue", "-h", "-t", "PD", "-o", "%i %D").splitlines()
    asks = [line.split() for line in listed][:n_pins]
    nodes = slurm.run("sinfo", "-h", "-N", "-o", "%N").split()
    ids = [jid for jid, _ in asks]
    pins = [Start(jid, tuple(nodes[(i + k) % len(nodes)] for k in range(int(count))), "batch").pin()
            for i, (jid, count) in enumerate(asks)]
    runner = CommandRunner(str(slurm.conf))
    t0 = time.perf_counter()
    one_by_one(runner.run, pins, list(range(20)))
    one_each = (time.perf_counter() - t0) * 1e3 / 20
    t0 = time.perf_counter()
    failed = runner.run_all(pins)
    batched = (time.perf_counter() - t0) * 1e3
    runner.run_all([["scontrol", "update", f"JobId={j}", "ReqNodeList="] for j in ids])
    return {"pins": len(ids), "fork_per_pin_ms": one_each, "fork_per_pin_total_s": one_each * len(ids) / 1e3,
            "one_process_total_s": batched / 1e3, "one_process_per_pin_ms": batched / max(1, len(ids)),
            "failed": len(failed)}

"""Slurm's JSON (`sinfo -N --json`, `squeue --json`, `scontrol show -o reservation`, or the same
from slurmrestd), or the compact read's text (compact.py), to the wire.

Pure: text in, wire dicts out. Which pending jobs the service may decide is settled here:
a job marked by the recipe's job_submit.lua (held, `AdminComment=hpcsched:held`, or parked in
the down partition its mark names, with its Slurm priority) whose
dependencies are met and whose begin time has come. A job the user held, one waiting on a
dependency, and one not held by the recipe (Slurm may start it itself) are never sent. An array's
tasks are jobs of their own, named `ARRAY_TASK`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from app.bridges.slurm import compact
from app.bridges.slurm.hostlist import expand
from schemas.common import TIME_BOUND
from schemas.schedule import ScheduleRequest

MARK = "hpcsched:held"
HANDED_BACK = "hpcsched:handed-back"  # the watchdog's or `handback`'s mark: Slurm's own from then on
COMMENT_PREFIX = "hpcsched: "
STARTED = f"{COMMENT_PREFIX}started by hpcsched on the nodes it chose"
# the pin's own comment (no blank: scontrol's input keeps quotes), until `started` replaces it; a
# hand-back unpins exactly the jobs commented one or the other, never a user's own node list
PINNED = "hpcsched:pinned"
BRIDGE_PINS = (PINNED, f"{COMMENT_PREFIX}started")
PARKED = re.compile(r"hpcsched:held partition=(\S+) park=(\S+)")  # the recipe's mark when it parks
UNLIMITED = 0xFFFFFFFE  # Slurm's NO_VAL and INFINITE are at and above this
DOWN_STATES = {"down", "fail", "failing", "future", "unknown", "power_down", "powered_down"}
DRAIN_FLAGS = {"DRAIN", "DRAINING", "DRAINED", "FAIL", "POWER_DOWN", "POWERED_DOWN", "NOT_RESPONDING"}
HOLDING = {"RUNNING", "COMPLETING", "SUSPENDED", "CONFIGURING"}
NOT_YET = {"Dependency", "DependencyNeverSatisfied", "BeginTime"}
ENDED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL",
         "DEADLINE", "PREEMPTED"}
AFTER: dict[str, Callable[[str, int], bool]] = {
    "after": lambda state, code: state not in ("PENDING",),
    "afterany": lambda state, code: state in ENDED,
    "afterok": lambda state, code: state == "COMPLETED" and code == 0,
    "afternotok": lambda state, code: state in ENDED and not (state == "COMPLETED" and code == 0),
}
MAX_WEIGHT = 2**32 - 1


@dataclass(frozen=True)
class Ask:
    """How Slurm lays a pending job's CPUs over its nodes: `total` CPUs in tasks of `per_task`;
    `fixed` when every node gets the same (one node, or `--ntasks-per-node`), otherwise Slurm's
    default block distribution fills the nodes in their order (`-n 20` on 8-CPU nodes: 8+8+4)."""

    total: int
    per_task: int
    fixed: bool


@dataclass(frozen=True)
class Released:
    """A job the bridge released that Slurm still shows pending."""

    nodes: tuple[str, ...]
    held: bool  # still held and marked: the release never reached Slurm
    reason: str  # Slurm's state_reason
    job: dict[str, Any] | None  # as a pending job, to decide again once held again


@dataclass(frozen=True)
class SlurmText:
    """What one read of the controller returned, as text (so a cycle replays from recordings)."""

    nodes: str
    jobs: str
    reservations: str
    now: float


@dataclass
class SlurmView:
    """The wire snapshot of one read, and what the bridge needs to act on its answer."""

    now: float
    nodes: list[dict[str, Any]] = field(default_factory=list)
    running: list[dict[str, Any]] = field(default_factory=list)
    pending: list[dict[str, Any]] = field(default_factory=list)
    windows: list[dict[str, Any]] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    comments: dict[str, str] = field(default_factory=dict)
    partitions: dict[str, list[str]] = field(default_factory=dict)
    order: dict[str, int] = field(default_factory=dict)
    asks: dict[str, Ask] = field(default_factory=dict)
    released: dict[str, Released] = field(default_factory=dict)
    aside: dict[str, str] = field(default_factory=dict)
    # held jobs still on a pin of the bridge's that it never released (its release failed, or it
    # stopped between pin and release): unpinned, then decided again
    left_pinned: list[str] = field(default_factory=list)
    parked: list[str] = field(default_factory=list)  # pending jobs the recipe parked (Slurm ranks them)

    def free_cpus(self) -> dict[str, int]:
        """Each up node's CPUs that no running (or released) job holds; 0 on a node not up."""
        free = {n["id"]: n["capacity"]["cpu"] if n["state"] == "up" else 0 for n in self.nodes}
        for r in self.running:
            for a in r["allocation"]:
                free[a["node"]] = free.get(a["node"], 0) - a["cpu"]
        return free

    def request(self, policy: dict[str, Any] | None = None) -> ScheduleRequest:
        """The POST /schedule body for this view."""
        body: dict[str, Any] = {"now": self.now, "nodes": self.nodes, "running": self.running,
                                "pending": self.pending, "windows": self.windows}
        if policy is not None:
            body["policy"] = policy
        return ScheduleRequest.model_validate(body)


def read(text: SlurmText, started: dict[str, float], take_unheld: bool = False,
         layouts: dict[str, dict[str, int]] | None = None) -> SlurmView:
    """The view of one read. `started`: jobs the bridge released (id -> when), never sent again;
    `take_unheld`: also send pending jobs the recipe did not hold (shadow mode on a cluster
    without the job_submit.lua); `layouts`: the CPUs per node the bridge expects Slurm to give
    each released job (what it holds until Slurm starts it)."""
    view = SlurmView(now=text.now)
    raw_nodes = node_records(text.nodes)
    jobs = sorted(job_records(text.jobs), key=_job_order)
    parks = parking(jobs)
    nodes = _Nodes({n["name"]: max(1, n.get("threads") or 1) for n in raw_nodes}, {}, layouts or {})
    for n in raw_nodes:
        view.order[n["name"]] = len(view.order)
        view.nodes.append(node_in(n, parks))
        nodes.caps[n["name"]] = view.nodes[-1]["capacity"]
        for p in set(n.get("partitions") or []) - parks:
            view.partitions.setdefault(p, []).append(n["name"])
    if not view.nodes:
        raise ValueError("Slurm reports no nodes")
    view.windows = windows(text.reservations)
    states = {str(j["job_id"]): (j["job_state"], j.get("exit_code") or 0) for j in jobs}
    for j in (task for r in jobs for task in array_tasks(r)):
        _take(view, j, started, nodes, take_unheld, states)
    return view


def node_records(text: str) -> list[dict[str, Any]]:
    """`sinfo -N --json`'s (or slurmrestd's) node records, or the same from `scontrol -o show node`."""
    if text.startswith(compact.NODES_HEADER):
        return compact.nodes(text)
    return _answered(json.loads(text), "sinfo")["nodes"]


# the previous read's parse of each compact line, reused for the lines that come back unchanged
JOB_LINES = compact.LineCache()


def job_records(text: str) -> list[dict[str, Any]]:
    """`squeue --json`'s (or slurmrestd's) job records, or the same from the compact read."""
    if text.startswith(compact.HEADER):
        return JOB_LINES.jobs(text)
    return _answered(json.loads(text), "squeue")["jobs"]


def _answered(doc: dict[str, Any], what: str) -> dict[str, Any]:
    """The document, unless Slurm put errors in it: 22.05's `sinfo --json` and `squeue --json` exit 0
    with an empty list and an `errors` entry when the controller does not answer."""
    errors = doc.get("errors") or []
    if errors:
        said = "; ".join(str(e.get("description") or e.get("error") or e) for e in errors)
        raise ValueError(f"{what} answered with errors: {said[:300]}")
    return doc


def _job_order(j: dict[str, Any]) -> tuple[int, int]:
    """Jobs in the order they were submitted (an array's tasks in task order), whichever reader
    gave them: squeue's text comes sorted its own way, the JSON in Slurm's table order."""
    task = j.get("array_task_id")
    return int(j["job_id"]), task if isinstance(task, int) else -1


def array_tasks(j: dict[str, Any]) -> list[dict[str, Any]]:
    """A job as the bridge names it: an array task is `ARRAY_TASK` (as `scontrol` takes it), and
    an array's pending record that still holds several tasks is one pending job per task (pinning
    one splits it off in Slurm). Any other job is itself."""
    base, task, rest = j.get("array_job_id") or 0, j.get("array_task_id"), j.get("array_task_string") or ""
    if base and rest:
        return [{**j, "job_id": f"{base}_{t}", "array_task_id": t, "array_task_string": ""}
                for t in task_ids(rest)]
    if base and task is not None:
        return [{**j, "job_id": f"{base}_{task}"}]
    return [j]


def task_ids(text: str) -> list[int]:
    """Slurm's array task list (`0-7:2,9%3`, throttle ignored) as task ids."""
    out: list[int] = []
    for part in text.split("%")[0].split(","):
        span, _, step = part.partition(":")
        lo, _, hi = span.partition("-")
        if lo.strip().isdigit():
            out.extend(range(int(lo), int(hi or lo) + 1, int(step or 1)))
    return out


@dataclass(frozen=True)
class _Nodes:
    threads: dict[str, int]
    caps: dict[str, dict[str, int]]
    layouts: dict[str, dict[str, int]]


def _take(view: SlurmView, j: dict[str, Any], started: dict[str, float], nodes: _Nodes,
          take_unheld: bool, states: dict[str, tuple[str, int]]) -> None:
    jid, state = str(j["job_id"]), j["job_state"]
    view.comments[jid] = j.get("comment") or ""
    if state in HOLDING and j.get("job_resources"):
        view.running.append(running_in(j, nodes.threads, view.now))
    elif state == "PENDING" and HANDED_BACK in (j.get("admin_comment") or ""):
        view.skipped[jid] = "handed back to Slurm's own scheduler: left alone"
    elif state == "PENDING" and jid in started:
        _released(view, j, started[jid], nodes)
    elif state == "PENDING":
        stale = left_pinned(j)
        why = not_ours(j, view.now, take_unheld, stale) or waits_on(j.get("dependency") or "", states)
        if why:
            view.skipped[jid] = why
            return
        try:
            view.pending.append(pending_in(j))
            view.asks[jid] = ask_of(j, view.pending[-1]["nodes"])
        except ValueError as exc:
            view.skipped[jid] = str(exc)
            view.aside[jid] = str(exc)
            return
        if stale:
            view.left_pinned.append(jid)
        if parked(j):
            view.parked.append(jid)


def left_pinned(j: dict[str, Any]) -> bool:
    """A held, marked job whose node list is the bridge's own pin (its comment is the pin's or the
    start's) though the bridge does not count it released: a release that failed (the controller
    went down between the pin and the release) or a bridge stopped between the two."""
    return (j.get("priority", 0) == 0 and MARK in (j.get("admin_comment") or "")
            and bool(j.get("required_nodes")) and (j.get("comment") or "").startswith(BRIDGE_PINS))


def _released(view: SlurmView, j: dict[str, Any], when: float, nodes: _Nodes) -> None:
    """A released job Slurm has not started: it holds its pinned nodes in the service's view (the
    reconciliation decides whether it waited too long, or was never released)."""
    jid = str(j["job_id"])
    pinned = tuple(expand(j.get("required_nodes") or ""))
    held = j.get("priority", 0) == 0 and MARK in (j.get("admin_comment") or "")
    try:
        again: dict[str, Any] | None = pending_in(j, allow_nodes=True)
        view.asks[jid] = ask_of(j, again["nodes"])  # type: ignore[index]
    except ValueError:
        again = None
    view.released[jid] = Released(pinned, held, str(j.get("state_reason") or ""), again)
    if pinned:
        view.running.append(released_in(j, when, view.now, nodes.caps, nodes.layouts.get(jid)))
    else:
        view.skipped[jid] = "released by the bridge but not pinned: held again once overdue"


def ask_of(j: dict[str, Any], nodes: int) -> Ask:
    """How Slurm will lay this job's CPUs out (see `Ask`)."""
    total, tasks = max(int(j.get("cpus") or 1), nodes), int(j.get("tasks") or 0)
    per_task = int(j.get("cpus_per_task") or 0)  # 22.05's squeue leaves it null: CPUs over tasks
    if per_task < 1:
        per_task = total // tasks if tasks and total % tasks == 0 else 1
    fixed = nodes == 1 or int(j.get("tasks_per_node") or 0) > 0
    return Ask(total, per_task, fixed)


def not_ours(j: dict[str, Any], now: float, take_unheld: bool, pinned_by_us: bool = False) -> str:
    """Why this pending job is not the service's to decide ("" when it is); `pinned_by_us`: its
    node list is the bridge's pin (`left_pinned`), not the user's."""
    marked = MARK in (j.get("admin_comment") or "")
    if j.get("priority", 0) == 0 and not marked:
        return "held by its user (or an administrator): left alone"
    if j.get("state_reason") in NOT_YET:
        return f"not eligible yet ({j.get('state_reason')}): left alone"
    if (j.get("begin_time") or j.get("eligible_time") or 0) > now + 1:
        return "its begin time is still to come: left alone"
    if j.get("priority", 0) != 0 and not take_unheld and not parked(j):
        return "not held by hpcsched's job_submit.lua: Slurm may start it itself"
    return unmapped({**j, "required_nodes": ""} if pinned_by_us else j)


def parked(j: dict[str, Any]) -> str:
    """The partition(s) a job the recipe parked asked for ("" when it is not parked: not marked so,
    or no longer in the parking partition, e.g. moved by its pin or a hand-back)."""
    m = PARKED.search(j.get("admin_comment") or "")
    return m.group(1) if m and j.get("partition") == m.group(2) else ""


def parking(jobs: list[dict[str, Any]]) -> set[str]:
    """The recipe's parking partitions, from the marks: never a queue of the service's."""
    marks = (PARKED.search(j.get("admin_comment") or "") for j in jobs)
    return {m.group(2) for m in marks if m}


def unmapped(j: dict[str, Any]) -> str:
    """What a job asks that the wire cannot say ("" when nothing): such a job is left held, and
    the reason logged, rather than started with part of its request dropped. Licences are not in
    it: Slurm counts them itself, a released job waits on its pin for one, and `--start-bound`
    holds it again and decides it again if the wait is long."""
    for key, what in (("het_job_id", "heterogeneous job"), ("required_nodes", "a node list"),
                      ("excluded_nodes", "excluded nodes"), ("resv_name", "a reservation")):
        if j.get(key):
            return f"asks for {what} ({j[key]}): not mapped, left held"
    return ""


def waits_on(dependency: str, states: dict[str, tuple[str, int]]) -> str:
    """Why a job's dependencies are not met ("" when they are). Slurm does not test the
    dependencies of a held job, so the bridge does, from the same read: `after` (started),
    `afterany` (ended), `afterok`/`afternotok` (ended well/badly), all (`,`) or any (`?`) of
    them. A job Slurm no longer lists counts as ended well; `singleton` and `aftercorr` are not
    mapped (the job waits)."""
    if not dependency or dependency == "(null)":
        return ""
    any_of = "?" in dependency
    met = [_met(item, states) for item in re.split(r"[,?]", dependency) if item]
    if (any(met) if any_of else all(met)):
        return ""
    return f"waits on its dependency {dependency}: left alone"


def _met(item: str, states: dict[str, tuple[str, int]]) -> bool:
    kind, _, rest = re.sub(r"\(.*?\)", "", item).partition(":")
    ids = [i.split("+")[0].split("_")[0] for i in rest.split(":") if i]
    if kind not in AFTER or not ids:
        return False
    return all(AFTER[kind](*states.get(i, ("COMPLETED", 0))) for i in ids)


def node_in(n: dict[str, Any], parks: set[str] | frozenset[str] = frozenset()) -> dict[str, Any]:
    """One `sinfo --json` node as a wire NodeIn (the recipe's parking partitions left out)."""
    parts = [p for p in n.get("partitions") or [] if p not in parks] or ["default"]
    labels = [f for f in (n.get("active_features") or n.get("features") or "").split(",") if f]
    return {
        "id": n["name"], "queues": list(parts), "labels": labels, "state": node_state(n),
        "weight": min(int(n.get("weight") or 1), MAX_WEIGHT),
        "capacity": {"cpu": max(1, int(n["cpus"])), "mem_mib": int(n.get("real_memory") or 0),
                     "gpu": gres_gpus(n.get("gres") or "")},
        "cpu_load": min(1.0, max(0.0, (n.get("cpu_load") or 0) / 100 / max(1, int(n["cpus"])))),
    }


def node_state(n: dict[str, Any]) -> str:
    """up, down or drain, from the node's base state and its flags."""
    base = (n.get("state") or "unknown").lower()
    flags = {f.upper() for f in n.get("state_flags") or []}
    if base in DOWN_STATES or "NOT_RESPONDING" in flags:
        return "down"
    if base == "drain" or flags & DRAIN_FLAGS:
        return "drain"
    return "up"


def gres_gpus(gres: str) -> int:
    """GPUs in a GRES string (`gpu:4`, `gpu:a100:2(S:0-1)`, `gres/gpu:2`); 0 when none."""
    total = 0
    for item in gres.split(","):
        item = item.split("(")[0].replace("gres/", "").replace("gres:", "")
        bits = item.split(":")
        if bits[0] == "gpu" and len(bits) > 1 and bits[-1].isdigit():
            total += int(bits[-1])
        elif bits[0] == "gpu":
            total += 1
    return total


def walltime_s(limit_min: int | None) -> float:
    """A Slurm time limit (minutes; NO_VAL/INFINITE = none) in seconds, within the wire's bound."""
    if limit_min is None or limit_min >= UNLIMITED or limit_min <= 0:
        return 365 * 86400.0
    return min(float(limit_min) * 60, TIME_BOUND)


def running_in(j: dict[str, Any], threads: dict[str, int], now: float) -> dict[str, Any]:
    """A running job with what it holds on each node."""
    gpus = gres_gpus(j.get("tres_per_node") or "")
    alloc = []
    for a in j["job_resources"].get("allocated_nodes") or []:
        cores = sum(len(s.get("cores") or {}) for s in (a.get("sockets") or {}).values())
        cpu = a["cpus"] if "cpus" in a else cores * threads.get(a["nodename"], 1)  # "cpus": compact
        alloc.append({"node": a["nodename"], "cpu": cpu,
                      "mem_mib": int(a.get("memory_allocated") or 0), "gpu": gpus})
    start = float(j.get("start_time") or now)
    wall = max(walltime_s(j.get("time_limit")), now - start + 1)
    return {"id": str(j["job_id"]), "queue": j["partition"].split(",")[0], "allocation": alloc,
            "start_time": start, "walltime_s": wall}


def released_in(j: dict[str, Any], when: float, now: float, caps: dict[str, dict[str, int]],
                layout: dict[str, int] | None = None) -> dict[str, Any]:
    """A job the bridge released that Slurm has not started yet: it holds its chosen nodes (all of
    each, when exclusive), with the CPUs the bridge expects Slurm to give it on each (`layout`,
    else the same on every node)."""
    p = pending_in(j, allow_nodes=True)
    nodes = expand(j.get("required_nodes") or "")
    alloc = [{"node": n, **(caps[n] if p["exclusive"] and n in caps else _per_node(p, (layout or {}).get(n)))}
             for n in nodes]
    return {"id": p["id"], "queue": p["queue"], "allocation": alloc, "start_time": min(when, now),
            "walltime_s": p["walltime_s"] + max(0.0, now - when)}


def _per_node(p: dict[str, Any], cpu: int | None) -> dict[str, int]:
    cpu = cpu or p["cpu"]
    mem = p["mem_mib_per_cpu"] * cpu if p.get("mem_mib_per_cpu") else p.get("mem_mib", 0)
    return {"cpu": cpu, "mem_mib": mem, "gpu": p["gpu"]}


def pending_in(j: dict[str, Any], allow_nodes: bool = False) -> dict[str, Any]:
    """A pending job as a wire PendingJobIn; ValueError when a request cannot be said there."""
    nodes = max(1, int(j.get("node_count") or 1))
    if int(j.get("max_nodes") or 0) > 0:  # Slurm's node count of a pending job is its estimate
        nodes = min(nodes, int(j["max_nodes"]))
    cpu = max(int(j.get("minimum_cpus_per_node") or 1), math.ceil(int(j.get("cpus") or 1) / nodes))
    features = j.get("features") or ""
    if any(c in features for c in "|[]*"):
        raise ValueError(f"constraint {features!r} (or/counts): not mapped, only and-ed features")
    job: dict[str, Any] = {
        "id": str(j["job_id"]), "user": j.get("user_name") or str(j.get("user_id", "")),
        "queue": (parked(j) or j.get("partition") or "default").split(",")[0],
        "submit_time": float(j["submit_time"]), "nodes": nodes, "cpu": cpu,
        "gpu": gres_gpus(j.get("tres_per_node") or ""), "walltime_s": walltime_s(j.get("time_limit")),
        # a parked job keeps Slurm's multifactor priority (nice included); a held one has only its nice
        "priority": float(j.get("priority") or 0) if parked(j) else -float(j.get("nice") or 0),
        "labels": [f for f in features.split("&") if f],
    }
    per_node, per_cpu = j.get("memory_per_node"), j.get("memory_per_cpu")
    if per_node:
        job["mem_mib"] = int(per_node)
    elif per_cpu:
        job["mem_mib_per_cpu"] = int(per_cpu)
    # no memory asked: Slurm gives the job each node's whole memory (DefMemPerNode unset)
    job["exclusive"] = j.get("shared") == "none" or not (per_node or per_cpu)
    return job


# sprio's weighted factors (22.05 has no `sprio --json`): format letter -> the factor's name
SPRIO_FACTORS = (("S", "site"), ("A", "age"), ("B", "assoc"), ("F", "fairshare"), ("J", "jobsize"),
                 ("P", "partition"), ("Q", "qos"), ("N", "nice"))
SPRIO = ["sprio", "-h", "-o", " ".join(["%i", "%Y", *(f"%{c}" for c, _ in SPRIO_FACTORS)])]


def priority_factors(text: str) -> dict[str, dict[str, float]]:
    """`SPRIO`'s lines as job id -> {factor: weighted value} (Slurm's priority is their sum, nice
    taken off); a job listed once per partition keeps its first line, a line that does not parse
    is left out."""
    out: dict[str, dict[str, float]] = {}
    for line in text.splitlines():
        bits = line.split()
        if len(bits) != 2 + len(SPRIO_FACTORS) or bits[0] in out:
            continue
        try:
            values = [float(b) for b in bits[1:]]  # the total too: a line of numbers or nothing
        except ValueError:
            continue
        if all(math.isfinite(v) for v in values):
            out[bits[0]] = {name: v for (_, name), v in zip(SPRIO_FACTORS, values[1:], strict=True)}
    return out


def windows(text: str) -> list[dict[str, Any]]:
    """Reservations as maintenance windows: nodes out from start to end. Every reservation is one
    (a user reservation's jobs are not mapped). `text` is `scontrol show -o reservation`'s lines
    or slurmrestd's `/reservations` JSON."""
    if text.lstrip().startswith("{"):
        return [window(r["name"], r.get("node_list") or "", float(r["start_time"]), float(r["end_time"]))
                for r in json.loads(text).get("reservations") or []
                if r.get("node_list") not in (None, "", "(null)")]
    out = []
    for line in text.splitlines():
        kv = dict(item.split("=", 1) for item in line.split() if "=" in item)
        if "ReservationName" not in kv or kv.get("Nodes", "(null)") == "(null)":
            continue
        out.append(window(kv["ReservationName"], kv["Nodes"], _epoch(kv["StartTime"]), _epoch(kv["EndTime"])))
    return out


def window(name: str, nodes: str, start: float, end: float) -> dict[str, Any]:
    return {"id": name, "nodes": expand(nodes), "start": start, "end": end}


def _epoch(stamp: str) -> float:
    return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S").timestamp()

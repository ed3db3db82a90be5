"""Slurm's jobs read fast: `squeue`'s compact text (only the fields the bridge reads) and
`scontrol -d -o show job` lines for what squeue cannot print, parsed into the same job records
`squeue --json` gives (`read.read` takes either).

Why: at 5,000 jobs `squeue --json` takes 1.7-3.5 s on the development machine, almost all of it
Slurm writing 16 MB of JSON; the same jobs as `squeue -O` text take ~0.1-0.25 s. squeue's text
lacks three things, all fixed for a job's life, so they are read once per job with `scontrol` and
kept (`Details`): the nodes a job excludes, whether its memory is per node or per CPU, and a
running job's CPUs and memory on each node.

Pure: text in, records out. The text (`SlurmText.jobs`) is `squeue`'s lines, then a `DETAILS`
line, then the `scontrol` lines of the jobs it names, so a cycle replays from a recording.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from app.bridges.slurm.hostlist import expand

HEADER = "#hpcsched-squeue-compact 1"
DETAILS = "#scontrol-details"
SEP = "\x1f"  # squeue prints it after every field: no comment or name holds it
NONE = {"(null)", "N/A", "None", "Unknown", ""}


def _text(v: str) -> str:
    return "" if v == "(null)" or v == "N/A" else v


def _int(v: str) -> int:
    return 0 if v in NONE else int(v)


def _minutes(v: str) -> int | None:
    """squeue's time limit (`UNLIMITED`, `mm:ss`, `hh:mm:ss`, `d-hh:mm:ss`) in minutes."""
    if not v or not v[0].isdigit():
        return None
    days, _, clock = v.rpartition("-")
    parts = [int(p) for p in clock.split(":")]
    while len(parts) < 3:
        parts.insert(0, 0)
    return int(days or 0) * 1440 + parts[0] * 60 + parts[1] + (1 if parts[2] else 0)


def _mib(v: str) -> int:
    """A memory size (`--noconvert`: `8000M`; scontrol: `250G` when exact) in MiB."""
    if v in NONE or v == "0":
        return 0
    scale = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 ** 2}
    return round(float(v[:-1]) * scale[v[-1]]) if v[-1] in scale else int(float(v))


def _shared(v: str) -> str | None:
    return "none" if v == "NO" else None if v in ("OK", "N/A") else v.lower()


# (record key, squeue --Format field, parser): the fields of `squeue --json` that read.py uses
FIELDS: tuple[tuple[str, str, Callable[[str], Any]], ...] = (
    ("job_id", "JobID", int), ("array_job_id", "ArrayJobID", _int), ("array_task_id", "ArrayTaskID", str),
    ("job_state", "State", str), ("exit_code", "exit_code", _int), ("comment", "Comment", _text),
    ("admin_comment", "admin_comment", _text), ("priority", "PriorityLong", _int),
    ("state_reason", "Reason", str), ("eligible_time", "EligibleTime", _int),
    ("start_time", "StartTime", _int), ("submit_time", "SubmitTime", _int),
    ("dependency", "Dependency", _text), ("het_job_id", "HetJobID", _int), ("licenses", "Licenses", _text),
    ("required_nodes", "ReqNodes", _text), ("resv_name", "Reservation", _text),
    ("node_count", "NumNodes", _int), ("max_nodes", "MaxNodes", _int),
    ("minimum_cpus_per_node", "MinCpus", _int), ("cpus", "NumCPUs", _int), ("features", "Feature", _text),
    ("user_name", "UserName", str), ("partition", "Partition", str),
    ("tres_per_node", "tres-per-node", _text),
    ("time_limit", "TimeLimit", _minutes), ("nice", "Nice", _int), ("min_memory", "MinMemory", _mib),
    ("shared", "OverSubscribe", _shared), ("tasks", "NumTasks", _int), ("tasks_per_node", "NTPerNode", _int),
)
STATE_AT = [key for key, _, _ in FIELDS].index("job_state")
START_AT = [key for key, _, _ in FIELDS].index("start_time")
SQUEUE = ["squeue", "-h", "-r", "-t", "all", "--noconvert",
          "-O", ",".join(f"{field}:{SEP}" for _, field, _ in FIELDS)]
# times as epoch seconds, as the JSON has them; TZ named so that squeue's strftime("%s") does not
# re-read /etc/localtime for every time it prints (a third of squeue's CPU at 5,000 jobs; the
# epoch is the same in any zone)
SQUEUE_ENV = {"SLURM_TIME_FORMAT": "%s", "TZ": "UTC"}


NODES_HEADER = "#hpcsched-scontrol-nodes 1"
SCONTROL_NODES = ["scontrol", "-o", "show", "node"]


def nodes(text: str) -> list[dict[str, Any]]:
    """`scontrol -o show node` lines (after `NODES_HEADER`) as `sinfo -N --json`'s node records
    (the keys read.node_in reads). Each key's first occurrence counts: a drain reason, last on
    the line, may hold blanks and `=`."""
    out = []
    for line in text.removeprefix(NODES_HEADER + "\n").splitlines():
        kv: dict[str, str] = {}
        for item in line.split():
            key, eq, value = item.partition("=")
            if eq and key not in kv:
                kv[key] = value
        if "NodeName" in kv:
            out.append(_node(kv))
    return out


def _node(kv: dict[str, str]) -> dict[str, Any]:
    base, *flags = kv.get("State", "UNKNOWN").split("+")
    if base.endswith("*"):  # an older scontrol's mark of a node not responding
        base, flags = base[:-1], [*flags, "NOT_RESPONDING"]
    load = kv.get("CPULoad", "N/A")
    return {"name": kv["NodeName"], "threads": _int(kv.get("ThreadsPerCore", "")),
            "partitions": [p for p in kv.get("Partitions", "").split(",") if p],
            "active_features": _text(kv.get("ActiveFeatures", "")),
            "features": _text(kv.get("AvailableFeatures", "")),
            "state": base.lower(), "state_flags": flags, "weight": _int(kv.get("Weight", "")),
            "cpus": _int(kv.get("CPUTot", "")), "real_memory": _int(kv.get("RealMemory", "")),
            "gres": _text(kv.get("Gres", "")),
            "cpu_load": round(float(load) * 100) if load[:1].isdigit() else 0}


def rows(squeue: str) -> list[dict[str, Any]]:
    """squeue's lines as records, before the details are added. Parsed a column at a time, each
    distinct value once (most repeat: states, partitions, sizes), which keeps 5,000 jobs at tens
    of milliseconds."""
    split = [line.split(SEP) for line in squeue.splitlines()]
    split = [values for values in split if len(values) > len(FIELDS)]
    if not split:
        return []
    columns = []
    for (_, _, parse), column in zip(FIELDS, zip(*split, strict=False), strict=False):
        parsed = {v: parse(v) for v in set(column)}
        columns.append([parsed[v] for v in column])
    keys = [key for key, _, _ in FIELDS]
    out = [dict(zip(keys, values, strict=True)) for values in zip(*columns, strict=True)]
    for r in out:
        task = r.pop("array_task_id")
        if task in NONE:  # not an array job: squeue prints its own id as the array's
            r["array_job_id"], r["array_task_id"], r["array_task_string"] = 0, None, ""
        elif task.isdigit():
            r["array_task_id"], r["array_task_string"] = int(task), ""
        else:
            r["array_task_id"], r["array_task_string"] = None, task
        r["cpus_per_task"] = None  # 22.05's JSON leaves it null too: read.ask_of derives it
    return out


def states(squeue: str) -> dict[str, tuple[str, int]]:
    """Each job's state and start time (all the runner needs to know whose details to read),
    without parsing the rest of the line."""
    out = {}
    for line in squeue.splitlines():
        values = line.split(SEP, START_AT + 1)
        if len(values) > START_AT + 1:
            out[values[0]] = (values[STATE_AT], _int(values[START_AT]))
    return out


JOB_ID = re.compile(r"JobId=(\d+)\s")
EXCLUDED = re.compile(r"\bExcNodeList=(\S*)")
PER_CPU = re.compile(r"\bMinMemoryCPU=")
HELD = re.compile(r"\bNodes=(\S+) CPU_IDs=(\S+) Mem=(\d+)")


def details(lines: str) -> dict[str, dict[str, Any]]:
    """`scontrol -d -o show job` lines: per job id, its excluded nodes, whether its memory is per
    CPU, and (running) what it holds on each node."""
    return dict(d for d in map(_detail, lines.splitlines()) if d)


def _detail(line: str) -> tuple[str, dict[str, Any]] | None:
    m = JOB_ID.match(line)
    if not m:
        return None
    exc = EXCLUDED.search(line)
    alloc = [{"nodename": node, "cpus": _count(ids), "memory_allocated": int(mem)}
             for group, ids, mem in HELD.findall(line) for node in expand(group)]
    return m.group(1), {"excluded_nodes": _text(exc.group(1)) if exc else "",
                        "per_cpu": bool(PER_CPU.search(line)), "allocated": alloc}


def reduced(line: str) -> str:
    """The parts of an `scontrol -d -o show job` line that `details` reads (a fiftieth of it)."""
    keep = re.findall(r"(?:^JobId=\S+|\bExcNodeList=\S*|\bMinMemoryCPU=\S*|\bNodes=\S+ CPU_IDs=\S+ Mem=\d+)",
                      line)
    return " ".join(keep)


def _count(ids: str) -> int:
    """CPUs in scontrol's CPU_IDs list (`0-3,8,10-11`)."""
    total = 0
    for part in ids.split(","):
        lo, _, hi = part.partition("-")
        if lo.isdigit():
            total += int(hi or lo) - int(lo) + 1
    return total


def jobs(text: str) -> list[dict[str, Any]]:
    """The compact jobs text as `squeue --json`'s job records (the keys read.py reads)."""
    body, _, more = text.removeprefix(HEADER + "\n").partition(DETAILS + "\n")
    known = details(more)
    out = rows(body)
    for r in out:
        _complete(r, known.get(str(r["job_id"])))
    return out


class LineCache:
    """`jobs` with each line's parse kept from the previous call and reused when the same line
    comes back (a held job's squeue line changes only when its priority, reason or times do, its
    scontrol line never): the same records as `jobs` (a line's parse depends on that line
    alone), handed out as fresh copies. Keeps the lines of its last call only."""

    def __init__(self) -> None:
        self._rows: dict[str, dict[str, Any]] = {}
        self._details: dict[str, tuple[str, dict[str, Any]] | None] = {}

    def jobs(self, text: str) -> list[dict[str, Any]]:
        body, _, more = text.removeprefix(HEADER + "\n").partition(DETAILS + "\n")
        known = self._known(more.splitlines())
        out = self._records([line for line in body.splitlines() if line.count(SEP) >= len(FIELDS)])
        for r in out:
            _complete(r, known.get(str(r["job_id"])))
        return out

    def _records(self, lines: list[str]) -> list[dict[str, Any]]:
        old = self._rows
        new = [line for line in dict.fromkeys(lines) if line not in old]
        parsed = dict(zip(new, rows("\n".join(new)), strict=True))
        self._rows = {line: old[line] if line in old else parsed[line] for line in lines}
        return [dict(self._rows[line]) for line in lines]

    def _known(self, lines: list[str]) -> dict[str, dict[str, Any]]:
        old = self._details
        self._details = {line: old[line] if line in old else _detail(line) for line in lines}
        known = (self._details[line] for line in lines)
        return {jid: {**d, "allocated": [dict(a) for a in d["allocated"]]} for jid, d in filter(None, known)}


def _complete(r: dict[str, Any], d: dict[str, Any] | None) -> None:
    mem = r.pop("min_memory")
    per_cpu = bool(d and d["per_cpu"])
    r["memory_per_cpu"] = mem if mem and per_cpu else None
    r["memory_per_node"] = mem if mem and not per_cpu else None
    r["excluded_nodes"] = d["excluded_nodes"] if d else ""
    if r["job_state"] in HOLDING and d and d["allocated"]:
        r["job_resources"] = {"allocated_nodes": d["allocated"]}


HOLDING = ("RUNNING", "COMPLETING", "SUSPENDED", "CONFIGURING")


def needs_details(state: str) -> bool:
    """A job whose record is incomplete without its `scontrol` line: pending (excluded nodes,
    memory per CPU) or holding nodes (its CPUs on each)."""
    return state == "PENDING" or state in HOLDING

"""The mixed Slurm workload of the end-to-end tests, and Slurm's records of what ran."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from app.bridges.slurm.read import gres_gpus
from tests.bridges.slurm_cluster import LocalSlurm, NodeSpec, PartitionSpec

NODES = [NodeSpec(f"n{i}", cpus=8, mem_mib=16_000, features=("gpu",) if i >= 7 else (),
                  gpus=2 if i >= 7 else 0) for i in range(1, 9)]
PARTITIONS = [PartitionSpec("batch", ("n1", "n2", "n3", "n4", "n5", "n6"), default=True),
              PartitionSpec("short", ("n4", "n5", "n6", "n7", "n8"))]


@dataclass(frozen=True)
class Submitted:
    job_id: str
    kind: str


def submit_mix(slurm: LocalSlurm, work: Path) -> list[Submitted]:
    """≥ 40 short jobs: serial, multi-node, memory-heavy, GPU-feature, GRES GPUs, exclusive, memory per CPU,
    both partitions, one wide job that must be reserved, one held by its user, one waiting on a
    dependency."""
    jobs: list[Submitted] = []

    def sb(kind: str, *args: str, sleep: int = 4) -> str:
        out = slurm.run("sbatch", "--parsable", f"--chdir={work}", "-o", "/dev/null", "-t", "1",
                        *args, "--wrap", f"sleep {sleep}")
        jid = out.strip().split(";")[0]
        jobs.append(Submitted(jid, kind))
        return jid

    for i in range(16):
        sb("serial", "-n", str(1 + i % 4), f"--mem={1000 + 500 * (i % 4)}",
           "-p", "batch" if i % 2 else "short", sleep=3 + i % 4)
    wide = sb("wide", "-N", "6", "-c", "8", "--mem=8000", "-p", "batch", sleep=5)
    for i in range(8):
        sb("multi", "-N", str(2 + i % 2), "-c", "4", "--mem=4000", "-p", "batch", sleep=4)
    for _ in range(5):
        sb("memory", "-n", "1", "--mem=14000", "-p", "short", sleep=3)
    for _ in range(2):
        sb("gpu", "-n", "2", "--mem=2000", "-C", "gpu", "-p", "short", sleep=3)
    for gpus in (1, 1, 2, 2):  # real GRES: 6 GPUs asked of the 4 the two gpu nodes have
        sb("gres", "-n", "1", "--mem=1000", f"--gres=gpu:{gpus}", "-p", "short", sleep=4)
    for i in range(8):
        sb("serial", "-n", "2", "--mem=1000", "-p", "batch,short" if i % 2 else "short", sleep=2)
    sb("exclusive", "--exclusive", "-n", "2", "--mem=1000", "-p", "short", sleep=3)
    sb("mem_per_cpu", "-n", "4", "--mem-per-cpu=1500", "-p", "batch,short", sleep=3)
    sb("dependent", "-n", "1", "--mem=500", f"--dependency=afterok:{wide}", sleep=1)
    sb("user_held", "--hold", "-n", "1", "--mem=500")
    return jobs


@dataclass(frozen=True)
class Ran:
    job_id: str
    state: str
    start: float
    end: float
    nodes: dict[str, tuple[int, int, int]]  # node -> (cpus, mem_mib, gpus)
    priority: int
    comment: str


def records(slurm: LocalSlurm) -> dict[str, Ran]:
    """`scontrol show job -d -o`: each job's state, times and per-node CPUs, memory and GPUs (a
    node's GRES line is empty once the job ended: its GPUs are then the job's `JOB_GRES` shared
    evenly, as `--gres` asks per node)."""
    out = {}
    for line in slurm.run("scontrol", "show", "job", "-d", "-o").splitlines():
        if not line.startswith("JobId="):
            continue
        kv = dict(re.findall(r"(\w[\w/:]*)=(\S*)", line))
        spans = [(_hosts(slurm, m.group(1)), sum(_span(p) for p in m.group(2).split(",")), int(m.group(3)),
                  gres_gpus(m.group(4) or ""))
                 for m in re.finditer(r"Nodes=(\S+) CPU_IDs=(\S+) Mem=(\d+)(?: GRES=(\S*))?", line)]
        held = sum(len(hosts) for hosts, *_ in spans)
        job_gpus = gres_gpus(kv.get("JOB_GRES") or "")
        nodes = {n: (cpus, mem, gpus or (job_gpus // held if held else 0))
                 for hosts, cpus, mem, gpus in spans for n in hosts}
        start, end = _time(kv.get("StartTime")), _time(kv.get("EndTime"))
        out[kv["JobId"]] = Ran(kv["JobId"], kv["JobState"], start, end, nodes, int(kv.get("Priority", "0")),
                               _comment(line))
    return out


def _comment(line: str) -> str:
    m = re.search(r" Comment=(.*?) (?:StdErr|StdIn|StdOut|Power|MCS)", line)
    return m.group(1) if m else ""


def _span(part: str) -> int:
    lo, _, hi = part.partition("-")
    return int(hi or lo) - int(lo) + 1


def _hosts(slurm: LocalSlurm, text: str) -> list[str]:
    from app.bridges.slurm.hostlist import expand

    return expand(text)


def _time(stamp: str | None) -> float:
    from datetime import datetime

    if not stamp or stamp in ("Unknown", "None", "N/A"):
        return float("nan")
    return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S").timestamp()

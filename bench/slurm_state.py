"""A large Slurm state in Slurm's own JSON, scaled up from a recorded real read (tests/data/slurm):
the recorded node, running-job and pending-job records are copied with new names, sizes and ids,
so every field the bridge reads keeps the shape Slurm 22.05 gives it."""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path
from typing import Any

from app.bridges.slurm.read import MARK, SlurmText

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "slurm"
CPUS, MEM = 64, 256_000


def _templates() -> tuple[dict[str, Any], dict[str, dict[str, Any]], str]:
    nodes = json.loads((DATA / "sinfo.json").read_text())
    jobs = {str(j["job_id"]): j for j in json.loads((DATA / "squeue.json").read_text())["jobs"]}
    return nodes, jobs, (DATA / "reservations.txt").read_text()


def synthesize(n_nodes: int, n_pending: int, now: float, seed: int = 1) -> SlurmText:
    """`n_nodes` nodes in two overlapping partitions (a tenth with 4 GPUs), about half of them
    busy with running jobs, and `n_pending` held-and-marked pending jobs of the recorded kinds."""
    rng = random.Random(seed)
    tpl_nodes, tpl_jobs, resv = _templates()
    names = [f"c{i:04d}" for i in range(n_nodes)]
    nodes = [_node(tpl_nodes["nodes"][0], name, i, n_nodes, rng) for i, name in enumerate(names)]
    jobs: list[dict[str, Any]] = []
    for name in names:
        if rng.random() < 0.5:
            jobs.append(_running(tpl_jobs["18"], 100_000 + len(jobs), name, rng, now))
    kinds = ["4", "20", "27", "31", "40"]
    for i in range(n_pending):
        jobs.append(_pending(tpl_jobs[rng.choice(kinds)], 1_000_000 + i, now - rng.uniform(0, 86400), rng))
    resv = resv.replace("Nodes=n[1-2]", f"Nodes={names[0]},{names[1]}")
    doc = {"meta": {}, "errors": []}
    return SlurmText(json.dumps({**doc, "nodes": nodes}), json.dumps({**doc, "jobs": jobs}), resv, now)


def _node(tpl: dict[str, Any], name: str, i: int, n: int, rng: random.Random) -> dict[str, Any]:
    node = copy.deepcopy(tpl)
    parts = (["batch"] if i < 0.8 * n else []) + (["short"] if i >= 0.6 * n else [])
    gpu = i >= 0.9 * n
    node.update(name=name, cpus=CPUS, real_memory=MEM, partitions=parts, features="gpu" if gpu else "",
                active_features="gpu" if gpu else "", gres="gpu:4" if gpu else "",
                state="idle", state_flags=["DRAIN"] if rng.random() < 0.02 else [])
    return node


def _running(tpl: dict[str, Any], jid: int, node: str, rng: random.Random, now: float) -> dict[str, Any]:
    job = copy.deepcopy(tpl)
    cores = rng.randint(8, CPUS)
    alloc = {"sockets": {"0": {"cores": {str(c): "allocated" for c in range(cores)}}}, "nodename": node,
             "cpus_used": 0, "memory_used": 0, "memory_allocated": cores * 2000}
    job.update(job_id=jid, nodes=node, node_count=1, cpus=cores, start_time=int(now - rng.uniform(0, 3000)),
               time_limit=rng.choice([60, 120, 240]), partition="batch",
               job_resources={"nodes": node, "allocated_cores": cores, "allocated_hosts": 1,
                              "allocated_nodes": [alloc]})
    return job


def _pending(tpl: dict[str, Any], jid: int, submit: float, rng: random.Random) -> dict[str, Any]:
    job = copy.deepcopy(tpl)
    nodes = job["node_count"] if job["node_count"] == 1 else rng.randint(2, 8)
    job.update(job_id=jid, submit_time=int(submit), node_count=nodes, priority=0, admin_comment=MARK,
               state_reason="JobHeldUser", comment="", time_limit=rng.choice([10, 30, 60, 240]),
               cpus=nodes * rng.choice([1, 2, 4, 8, 16]))
    return job

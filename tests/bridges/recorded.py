"""The recorded Slurm state in tests/data/slurm (see tests/data/README.md)."""

from __future__ import annotations

import json
from pathlib import Path

from app.bridges.slurm.read import SlurmText

DATA = Path(__file__).resolve().parents[1] / "data" / "slurm"
NOW = 1_795_456_945.0  # a few seconds after the recording


def text(idle: bool = False) -> SlurmText:
    """The recorded read; `idle`: as if every running job had ended (more room, more starts)."""
    jobs = (DATA / "squeue.json").read_text()
    if idle:
        doc = json.loads(jobs)
        doc["jobs"] = [j for j in doc["jobs"] if j["job_state"] != "RUNNING"]
        jobs = json.dumps(doc)
    return SlurmText((DATA / "sinfo.json").read_text(), jobs, (DATA / "reservations.txt").read_text(), NOW)


def started() -> dict[str, float]:
    return {k: float(v) for k, v in json.loads((DATA / "started.json").read_text()).items()}


def raw_jobs() -> dict[str, dict]:
    return {str(j["job_id"]): j for j in json.loads((DATA / "squeue.json").read_text())["jobs"]}


def raw_nodes() -> dict[str, dict]:
    return {n["name"]: n for n in json.loads((DATA / "sinfo.json").read_text())["nodes"]}

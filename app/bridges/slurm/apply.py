"""A `ScheduleResponse` to Slurm commands.

A start pins the job to the chosen nodes and partition (`ReqNodeList`, `NumNodes=k-k`) and then
releases it, so Slurm can start it nowhere else; a migration moves the job's partition; every
pending job's comment (`squeue -O comment`) says the service's reason and estimated start,
rewritten only when it changes.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from app.bridges.slurm.read import SlurmView
from schemas.schedule import PendingOut, ScheduleResponse, StartOut

COMMENT_PREFIX = "hpcsched: "


@dataclass(frozen=True)
class Start:
    job_id: str
    nodes: tuple[str, ...]
    partition: str

    def pin(self) -> list[str]:
        """Only these nodes, exactly this many, in this partition (the release follows)."""
        return ["scontrol", "update", f"JobId={self.job_id}", f"Partition={self.partition}",
                f"ReqNodeList={','.join(self.nodes)}", f"NumNodes={len(self.nodes)}-{len(self.nodes)}",
                f"Comment={COMMENT_PREFIX}started on {','.join(self.nodes)}"]


def release(job_ids: list[str]) -> list[str]:
    """One command releasing every pinned job of a cycle."""
    return ["scontrol", "release", ",".join(job_ids)]


@dataclass(frozen=True)
class Move:
    job_id: str
    partition: str

    def commands(self) -> list[list[str]]:
        return [["scontrol", "update", f"JobId={self.job_id}", f"Partition={self.partition}"]]


@dataclass(frozen=True)
class Comment:
    job_ids: tuple[str, ...]
    text: str

    def commands(self) -> list[list[str]]:
        return [["scontrol", "update", f"JobId={','.join(self.job_ids)}", f"Comment={self.text}"]]


@dataclass(frozen=True)
class Plan:
    starts: list[Start]
    moves: list[Move]
    comments: list[Comment]


def plan(resp: ScheduleResponse, view: SlurmView) -> Plan:
    """What to tell Slurm: starts, moves, and the comments that changed (one command per text)."""
    starts = [_start(s) for s in resp.starts]
    moves = [Move(m.job_id, m.to_queue) for m in resp.migrations]
    by_text: dict[str, list[str]] = {}
    for p in resp.pending:
        text = comment(p)
        if view.comments.get(p.job_id) != text:
            by_text.setdefault(text, []).append(p.job_id)
    comments = [Comment(tuple(ids[i:i + 100]), text)
                for text, ids in by_text.items() for i in range(0, len(ids), 100)]
    return Plan(starts, moves, comments)


def _start(s: StartOut) -> Start:
    return Start(s.job_id, tuple(s.node_ids), s.queue)


def comment(p: PendingOut) -> str:
    """The line a user reads in `squeue -O comment`: the reason and the estimated start (to the minute)."""
    when = "unknown"
    if p.estimated_start is not None:
        when = datetime.fromtimestamp(p.estimated_start, UTC).strftime("%Y-%m-%dT%H:%MZ")
    return f"{COMMENT_PREFIX}{p.reason.value}, est. start {when}"

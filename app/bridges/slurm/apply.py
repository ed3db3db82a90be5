"""A `ScheduleResponse` to Slurm commands.

A start pins the job to the chosen nodes and partition (`ReqNodeList`, `NumNodes=k-k`) and then
releases it, so Slurm can start it nowhere else; the CPUs Slurm will give it on each node are
predicted (`layout`), and a start whose layout does not fit beside the cycle's earlier starts is
deferred to the next cycle. A migration moves the job's partition; every pending or reserved
job's comment (`squeue -O comment`) says the service's reason and estimated start (a reserved
job: its start and nodes), rewritten only when it changes.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from app.bridges.slurm.layout import layout
from app.bridges.slurm.read import COMMENT_PREFIX, PINNED, STARTED, SlurmView
from schemas.schedule import PendingOut, ReservationOut, ScheduleResponse, StartOut


@dataclass(frozen=True)
class Start:
    job_id: str
    nodes: tuple[str, ...]
    partition: str
    layout: tuple[tuple[str, int], ...] = ()

    def pin(self) -> list[str]:
        """Only these nodes, exactly this many, in this partition (the release follows). No blank
        in it, so a cycle's pins go to one scontrol process (`started` comments them after)."""
        return ["scontrol", "update", f"JobId={self.job_id}", f"Partition={self.partition}",
                f"ReqNodeList={','.join(self.nodes)}", f"NumNodes={len(self.nodes)}-{len(self.nodes)}",
                f"Comment={PINNED}"]


def started(job_ids: list[str], notes: dict[str, str] | None = None) -> list[Comment]:
    """The comment of the jobs a cycle released: one text, so one command per 100 jobs (their
    nodes are Slurm's own NodeList); a job with a note (why the bridge held it again before this
    release) gets the note after it, in a command of its own."""
    notes = notes or {}
    plain = [j for j in job_ids if j not in notes]
    return [Comment(tuple(plain[i:i + 100]), STARTED) for i in range(0, len(plain), 100)] + \
        [Comment((j,), f"{STARTED}; {notes[j]}") for j in job_ids if j in notes]


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
    deferred: dict[str, str]


def plan(resp: ScheduleResponse, view: SlurmView, notes: dict[str, str] | None = None) -> Plan:
    """What to tell Slurm: starts (with their layouts; the ones that no longer fit deferred),
    moves, and the comments that changed (one command per text). `notes`: a line to add to some
    jobs' comments (why the bridge held a job again)."""
    starts, deferred = laid_out(resp.starts, view)
    moves = [Move(m.job_id, m.to_queue) for m in resp.migrations]
    texts = {p.job_id: comment(p) for p in resp.pending}
    texts.update({r.job_id: reserved(r) for r in resp.reservations})
    texts.update({j: f"{COMMENT_PREFIX}deferred: {why}" for j, why in deferred.items()})
    texts.update({j: f"{COMMENT_PREFIX}set aside: {why}" for j, why in view.aside.items()})
    for jid, note in (notes or {}).items():
        if jid in texts:
            texts[jid] += f"; {note}"
    return Plan(starts, moves, comments_for(texts, view.comments), deferred)


def comments_for(texts: dict[str, str], current: dict[str, str]) -> list[Comment]:
    by_text: dict[str, list[str]] = {}
    for jid, text in texts.items():
        if current.get(jid) != text:
            by_text.setdefault(text, []).append(jid)
    return [Comment(tuple(ids[i:i + 100]), text) for text, ids in by_text.items()
            for i in range(0, len(ids), 100)]


def laid_out(starts: list[StartOut], view: SlurmView) -> tuple[list[Start], dict[str, str]]:
    """Each start with the CPUs Slurm will give it per node, taken from the nodes' free CPUs in
    order; a start that no longer fits (an earlier start's block fill took more of a node than
    the service counted) is deferred with its reason."""
    free, asked = view.free_cpus(), {p["id"]: p for p in view.pending}
    caps = {n["id"]: n["capacity"]["cpu"] for n in view.nodes}
    out, deferred = [], {}
    for s in starts:
        got = _fit(s, asked.get(s.job_id), view, free, caps)
        if got is None:
            deferred[s.job_id] = (f"Slurm's layout of its CPUs does not fit {','.join(s.node_ids)} "
                                  "beside this cycle's other starts: decided again next cycle")
            continue
        for n, cpu in got.items():
            free[n] -= caps.get(n, cpu) if asked.get(s.job_id, {}).get("exclusive") else cpu
        out.append(Start(s.job_id, tuple(s.node_ids), s.queue, tuple(got.items())))
    return out, deferred


def _fit(s: StartOut, job: dict[str, Any] | None, view: SlurmView, free: dict[str, int],
         caps: dict[str, int]) -> dict[str, int] | None:
    if job is None:
        return {n: 0 for n in s.node_ids}
    if job.get("exclusive") and any(free.get(n, 0) < caps.get(n, 0) for n in s.node_ids):
        return None
    return layout(view.asks.get(s.job_id), job["cpu"], list(s.node_ids), view.order, free)


def comment(p: PendingOut) -> str:
    """The line a user reads in `squeue -O comment`: the reason and the estimated start (to the minute)."""
    when = "unknown"
    if p.estimated_start is not None:
        when = _minute(p.estimated_start)
    return f"{COMMENT_PREFIX}{p.reason.value}, est. start {when}"


def reserved(r: ReservationOut) -> str:
    """A reserved job's line: when and where the service holds its start."""
    return f"{COMMENT_PREFIX}reserved, starts by {_minute(r.start_time)} on {','.join(r.node_ids)}"


def _minute(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%MZ")

"""Shadow mode's table: the service's plan for each pending job beside Slurm's own (`squeue --start`)."""

from __future__ import annotations

from datetime import UTC, datetime

from rich.table import Table

from app import terminal
from schemas.schedule import ScheduleResponse


def slurm_starts(text: str) -> dict[str, str]:
    """`squeue --start -o '%i %S %N %r'` lines to job id -> 'start on nodes (reason)'."""
    out = {}
    for line in text.splitlines():
        bits = line.split()
        if len(bits) >= 2:
            out[bits[0]] = " ".join(bits[1:])
    return out


def _at(t: float | None) -> str:
    return "?" if t is None else datetime.fromtimestamp(t, UTC).strftime("%H:%M:%SZ")


def service_plan(resp: ScheduleResponse) -> dict[str, str]:
    """Job id -> what the service would do with it."""
    out = {s.job_id: f"{s.kind.value} now on {','.join(s.node_ids)}" for s in resp.starts}
    for r in resp.reservations:
        out[r.job_id] = f"reserved {_at(r.start_time)} on {','.join(r.node_ids)}"
    for p in resp.pending:
        out.setdefault(p.job_id, f"{p.reason.value}, est. {_at(p.estimated_start)}")
    for m in resp.migrations:
        out[m.job_id] = out.get(m.job_id, "") + f" (move {m.from_queue} -> {m.to_queue})"
    return out


def both_plans(resp: ScheduleResponse, slurm_text: str) -> dict[str, dict[str, str]]:
    """Job id -> {"hpcsched": the service's plan, "slurm": Slurm's own (`squeue --start`)}: what shadow
    mode's `--log` keeps each cycle, for every job either side plans."""
    ours, theirs = service_plan(resp), slurm_starts(slurm_text)
    return {j: {"hpcsched": ours.get(j, "-"), "slurm": theirs.get(j, "-")} for j in sorted({*ours, *theirs})}


def table(resp: ScheduleResponse, slurm_text: str, limit: int = 50) -> Table:
    ours, theirs = service_plan(resp), slurm_starts(slurm_text)
    t = terminal.table("job", "hpcsched would", "Slurm plans (squeue --start)",
                       title="shadow mode: nothing changed", numeric=False)
    for jid in sorted(ours, key=lambda j: (len(j), j))[:limit]:
        t.add_row(jid, ours[jid], theirs.get(jid, "-"))
    return t

"""Every released job Slurm has not started is accounted for at the start of each cycle.

- still held and marked, pinned: the bridge stopped between recording its release and releasing
  it; it is released again (it is pinned, so it can start nowhere else);
- still held and marked, not pinned: the release was never meant (the bridge stopped before
  pinning it): it is forgotten and decided again;
- released but not started `bound_s` after its release (pending on its pin, on an association or
  QOS limit, on a licence), or one of its pinned nodes down or drained (Slurm will not start it
  there): held again and unpinned, its nodes freed in the service's view, the reason kept for its
  comment and `explain`, and decided again.

And when the service refuses a request, `refused_jobs` names the pending jobs its errors point at.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from app.bridges.slurm.read import SlurmView

START_BOUND_S = 120.0


@dataclass
class Reconciled:
    release_again: list[str] = field(default_factory=list)
    never_pinned: list[str] = field(default_factory=list)
    overdue: dict[str, str] = field(default_factory=dict)


def reconcile(view: SlurmView, started: dict[str, float], bound_s: float) -> Reconciled:
    out = Reconciled()
    states = {n["id"]: n["state"] for n in view.nodes}
    for jid, r in view.released.items():
        if r.held and r.nodes:
            out.release_again.append(jid)
        elif r.held:
            out.never_pinned.append(jid)
        elif view.now - started[jid] > bound_s:
            where = ",".join(r.nodes) or "no pinned nodes"
            out.overdue[jid] = (f"released on {where} but not started by Slurm within {bound_s:.0f} s "
                                f"(Reason={r.reason or 'none'}): held again and decided again")
        elif lost := [n for n in r.nodes if states.get(n, "down") != "up"]:
            out.overdue[jid] = (f"released on {','.join(r.nodes)} but {','.join(lost)} went down or "
                                f"drained before Slurm started it (Reason={r.reason or 'none'}): "
                                "held again and decided again")
    return out


def hold(job_id: str) -> list[str]:
    return ["scontrol", "hold", job_id]


def unpin(job_id: str) -> list[str]:
    """Any node again (the node count the service chose stays)."""
    return ["scontrol", "update", f"JobId={job_id}", "ReqNodeList="]


def refused_jobs(details: list[dict[str, Any]], view: SlurmView) -> dict[str, str]:
    """Pending job id -> the service's reason, for each error whose loc is `body.pending.<i>...`."""
    out: dict[str, str] = {}
    for d in details:
        loc = list(d.get("loc") or [])
        if len(loc) >= 3 and loc[:2] == ["body", "pending"] and isinstance(loc[2], int) \
                and loc[2] < len(view.pending):
            field_ = ".".join(map(str, loc[3:])) or "job"
            out[view.pending[loc[2]]["id"]] = f"refused by the service ({field_}: {d.get('msg')})"
    return out

"""Set aside what one read cannot say consistently, so the rest of the cluster is still decided.

A node whose running jobs hold more than it has (a reconfigured node, a reading taken mid-change)
is drained in the service's view, its capacity raised to what is held; a released job whose
expected layout no longer fits its nodes is dropped from the running jobs and its nodes drained
(Slurm may still start it there); a pending job the wire refuses, or that asks for more nodes
than its partition has, is set aside with its reason (logged, and in its comment).
"""

from __future__ import annotations

import logging
from typing import Any

from pydantic import TypeAdapter, ValidationError

from app.bridges.slurm.read import SlurmView
from schemas.cluster import RunningJobIn
from schemas.schedule import PendingJobIn

log = logging.getLogger("hpcsched.slurm")
RES = ("cpu", "mem_mib", "gpu")
RUNNING = TypeAdapter(RunningJobIn)


def set_aside(view: SlurmView) -> dict[str, str]:
    """Make `view` consistent in place; returns what was set aside (job or node id -> reason)."""
    out: dict[str, str] = {}
    nodes = {n["id"]: n for n in view.nodes}
    _bad_running(view, nodes, out)
    held = _holdings([r for r in view.running if r["id"] not in view.released])
    for nid, amounts in held.items():
        _over(nodes[nid], amounts, out)
    _released_that_overflow(view, nodes, held, out)
    _bad_pending(view, out)
    for key, why in out.items():
        log.warning("set aside %s: %s", key, why)
    return out


def _holdings(running: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    held: dict[str, dict[str, int]] = {}
    for r in running:
        for a in r["allocation"]:
            acc = held.setdefault(a["node"], dict.fromkeys(RES, 0))
            for k in RES:
                acc[k] += a.get(k, 0)
    return held


def _over(node: dict[str, Any], amounts: dict[str, int], out: dict[str, str]) -> None:
    """Slurm's own allocations above the node's capacity: drain it, capacity raised to fit."""
    over = [f"{amounts[k]} {k} of {node['capacity'][k]}" for k in RES if amounts[k] > node["capacity"][k]]
    if over:
        node["capacity"] = {k: max(node["capacity"][k], amounts[k]) for k in RES}
        node["state"] = "drain"
        out[f"node {node['id']}"] = f"running jobs hold {', '.join(over)}: drained in the service's view"


def _released_that_overflow(view: SlurmView, nodes: dict[str, dict[str, Any]],
                            held: dict[str, dict[str, int]], out: dict[str, str]) -> None:
    keep = []
    for r in view.running:
        if r["id"] in view.released and not _fits(r, nodes, held):
            names = [a["node"] for a in r["allocation"]]
            for n in names:
                nodes[n]["state"] = "drain"
            out[r["id"]] = f"released to {','.join(names)} but no longer fits there: its nodes drained"
            continue
        keep.append(r)
    view.running = keep


def _fits(r: dict[str, Any], nodes: dict[str, dict[str, Any]], held: dict[str, dict[str, int]]) -> bool:
    """Whether a released job fits beside what is already held (then counted as held too)."""
    zero = dict.fromkeys(RES, 0)
    if any(held.get(a["node"], zero)[k] + a.get(k, 0) > nodes[a["node"]]["capacity"][k]
           for a in r["allocation"] for k in RES):
        return False
    for a in r["allocation"]:
        acc = held.setdefault(a["node"], dict(zero))
        for k in RES:
            acc[k] += a.get(k, 0)
    return True


def _bad_running(view: SlurmView, nodes: dict[str, dict[str, Any]], out: dict[str, str]) -> None:
    """Allocations on nodes Slurm did not list, or twice on one node, are dropped (logged); a
    running job the wire refuses drains its nodes."""
    keep = []
    for r in view.running:
        seen: set[str] = set()
        alloc = []
        for a in r["allocation"]:
            if a["node"] in nodes and a["node"] not in seen:
                seen.add(a["node"])
                alloc.append(a)
        if len(alloc) != len(r["allocation"]):
            out[r["id"]] = "an allocation on an unknown or repeated node: dropped"
        r["allocation"] = alloc
        try:
            RUNNING.validate_python(r)
            keep.append(r)
        except ValidationError as exc:
            for a in alloc:
                nodes[a["node"]]["state"] = "drain"
            out[r["id"]] = f"not readable ({_first(exc)}): its nodes drained"
    view.running = keep


def _bad_pending(view: SlurmView, out: dict[str, str]) -> None:
    running = {r["id"] for r in view.running}
    keep = []
    for p in view.pending:
        why = _pending_problem(p, view, running)
        if why:
            view.aside[p["id"]] = out[p["id"]] = why
            view.skipped[p["id"]] = why
        else:
            keep.append(p)
    view.pending = keep


def _pending_problem(p: dict[str, Any], view: SlurmView, running: set[str]) -> str:
    if p["id"] in running:
        return "listed both pending and running"
    try:
        PendingJobIn.model_validate(p)
    except ValidationError as exc:
        return f"a request the service cannot take ({_first(exc)})"
    members = view.partitions.get(p["queue"], [])
    if p["nodes"] > len(members):
        return f"asks for {p['nodes']} nodes; partition {p['queue']} has {len(members)}"
    return ""


def _first(exc: ValidationError) -> str:
    e = exc.errors()[0]
    return f"{'.'.join(map(str, e['loc']))}: {e['msg']}"

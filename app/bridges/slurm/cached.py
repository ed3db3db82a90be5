"""The cached path: keep the cluster in the service's cache (PUT once, then PATCH what changed
between two reads) and send only the pending jobs with the cluster's id.

A PATCH the service refuses as stale (409) or for a cluster it no longer has (404) is answered by a
fresh PUT, and so is a `POST /schedule` that finds the cluster gone or answers from a version that
is not the bridge's (the cycle asks again at once, see `cycle`); a change the PATCH vocabulary
cannot say (a node's capacity, partitions or features) also sends a PUT.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from app.bridges.slurm.read import SlurmView
from schemas.clusters import ClusterPatch, ClusterPut
from schemas.schedule import ScheduleRequest


class StaleCacheError(RuntimeError):
    """The cached cluster is not the version the bridge last wrote (or is gone)."""


class ClusterOps(Protocol):
    def put(self, cluster_id: str, body: ClusterPut) -> int: ...
    def patch(self, cluster_id: str, version: int, body: ClusterPatch) -> int: ...


@dataclass(frozen=True)
class Seen:
    """The cluster part of one read, by id."""

    nodes: dict[str, dict[str, Any]]
    running: dict[str, dict[str, Any]]
    windows: dict[str, dict[str, Any]]

    @classmethod
    def of(cls, view: SlurmView) -> Seen:
        return cls({n["id"]: n for n in view.nodes}, {r["id"]: r for r in view.running},
                   {w["id"]: w for w in view.windows})


def changes_between(old: Seen, new: Seen) -> list[dict[str, Any]] | None:
    """The PATCH changes from one read to the next; None when only a PUT can say them."""
    if old.nodes.keys() != new.nodes.keys():
        return None
    changes: list[dict[str, Any]] = []
    for nid, node in new.nodes.items():
        before = old.nodes[nid]
        if {**before, "state": node["state"], "cpu_load": node["cpu_load"]} != node:
            return None
        if before["state"] != node["state"]:
            changes.append({"op": "node_state", "node_id": nid, "state": node["state"]})
    changes += _replaced(old.running, new.running, "job_ended", "job_id", "job_started", "job")
    changes += _replaced(old.windows, new.windows, "window_removed", "window_id", "window_added", "window")
    return changes


def _replaced(old: dict[str, dict[str, Any]], new: dict[str, dict[str, Any]], gone_op: str,
              gone_key: str, came_op: str, came_key: str) -> list[dict[str, Any]]:
    gone = [k for k, v in old.items() if new.get(k) != v]
    came = [k for k, v in new.items() if old.get(k) != v]
    return [{"op": gone_op, gone_key: k} for k in gone] + [{"op": came_op, came_key: new[k]} for k in came]


@dataclass
class CachedCluster:
    ops: ClusterOps
    cluster_id: str
    version: int | None = None
    seen: Seen | None = None
    last_write: str = ""

    def request(self, view: SlurmView, policy: dict[str, Any] | None) -> ScheduleRequest:
        """Bring the cached cluster up to this read, then the request naming it."""
        self.sync(view)
        body: dict[str, Any] = {"now": view.now, "cluster_id": self.cluster_id, "pending": view.pending}
        if policy is not None:
            body["policy"] = policy
        return ScheduleRequest.model_validate(body)

    def forget(self) -> None:
        """The service lost the cluster (or answered from another version): PUT it next time."""
        self.version, self.seen = None, None

    def sync(self, view: SlurmView) -> None:
        new = Seen.of(view)
        changes = None if self.seen is None or self.version is None else changes_between(self.seen, new)
        self.seen = None  # until this write is known to have landed
        if changes is None:
            self._put(new)
        elif changes:
            try:
                self.version = self.ops.patch(self.cluster_id, self.version or 0,
                                              ClusterPatch.model_validate({"changes": changes}))
                self.last_write = f"patch ({len(changes)} changes)"
            except StaleCacheError:
                self._put(new)
        else:
            self.last_write = "unchanged"
        self.seen = new

    def _put(self, new: Seen) -> None:
        body = ClusterPut.model_validate({"nodes": list(new.nodes.values()),
                                          "running": list(new.running.values()),
                                          "windows": list(new.windows.values())})
        self.version = self.ops.put(self.cluster_id, body)
        self.last_write = "put"

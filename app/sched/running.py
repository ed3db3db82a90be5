"""The running jobs of a snapshot as columns, their records made only for a caller that reads them.

POST /schedule reads ~60,000 running jobs on a 10,000-node snapshot; the pass needs only what each
holds on each node and until when (`NodeColumns.held`), which these columns give without a record
per job. A caller that iterates (dynamic migration, the reference pass, the cluster cache) gets the
same `RunningJob` records the wire would have made, built once on first use.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from app.sched.model import RunningJob
from app.sched.records import LazyRecords

Held = tuple[np.ndarray, np.ndarray, np.ndarray]  # node indices, end times, (3, R) amounts


class RunningColumns(LazyRecords[RunningJob]):
    """Running jobs as arrays: job j holds, for each entry a in first[j]:first[j + 1], amounts[a]
    (cpu, mem_mib, gpu) on node node_ids[node_of[a]], from start[j] for walltime[j] seconds.
    `names()` gives (ids, queues), read only when records are wanted."""

    __slots__ = ("node_ids", "first", "node_of", "amounts", "start", "walltime", "migrated", "_names")

    def __init__(self, node_ids: Sequence[str], first: np.ndarray, node_of: np.ndarray,
                 amounts: np.ndarray, start: np.ndarray, walltime: np.ndarray, migrated: np.ndarray,
                 names: Callable[[], tuple[list[str], list[str]]]) -> None:
        self.node_ids, self.first, self.node_of, self.amounts = node_ids, first, node_of, amounts
        self.start, self.walltime, self.migrated = start, walltime, migrated
        self._names = names
        self._records: tuple[RunningJob, ...] | None = None

    def __len__(self) -> int:
        return len(self.start)

    def _make_records(self) -> tuple[RunningJob, ...]:
        ids, queues = self._names()
        names = self.node_ids
        nodes = [names[x] for x in self.node_of.tolist()]
        amounts = [tuple(a) for a in self.amounts.tolist()]
        first = self.first.tolist()
        return tuple([
            RunningJob(jid, queue, tuple(zip(nodes[a:b], amounts[a:b], strict=True)), start, wall, moved)
            for jid, queue, a, b, start, wall, moved in zip(
                ids, queues, first[:-1], first[1:], self.start.tolist(), self.walltime.tolist(),
                self.migrated.tolist(), strict=True)])

    def held(self, pos: dict[str, int]) -> Held:
        """`NodeColumns.held` for nodes placed at `pos` (by id): an entry per job and node it holds,
        in the order the records list them; nodes `pos` lacks are left out."""
        get = pos.get
        where = np.array([get(nid, -1) for nid in self.node_ids], dtype=np.int64)
        xs = where[self.node_of]
        ends = np.repeat(self.start + self.walltime, np.diff(self.first))
        if len(xs) and xs.min() < 0:
            keep = xs >= 0
            return xs[keep], ends[keep], self.amounts[keep].T
        return xs, ends, self.amounts.copy().T  # a copy: the pass may change its own

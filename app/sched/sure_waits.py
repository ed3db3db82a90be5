"""The jobs of a pass that can surely only wait, found for many at once (docs/methods.md §1).

While no promise is given back, a pass only takes room: starts take free resources, bookings take
later ones, nothing returns. So once a job's queue has made every reservation its depth allows
(a count that only grows), `_one` can do nothing with the job but start it or make it wait, and:

- if fewer than n of its eligible nodes have its demand free at its turn, it waits for resources
  (or because its queue is over its load threshold), as long as n of them that are up could hold it
  (else it never fits, or its nodes are down, which `_one` reports);
- else, if fewer than n of those nodes hold the demand from now until the job would end, as counted
  at some earlier point of the pass (a count that can only have fallen since), it would delay a
  booking: it waits, blocked by a reservation.

Free resources change only when a job starts, so they are counted again after each start; the
nodes clear until each job's end are counted when a queue becomes full. The pass answers every such
job in one step and looks at the others one by one (`BackfillPass._each`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from app.sched.cluster import ClusterIndex, Eligible
from app.sched.model import Job
from app.sched.timeline import INF, Profile, release_times

Triple = tuple[int, int, int]
UNCOUNTED = np.iinfo(np.int64).max  # clear nodes of a job not counted yet: no bound


def _nodes(job: Job) -> int:
    return job.nodes


def _walltime(job: Job) -> float:
    return job.walltime_s


class Room(Protocol):
    """What a pass knows of its bookings (`BackfillPass`): per node, the start of its earliest
    booking (None: nothing booked) and the room that booking leaves of the node's capacity."""

    profile: Profile
    take_start: np.ndarray | None
    room: np.ndarray


@dataclass(slots=True)
class SureWaits:
    """Per job of a pass (in its order): its shape (queue, labels, demand) and release; per shape,
    how many nodes have the demand free, as last counted."""

    nodes: np.ndarray  # n per job
    shape_of: np.ndarray  # per job, its shape's position in `shapes`; -1 for a whole-node job
    queue_of: np.ndarray  # per job, its queue's position in `queues` (past them: a whole-node job)
    release: np.ndarray  # per job, when it would end if it started now (grain-aligned)
    queues: list[str]
    shapes: list[tuple[Eligible, Triple]]
    holds_up: np.ndarray  # per shape: usable eligible nodes with the capacity for its demand
    free: np.ndarray  # per shape: eligible nodes with its demand free now, as last counted
    # (holds_up and free have one more entry, for shape -1)
    clear: np.ndarray  # per job: nodes clear of bookings until its release, as last counted

    @classmethod
    def of(cls, jobs: Sequence[Job], cluster: ClusterIndex, profile: Profile,
           holds_up: Callable[[Eligible, Triple], int]) -> SureWaits:
        """`holds_up(elig, d)`: how many usable eligible nodes have the capacity for d."""
        codes: dict[tuple[str, frozenset[str], int, int, int], int] = {}
        found = [-1 if job.exclusive  # a whole-node job is looked at on its own (`_one_whole`)
                 else codes.setdefault((job.queue, job.labels, job.cpu, job.mem_mib, job.gpu), len(codes))
                 for job in jobs]
        shapes = [(cluster.eligible(q, labels), (c, m, g)) for q, labels, c, m, g in codes]
        queues = list(dict.fromkeys(q for q, *_ in codes))
        # one more entry per shape array, for the whole-node jobs' shape -1: none is answered here
        queue_of_shape = np.array([queues.index(q) for q, *_ in codes] + [len(queues)], dtype=np.int64)
        shape_of = np.array(found, dtype=np.int64)
        count = len(jobs)
        nodes = np.fromiter(map(_nodes, jobs), dtype=np.int64, count=count)
        ends = np.fromiter(map(_walltime, jobs), dtype=np.float64, count=count)
        release = release_times(profile.now + ends, profile.now, profile.grain)
        up = np.array([holds_up(elig, d) for elig, d in shapes] + [0], dtype=np.int64)
        waits = cls(nodes, shape_of, queue_of_shape[shape_of], release, queues, shapes, up,
                    np.zeros(len(shapes) + 1, dtype=np.int64), np.full(count, UNCOUNTED, dtype=np.int64))
        waits.count_free(profile)
        return waits

    def full(self, is_full: Callable[[str], bool]) -> np.ndarray:
        """Per queue, whether it made every reservation its depth allows (and False past them)."""
        return np.array([is_full(q) for q in self.queues] + [False], dtype=bool)

    def keys(self) -> set[tuple[str, frozenset[str]]]:
        return {elig.key for elig, _ in self.shapes}

    def count_free(self, profile: Profile) -> None:
        """Count again, per shape, the eligible nodes with its demand free now."""
        counts = [int(np.count_nonzero(profile.fits_now(elig, d))) for elig, d in self.shapes]
        self.free = np.array(counts + [0], dtype=np.int64)

    def count_clear(self, room: Room, full: np.ndarray, start: int) -> None:
        """Per job from `start` on in a full queue, count at most how many of the eligible nodes
        with its demand free now hold it until its release: all but those whose earliest booking
        (`room`: its start per node, and the room it leaves) leaves too little, from before then."""
        later = np.zeros(len(self.nodes), dtype=bool)
        later[start:] = True
        for s, (elig, d) in enumerate(self.shapes):
            mine = np.flatnonzero(later & (self.shape_of == s) & full[self.queue_of])
            if not len(mine):
                continue
            cand = elig.nodes(np.flatnonzero(room.profile.fits_now(elig, d)))
            until = np.full(len(cand), INF)
            if room.take_start is not None:
                short = (room.room[:, cand] < np.array(d, dtype=np.int64)[:, None]).any(axis=0)
                until[short] = room.take_start[cand[short]]
            until.sort()
            self.clear[mine] = len(until) - np.searchsorted(until, self.release[mine], side="left")

    def to_look_at(self, full: np.ndarray, start: int) -> list[int]:
        """The positions from `start` on of the jobs not surely waiting (`full`: per queue, whether
        it made every reservation it may): those the pass looks at."""
        s = self.shape_of[start:]
        n = self.nodes[start:]
        sure = (s >= 0) & full[self.queue_of[start:]]
        sure &= n <= self.holds_up[s]
        sure &= (n > self.free[s]) | (n > self.clear[start:])
        return (np.flatnonzero(~sure) + start).tolist()

    def short_of_free(self, lo: int, hi: int) -> list[bool]:
        """For the jobs at positions lo..hi-1 (surely waiting): whether they lack free room (else
        they would delay a booking)."""
        return (self.nodes[lo:hi] > self.free[self.shape_of[lo:hi]]).tolist()

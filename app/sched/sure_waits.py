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

Free resources change only when a job starts, and only on its nodes: the per-shape counts are made
once for all shapes of an eligible set (a sweep and a Fenwick tree, `count_covering`, not shapes x
nodes), then after each start only that start's nodes are compared with the shapes that still have
a job ahead (`update`). The nodes clear until each job's end are counted when a queue becomes full,
from the booked nodes alone (`count_clear`). The pass answers every such job in one step and looks
at the others one by one (`BackfillPass._each`), with or without a budget (`Budget.grant`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from app.sched import profile_kernels as kernels
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
    how many nodes have the demand free, kept exact as the pass starts jobs."""

    nodes: np.ndarray  # n per job
    shape_of: np.ndarray  # per job, its shape's position in `shapes`; -1 for a whole-node job
    queue_of: np.ndarray  # per job, its queue's position in `queues` (past them: a whole-node job)
    release: np.ndarray  # per job, when it would end if it started now (grain-aligned)
    queues: list[str]
    shapes: list[tuple[Eligible, Triple]]
    holds_up: np.ndarray  # per shape: usable eligible nodes with the capacity for its demand
    free: np.ndarray  # per shape: eligible nodes with its demand free now (exact after `update`)
    # (holds_up and free have one more entry, for shape -1)
    clear: np.ndarray  # per job: nodes clear of bookings until its release, as last counted
    kinds: Kinds  # the shapes as arrays, by eligible set
    seen: np.ndarray  # (3, N): each node's free resources as `free` counted them
    read: int  # how many of the profile's `shrunk` entries `free` has counted

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
        seen = np.array(profile.free, dtype=np.int64)
        profile.rows_read += seen.shape[1]
        waits = cls(nodes, shape_of, queue_of_shape[shape_of], release, queues, shapes, up,
                    np.zeros(len(shapes) + 1, dtype=np.int64), np.full(count, UNCOUNTED, dtype=np.int64),
                    Kinds.of(shapes, shape_of, len(cluster)), seen, len(profile.shrunk))
        waits.count_free(profile)
        return waits

    def full(self, is_full: Callable[[str], bool]) -> np.ndarray:
        """Per queue, whether it made every reservation its depth allows (and False past them)."""
        return np.array([is_full(q) for q in self.queues] + [False], dtype=bool)

    def keys(self) -> set[tuple[str, frozenset[str]]]:
        return {elig.key for elig, _ in self.shapes}

    def count_free(self, profile: Profile) -> None:
        """Count, per shape, the eligible nodes with its demand free (as `seen` has them), all
        shapes of an eligible set at once (`count_covering`: not shapes x nodes)."""
        k = self.kinds
        for g, elig in enumerate(k.eligs):
            which = np.flatnonzero(k.group_of == g)
            self.free[which] = count_covering(elig.take_columns(self.seen), k.need[:, which])
            profile.rows_read += elig.size()

    def update(self, profile: Profile, pos: int) -> None:
        """Bring `free` up to date with the jobs started since it was counted: only the nodes they
        took are compared, with the shapes that still have a job at `pos` or later and a node free
        (free resources only shrink in a pass, so a node that no longer meets a demand it met is one
        fewer for that shape, and no shape gains one)."""
        k = self.kinds
        cpu, mem, gpu = profile.free
        for xs in profile.shrunk[self.read:]:  # one start's nodes each (distinct)
            profile.rows_read += len(xs)
            k.settled_met += kernels.lose_covered(self.free[:-1], k.need, k.orders, k.values, k.group_start,
                                                  k.member, k.last_job, pos, xs, self.seen, cpu, mem, gpu)
        self.read = len(profile.shrunk)
        if k.settled_met > 4 * k.orders.shape[1]:  # 4 wasted looks per shape listed: drop the settled
            k.keep((self.free[:-1] > 0) & (k.last_job >= pos))

    def count_clear(self, room: Room, full: np.ndarray, start: int) -> None:
        """Per job from `start` on in a full queue, count at most how many of the eligible nodes
        with its demand free now hold it until its release: all but those whose earliest booking
        (`room`: its start per node, and the room it leaves) leaves too little, from before then.
        Only booked nodes can leave too little: each shape looks at those alone."""
        s = self.shape_of[start:]
        mine = np.flatnonzero((s >= 0) & full[self.queue_of[start:]]) + start
        if not len(mine):
            return
        self.clear[mine] = self.free[self.shape_of[mine]]
        if room.take_start is None:
            return
        booked = np.flatnonzero(room.take_start < INF)
        mine = mine[np.argsort(self.shape_of[mine], kind="stable")]
        short = np.zeros(len(self.nodes), dtype=np.int64)
        k = self.kinds
        room.profile.rows_read += len(room.take_start) + kernels.short_before(
            mine, self.shape_of, self.release, booked, room.take_start, room.room, self.seen, k.need,
            k.demand, k.group_of, k.member, short)
        self.clear[mine] -= short[mine]

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


@dataclass(slots=True)
class Kinds:
    """The shapes of a pass as arrays for the compiled counts: per shape its eligible set's
    position in `eligs`, its thresholds as `Profile.fits_now` compares them and its demand, and the
    position of its last job; per eligible set, which nodes are in it."""

    eligs: list[Eligible]
    group_of: np.ndarray  # (S,)
    need: np.ndarray  # (3, S) thresholds (NO_CHECK: not compared)
    demand: np.ndarray  # (3, S)
    member: np.ndarray  # (G, N) bool
    last_job: np.ndarray  # (S,) the position of the shape's last job in the pass
    orders: np.ndarray  # (3, S) per resource, the shapes by group, then their threshold on it
    values: np.ndarray  # (3, S) those thresholds, in that order
    group_start: np.ndarray  # (G + 1,) where each group's shapes begin in `orders`
    settled_met: int = 0  # settled shapes `update` met in `orders` since they were last made

    @classmethod
    def of(cls, shapes: Sequence[tuple[Eligible, Triple]], shape_of: np.ndarray, n_nodes: int) -> Kinds:
        keys: dict[tuple[str, frozenset[str]], int] = {}
        eligs: list[Eligible] = []
        for elig, _ in shapes:
            if elig.key not in keys:
                keys[elig.key] = len(eligs)
                eligs.append(elig)
        group_of = np.array([keys[elig.key] for elig, _ in shapes], dtype=np.int64)
        member = np.zeros((len(eligs), n_nodes), dtype=bool)
        for g, elig in enumerate(eligs):
            member[g, elig.nodes(np.arange(elig.size()))] = True
        demands = [d for _, d in shapes]
        last_job = np.full(len(shapes), -1, dtype=np.int64)
        on = shape_of >= 0
        np.maximum.at(last_job, shape_of[on], np.flatnonzero(on))
        raw = np.array(demands, dtype=np.int64).reshape(-1, 3).T.copy()
        need = _thresholds(demands)
        kinds = cls(eligs, group_of, need, raw, member, last_job, *_orders(need, group_of, len(eligs)))
        return kinds

    def keep(self, live: np.ndarray) -> None:
        """List in `orders` only the shapes `live` says (a settled shape's count changes nothing
        any more: it has no job left, or no node with its demand free, and free only shrinks)."""
        which = np.flatnonzero(live)
        orders, values, self.group_start = _orders(self.need[:, which], self.group_of[which], len(self.eligs))
        self.orders, self.values = which[orders], values
        self.settled_met = 0


def _orders(need: np.ndarray, group_of: np.ndarray, groups: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per resource, the shapes (positions in `need`'s columns) by group, then threshold; those
    thresholds; where each group begins."""
    orders = np.array([np.lexsort((need[r], group_of)) for r in range(3)], dtype=np.int64).reshape(3, -1)
    values = np.array([need[r, orders[r]] for r in range(3)], dtype=np.int64).reshape(3, -1)
    return orders, values, np.searchsorted(np.sort(group_of), np.arange(groups + 1))


NO_CHECK = np.iinfo(np.int64).min  # a threshold every amount meets: a resource not compared
GRID_CELLS_PER_ITEM = 8  # `count_covering`'s tree may have this many cells per point and query


def _thresholds(demands: Sequence[Triple]) -> np.ndarray:
    """(3, S): what each demand needs of each resource, as `Profile.fits_now` compares it (cpu
    always; memory and gpu only when asked for)."""
    need = np.array(demands, dtype=np.int64).reshape(-1, 3).T.copy()
    need[1:][need[1:] == 0] = NO_CHECK
    return need


def _covers(free: np.ndarray, need: np.ndarray) -> np.ndarray:
    """(S, M): whether node column m of `free` (3, M) covers threshold column s of `need` (3, S)."""
    return (free[:, None, :] >= need[:, :, None]).all(axis=0)


def count_covering(free: np.ndarray, need: np.ndarray) -> np.ndarray:
    """Per threshold column of `need` (3, S), how many columns of `free` (3, M) meet it on every
    resource: a sweep down the resource with the most distinct amounts, and a Fenwick tree over the
    ranks of the other two (`kernels.dominance_counts`), O((M + S) log^2). A tree would outgrow
    GRID_CELLS_PER_ITEM cells per point and query only when two resources both have many distinct
    free amounts (not so for cpu counts and gpus); then the columns are compared directly."""
    m, s = free.shape[1], need.shape[1]
    if m == 0 or s == 0:
        return np.zeros(s, dtype=np.int64)
    values = [np.unique(free[r]) for r in range(3)]
    a, b, c = sorted(range(3), key=lambda r: -len(values[r]))
    nb, nc = len(values[b]), len(values[c])
    if (nb + 1) * (nc + 1) > GRID_CELLS_PER_ITEM * (m + s) + 4096:
        return np.concatenate([_covers(free, need[:, lo:lo + 256]).sum(axis=1)
                               for lo in range(0, s, 256)]).astype(np.int64)
    p_order = np.argsort(free[a])[::-1]  # descending (not by negating: NO_CHECK has no negative)
    q_order = np.argsort(need[a])[::-1]
    # ranks counted from the largest amount, so "at least the threshold" is a prefix of ranks
    pb = nb - 1 - np.searchsorted(values[b], free[b, p_order])
    pc = nc - 1 - np.searchsorted(values[c], free[c, p_order])
    qb = nb - 1 - np.searchsorted(values[b], need[b, q_order], side="left")
    qc = nc - 1 - np.searchsorted(values[c], need[c, q_order], side="left")
    counts = kernels.dominance_counts(free[a, p_order], pb, pc, nb, nc, need[a, q_order], qb, qc)
    out = np.empty(s, dtype=np.int64)
    out[q_order] = counts
    return out

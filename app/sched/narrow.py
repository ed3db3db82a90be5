"""Which nodes a pass looks at when the cluster is indexed (docs/methods.md §5): never the whole cluster.

Pending jobs are grouped in classes (queue, partitions searched, per-node demand; jobs whose memory
falls in the same power of two, the index's own resolution, share a class that looks for the
largest). For every class the index gives the members of the matching label partitions, lowest
fragment score first, bucket by bucket from the smallest bucket that can hold the demand; members
are taken until the nodes found can hold the class's jobs (with some slack, since classes share
nodes); the lightest node weight is taken first. A class of whole-node (exclusive) jobs is looked
for among the idle nodes instead, lowest weight first, as the full scan takes them, as many as the
pass's whole-node jobs need in all. For reservations, the nodes of the running jobs that end first
in each queue are added. The pass then runs on those nodes only.

Every sorted set is read once, page after page, as far as some class needed it: a class looks at
the members already read (their room left, in arrays) in one array operation, and pages on from
where the set was read to. Pages and records are read in proportion to the members read, the rest
of the work to the classes and the nodes they take; no class walks again what others took.

Pure: the index is reached through `Source`, which a store implements.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import zip_longest
from operator import attrgetter
from typing import Protocol

import numpy as np

from app.sched.model import Job, Node, NodeState, Triple
from app.sched.partitions import (
    PartitionRules,
    bucket_floor,
    idle_label,
    is_idle,
    may_hold,
    search_labels,
    surely_holds,
)

Bucket = tuple[int, int, int]
Place = tuple[int, Bucket]  # a sorted set of a partition: (node weight, capacity bucket)


class Source(Protocol):
    def buckets(self, queue: str, label: str) -> list[Place]: ...
    def pages(self, asks: list[tuple[str, str, Place, int, int]]) -> list[list[str]]:
        """For each (queue, label, (weight, bucket), start, count): member node ids, lowest score
        first."""
    def nodes(self, ids: list[str]) -> dict[str, Node]: ...
    def ending_first(self, queue: str, start: int, count: int) -> list[tuple[str, list[str]]]:
        """Running jobs of the queue in order of expected end: (job id, its node ids)."""
    def idle(self, queue: str, label: str, start: int, count: int) -> list[str]:
        """Members start..start+count-1 of the queue's idle nodes with the label (`ALL`: every
        one), lowest weight first, then by id."""


@dataclass(frozen=True, slots=True)
class NarrowRules:
    page: int = 64  # members taken from a sorted set at a time, at most
    slack: float = 1.0  # room looked for, relative to what a class's jobs need (room is shared out)
    class_reads: int = 16  # node records a class may read beyond twice its widest job's nodes
    reserve_nodes: int = 16  # nodes of the first-ending jobs added per queue, at least
    reserve_all: bool = False  # conservative: also a node per node-slot the free nodes lack
    max_nodes: int = 4096  # nodes one pass may look at (records read or nodes chosen), at most
    partitions: PartitionRules = PartitionRules()


@dataclass(frozen=True, slots=True)
class DemandClass:
    queue: str
    labels: frozenset[str]  # required labels (the constraint)
    search: tuple[str, ...]  # partitions searched
    demand: Triple  # the largest per-node demand of its jobs
    slots: int  # node-slots its jobs need in all
    widest: int  # the most nodes one of its jobs needs
    exclusive: bool = False  # whole nodes: looked for among the idle ones
    shapes: int = 1  # distinct per-node demands it stands for
    widths: int = 1  # the sum over those of their widest job's nodes


@dataclass(slots=True)
class Narrowed:
    found: dict[str, Node] = field(default_factory=dict)  # every node record read
    chosen: set[str] = field(default_factory=set)  # the nodes the pass will see

    @property
    def examined(self) -> int:
        return len(self.found)


_shape = attrgetter("queue", "labels", "cpu", "mem_mib", "gpu", "exclusive")  # a job's distinct shape


def classes(jobs: Iterable[Job], queues: Sequence[str] | None, rules: PartitionRules) -> list[DemandClass]:
    """Jobs grouped by what they search for; with `queues`, each job is looked for in every queue
    listed (queue migration may move it), else in its own. Jobs that differ only in memory, within
    the same power of two, share a class looking for the largest: the index's buckets cannot tell
    those demands apart (but where a node is borderline), and thousands of distinct memory demands
    would otherwise be thousands of classes. Whole-node jobs are grouped by their exact demand (each
    must find the nodes the full scan gives it)."""
    # first each distinct shape once: its first job, node-slots and widest job (jobs far outnumber shapes)
    tally: dict[tuple, list] = {}  # type: ignore[type-arg]
    for job in jobs:
        got = tally.get(key := _shape(job))
        if got is None:
            tally[key] = [job, job.nodes, job.nodes]
        else:
            got[1] += job.nodes
            if job.nodes > got[2]:
                got[2] = job.nodes
    shapes: dict[tuple, dict[Triple, int]] = defaultdict(dict)  # type: ignore[type-arg]
    slots: dict[tuple, int] = defaultdict(int)  # type: ignore[type-arg]
    for (queue, labels, cpu, mem, gpu, exclusive), (job, count, most) in tally.items():
        search = (idle_label(job),) if exclusive else search_labels(job, rules)
        size = mem if exclusive else mem.bit_length()
        demand = (cpu, mem, gpu)
        for q in queues if queues is not None else (queue,):
            key = (q, labels, search, cpu, size, gpu, exclusive)
            slots[key] += count
            widest = shapes[key]
            if widest.get(demand, -1) < most:
                widest[demand] = most
    return [_merged(key, slots[key], shapes[key]) for key in sorted(slots, key=repr)]


def _merged(key: tuple, slots: int, widest: dict[Triple, int]) -> DemandClass:  # type: ignore[type-arg]
    q, labels, search, cpu, _, gpu, exclusive = key
    mem = max(d[1] for d in widest)
    return DemandClass(q, labels, search, (cpu, mem, gpu), slots, max(widest.values()), exclusive,
                       len(widest), sum(widest.values()))


def narrow(source: Source, jobs: Sequence[Job], rules: NarrowRules = NarrowRules(),
           queues: Sequence[str] | None = None) -> Narrowed:
    """The nodes a pass over `jobs` should see, found through the index."""
    out = Narrowed()
    found = classes(jobs, queues, rules.partitions)
    widest: dict[str, int] = defaultdict(int)
    for c in found:
        widest[c.queue] = max(widest[c.queue], c.widest)
    known = _Known(source, out, sorted(widest), {c.labels for c in found if c.labels})
    # the classes leave room under `max_nodes` for the nodes where reservations go
    kept = min(rules.max_nodes // 2, sum(rules.reserve_nodes + w for w in widest.values()))
    known.limit = rules.max_nodes - kept
    sets = _Sets(source, known, rules)
    wanted: dict[str, int] = defaultdict(lambda: rules.reserve_nodes)
    whole = sum(c.slots for c in found if c.exclusive)
    for c in _taking_turns(found):
        if c.exclusive:
            short = _fill_idle(sets, c, max(whole, math.ceil(c.slots * rules.slack)), rules)
        else:
            short = _fill(sets, c, rules)
        if rules.reserve_all:
            wanted[c.queue] += short
    known.limit = rules.max_nodes
    for q in sorted(widest):
        _first_to_free(known, q, wanted[q] + widest[q], rules)
    promised = known.add(sorted({n for j in jobs for n in j.promise_nodes}))
    known.chosen[promised] = True
    known.read(np.flatnonzero(known.chosen[:known.n]), limited=False)
    out.chosen = {known.ids[s] for s in np.flatnonzero(known.chosen[:known.n] & known.exists[:known.n])}
    return out


def _taking_turns(found: list[DemandClass]) -> list[DemandClass]:
    """The classes, each queue's in turn (its first, then every queue's second, ...): when
    `max_nodes` is reached, every queue has had its share of the nodes, not the first by name."""
    turns: dict[str, list[DemandClass]] = defaultdict(list)
    for c in found:
        turns[c.queue].append(c)
    return [c for row in zip_longest(*turns.values()) for c in row if c is not None]


class _Known:
    """What the narrowing knows of each node it met, by slot: its free resources (its record's, else
    the least its bucket holds), what the classes took of them, whether its record was read (and
    the node exists, is up, serves each queue, has each label set), whether it is chosen. `count`:
    nodes read or chosen, held under `limit`."""

    def __init__(self, source: Source, out: Narrowed, queues: list[str],
                 label_sets: set[frozenset[str]]) -> None:
        self.source, self.out = source, out
        self.slot: dict[str, int] = {}
        self.ids: list[str] = []
        self.n = self.count = 0
        self.limit = 0
        size = 256
        self.free = np.zeros((size, 3), np.int64)
        self.taken = np.zeros((size, 3), np.int64)
        self.cap = np.zeros((size, 3), np.int64)
        self.read_ = np.zeros(size, bool)
        self.exists = np.zeros(size, bool)  # its record was there
        self.up = np.zeros(size, bool)
        self.idle = np.zeros(size, bool)
        self.chosen = np.zeros(size, bool)
        self.serves = {q: np.zeros(size, bool) for q in queues}
        self.has = {labels: np.zeros(size, bool) for labels in label_sets}

    def full(self) -> bool:
        return self.count >= self.limit

    def add(self, ids: list[str], floor: list[int] | None = None) -> np.ndarray:
        """The slots of `ids`, met for the first time (with `floor` as free resources) or again."""
        new = [nid for nid in dict.fromkeys(ids) if nid not in self.slot]
        if self.n + len(new) > len(self.free):
            self._grow(self.n + len(new))
        for nid in new:
            self.slot[nid] = self.n
            self.ids.append(nid)
            self.n += 1
        slots = np.fromiter((self.slot[nid] for nid in ids), np.int64, len(ids))
        if floor is not None:
            self.free[slots[~self.read_[slots]]] = floor
        return slots

    def _grow(self, n: int) -> None:
        size = max(n, 2 * len(self.free))
        for name in ("free", "taken", "cap", "read_", "exists", "up", "idle", "chosen"):
            setattr(self, name, _grown(getattr(self, name), size))
        for cols in (self.serves, self.has):
            for key in cols:
                cols[key] = _grown(cols[key], size)

    def read(self, slots: np.ndarray, limited: bool = True) -> int:
        """Read the records of `slots` not read yet (within `limit` unless told); answers how many."""
        todo = slots[~self.read_[slots]]
        if limited:
            todo = todo[:max(0, self.limit - self.count)]
        if not len(todo):
            return 0
        self.count += int((~self.chosen[todo]).sum())
        self.read_[todo] = True
        ids = [self.ids[s] for s in todo.tolist()]
        recs = self.source.nodes(ids)
        self.out.found.update(recs)
        for nid, node in recs.items():
            self._know(self.slot[nid], node)
        return len(todo)

    def _know(self, s: int, node: Node) -> None:
        self.free[s] = [node.cap[r] - node.alloc[r] for r in range(3)]
        self.cap[s] = node.cap
        self.exists[s] = True
        self.up[s] = node.state == NodeState.UP
        self.idle[s] = is_idle(node)
        for q, col in self.serves.items():
            col[s] = q in node.serves
        for labels, col in self.has.items():
            col[s] = labels <= node.labels

    def choose(self, slots: np.ndarray) -> np.ndarray:
        """Choose `slots`, in order, as far as `limit` allows new ones; answers those chosen."""
        new = ~self.chosen[slots]
        unread = new & ~self.read_[slots]
        keep = ~unread | (np.cumsum(unread) <= self.limit - self.count)
        picked = slots[keep]
        self.count += int(unread[keep].sum())
        self.chosen[picked] = True
        return picked

    def choose_one(self, s: int) -> bool:
        """Choose slot `s` unless it is a new node beyond `limit`; answers whether it is chosen."""
        if not self.chosen[s]:
            if not self.read_[s]:
                if self.count >= self.limit:
                    return False
                self.count += 1
            self.chosen[s] = True
        return True

    def counts(self, slots: np.ndarray, c: DemandClass) -> np.ndarray:
        """How many of the class's per-node demands each node's room holds."""
        d = np.asarray(c.demand, np.int64)
        some = d > 0
        if not some.any():
            return np.full(len(slots), c.slots, np.int64)
        room = self.free[slots][:, some] - self.taken[slots][:, some]
        return np.maximum(0, (room // d[some]).min(axis=1))

    def eligible(self, slots: np.ndarray, c: DemandClass) -> np.ndarray:
        """Read and up, serving the class's queue, with its labels (a node not read: true)."""
        ok = self.up[slots] & self.serves[c.queue][slots]
        if c.labels:
            ok &= self.has[c.labels][slots]
        return ok | ~self.read_[slots]


def _grown(a: np.ndarray, size: int) -> np.ndarray:
    b = np.zeros((size, *a.shape[1:]), a.dtype)
    b[:len(a)] = a
    return b


class _Members:
    """A sorted set's members read so far, in order, as slots; `ended` once read to its end."""

    def __init__(self) -> None:
        self.slots = np.zeros(0, np.int64)
        self.ended = False
        self.step = 2  # the next page's size: pages double up to `rules.page`

    def __len__(self) -> int:
        return len(self.slots)

    def extend(self, got: list[str], asked: int, known: _Known, floor: list[int] | None,
               page: int) -> np.ndarray:
        new = known.add(got, floor)
        self.slots = np.concatenate([self.slots, new])
        self.ended = len(got) < asked
        self.step = min(2 * self.step, page)
        return new


class _Sets:
    """Every sorted set's members read so far, shared by the classes."""

    def __init__(self, source: Source, known: _Known, rules: NarrowRules) -> None:
        self.source, self.known, self.rules = source, known, rules
        self._buckets: dict[tuple[str, str], list[Place]] = {}
        self._parts: dict[tuple[str, str, Place], _Members] = {}
        self._idle: dict[tuple[str, str], _Members] = {}

    def places(self, c: DemandClass) -> list[tuple[int, bool, Bucket, str]]:
        """The class's sorted sets in the order it takes them: the lightest weight first; within a
        weight, buckets whose every node holds the demand first, then those where some may; the
        smallest bucket first (best fit) in each group."""
        out = []
        for label in c.search:
            if (c.queue, label) not in self._buckets:
                self._buckets[c.queue, label] = self.source.buckets(c.queue, label)
            out += [(w, not surely_holds(b, c.demand), b, label)
                    for w, b in self._buckets[c.queue, label] if may_hold(b, c.demand)]
        return sorted(out)

    def part(self, queue: str, label: str, place: Place) -> _Members:
        return self._parts.setdefault((queue, label, place), _Members())

    def page_on(self, queue: str, label: str, place: Place, m: _Members) -> None:
        size = m.step
        got = self.source.pages([(queue, label, place, len(m), size)])[0]
        m.extend(got, size, self.known, bucket_floor(place[1]), self.rules.page)

    def idle(self, queue: str, label: str) -> _Members:
        return self._idle.setdefault((queue, label), _Members())

    def idle_on(self, queue: str, label: str, m: _Members, size: int) -> int:
        """Page on in the idle set, reading the new members' records; answers how many were read."""
        got = self.source.idle(queue, label, len(m), size)
        return self.known.read(m.extend(got, size, self.known, None, self.rules.page))


def _fill(sets: _Sets, c: DemandClass, rules: NarrowRules) -> int:
    """Take the class's partitions' members, set after set in `_Sets.places`' order, the lowest
    fragment score first in each, until the nodes taken can hold the class's jobs or the class's
    reads are spent. Answers the node-slots still missing."""
    have = [0, 0, rules.class_reads * c.shapes + 2 * c.widths]  # slots, nodes, reads left
    for weight, borderline, b, label in sets.places(c):
        # every member of a sure bucket holds the demand: its room is taken as the bucket's floor
        # and its record read once, at the end, if it is chosen (unless the job has several labels)
        needs = borderline or len(c.labels) > 1
        m = sets.part(c.queue, label, (weight, b))
        pos, batch = 0, 2
        while not _enough(c, have, rules):
            if pos < len(m):
                pos, batch = _look(sets.known, m, pos, c, have, needs, batch, rules)
            elif m.ended or have[2] <= 0 or sets.known.full():
                break
            else:
                sets.page_on(c.queue, label, (weight, b), m)
        if _enough(c, have, rules):
            break
    return max(0, c.slots - have[0])


def _look(known: _Known, m: _Members, pos: int, c: DemandClass, have: list[int], needs: bool,
          batch: int, rules: NarrowRules) -> tuple[int, int]:
    """Take, from member `pos` on, the members with room for the class's demand, until it has
    enough: what it needs is taken from their room (the slack beyond is counted, not taken). Where
    records are needed, the members not read yet are read in batches that double (2, 4, ... up to
    `rules.page`). Answers where to look on from, and the next batch's size."""
    slots = m.slots[pos:]
    k = known.counts(slots, c)
    unread = ~known.read_[slots]
    take = (k > 0) & known.eligible(slots, c) & ~(unread & needs)
    can_read = needs and have[2] > 0 and not known.full()
    if known.full():
        take &= known.chosen[slots]
    for i in np.flatnonzero(take | (unread & can_read)).tolist():
        s = int(slots[i])
        if unread[i] and needs:
            ahead = slots[i:][unread[i:]][:min(batch, _missing(c, have, rules))]
            have[2] -= known.read(ahead)
            return pos + i, min(2 * batch, rules.page)
        if not known.choose_one(s):
            return pos + i, batch  # full: look again at the chosen nodes only
        known.taken[s] += min(int(k[i]), max(0, c.slots - have[0])) * np.asarray(c.demand)
        have[0] += int(k[i])
        have[1] += 1
        if _enough(c, have, rules):
            return pos + i + 1, batch
    return pos + len(slots), batch


def _fill_idle(sets: _Sets, c: DemandClass, wanted: int, rules: NarrowRules) -> int:
    """Take idle nodes for a class of whole-node jobs, lowest weight first (then id: the full
    scan's order), in pages that double: the first `wanted` that hold the class's jobs (idle, in the
    queue, with the labels, big enough), or fewer when the class's reads are spent. `wanted` is
    every whole-node slot of the pass: whatever the other whole-node jobs take first, each of this
    class's jobs then finds the nodes the full scan gives it. Answers the node-slots still missing."""
    known, m = sets.known, sets.idle(c.queue, c.search[0])
    have, pos, budget = 0, 0, rules.class_reads + 2 * wanted
    while True:
        slots = m.slots[pos:]
        holds = known.eligible(slots, c) & known.read_[slots] & known.idle[slots] & (
            known.cap[slots] >= np.asarray(c.demand)).all(axis=1)
        have += len(known.choose(slots[holds][:wanted - have]))
        pos = len(m)
        if have >= wanted or m.ended or budget <= 0 or known.full():
            return max(0, c.slots - have)
        budget -= sets.idle_on(c.queue, c.search[0], m, min(m.step, budget))


def _missing(c: DemandClass, have: list[int], rules: NarrowRules) -> int:
    """The most nodes the class may still need (every node holds at least one of its slots)."""
    return max(1, math.ceil(c.slots * rules.slack - have[0]), c.widest - have[1])


def _enough(c: DemandClass, have: list[int], rules: NarrowRules) -> bool:
    return have[0] >= c.slots * rules.slack and have[1] >= c.widest


def _first_to_free(known: _Known, queue: str, wanted: int, rules: NarrowRules) -> None:
    """Add `wanted` nodes of the queue's running jobs that end first: where reservations will go."""
    added, start = 0, 0
    while added < wanted and not known.full():
        size = min(rules.page, max(4, wanted - added))
        page = known.source.ending_first(queue, start, size)
        start += len(page)
        slots = known.add(list(dict.fromkeys(n for _, nodes in page for n in nodes)))
        slots = slots[~known.chosen[slots]]
        known.read(slots)
        added += len(known.choose(slots[known.read_[slots] & known.exists[slots]][:wanted - added]))
        if len(page) < size:
            return

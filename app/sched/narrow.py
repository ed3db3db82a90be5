"""Which nodes a pass looks at when the cluster is indexed (docs/methods.md §5): never the whole cluster.

For every class of pending jobs (queue, partitions searched, per-node demand) the index gives the
members of the matching label partitions, lowest fragment score first, bucket by bucket from the
smallest bucket that can hold the demand; pages are taken until the nodes found can hold the class's
jobs (with some slack, since classes share nodes); the lightest node weight is taken first. A class
of whole-node (exclusive) jobs is looked for among the idle nodes instead, lowest weight first, as
the full scan takes them, as many as the pass's whole-node jobs need in all. For reservations, the
nodes of the running jobs that end first in each queue are added. The pass then runs on those nodes
only.

Pure: the index is reached through `Source`, which a store implements.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

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
    page: int = 64  # members taken from a bucket at a time, at most
    slack: float = 1.0  # room looked for, relative to what a class's jobs need (room is shared out)
    class_reads: int = 16  # node records a class may read beyond twice its widest job's nodes
    reserve_nodes: int = 16  # nodes of the first-ending jobs added per queue, at least
    reserve_all: bool = False  # conservative: also a node per node-slot the free nodes lack
    max_nodes: int = 4096  # nodes one pass may look at, at most
    partitions: PartitionRules = PartitionRules()


@dataclass(frozen=True, slots=True)
class DemandClass:
    queue: str
    labels: frozenset[str]  # required labels (the constraint)
    search: tuple[str, ...]  # partitions searched
    demand: Triple
    slots: int  # node-slots its jobs need in all
    widest: int  # the most nodes one of its jobs needs
    exclusive: bool = False  # whole nodes: looked for among the idle ones


@dataclass(slots=True)
class Narrowed:
    found: dict[str, Node] = field(default_factory=dict)  # every node record read
    chosen: set[str] = field(default_factory=set)  # the nodes the pass will see
    # free resources of chosen nodes once the classes before have taken what they need from them,
    # so classes sharing nodes do not all count the same room
    room: dict[str, list[int]] = field(default_factory=dict)

    @property
    def examined(self) -> int:
        return len(self.found)


def classes(jobs: Iterable[Job], queues: Sequence[str] | None, rules: PartitionRules) -> list[DemandClass]:
    """Jobs grouped by what they search for; with `queues`, each job is looked for in every queue
    listed (queue migration may move it), else in its own."""
    slots: dict[tuple, int] = defaultdict(int)  # type: ignore[type-arg]
    widest: dict[tuple, int] = defaultdict(int)  # type: ignore[type-arg]
    for job in jobs:
        search = (idle_label(job),) if job.exclusive else search_labels(job, rules)
        for q in queues if queues is not None else (job.queue,):
            key = (q, job.labels, search, job.demand, job.exclusive)
            slots[key] += job.nodes
            widest[key] = max(widest[key], job.nodes)
    return [DemandClass(q, lab, s, d, slots[k], widest[k], x)
            for k in sorted(slots, key=repr) for q, lab, s, d, x in [k]]


def narrow(source: Source, jobs: Sequence[Job], rules: NarrowRules = NarrowRules(),
           queues: Sequence[str] | None = None) -> Narrowed:
    """The nodes a pass over `jobs` should see, found through the index."""
    out = Narrowed()
    found = classes(jobs, queues, rules.partitions)
    wanted: dict[str, int] = defaultdict(lambda: rules.reserve_nodes)
    widest: dict[str, int] = defaultdict(int)
    whole = sum(c.slots for c in found if c.exclusive)
    for c in found:
        if c.exclusive:
            short = _fill_idle(source, c, max(whole, math.ceil(c.slots * rules.slack)), rules, out)
        else:
            short = _fill(source, c, rules, out)
        widest[c.queue] = max(widest[c.queue], c.widest)
        if rules.reserve_all:
            wanted[c.queue] += short
    for q in sorted(widest):
        _first_to_free(source, q, wanted[q] + widest[q], rules, out)
    promised = {n for j in jobs for n in j.promise_nodes}
    out.found.update(source.nodes(sorted((promised | out.chosen) - set(out.found))))
    out.chosen = {n for n in out.chosen | promised if n in out.found}  # a node may be gone
    return out


def fits(node: Node, c: DemandClass, room: list[int] | None = None) -> int:
    """How many of the class's per-node demands the node can hold (0: none, or not eligible), in its
    free resources or in `room`."""
    if node.state != NodeState.UP or c.queue not in node.serves or not c.labels <= node.labels:
        return 0
    return _count(c, room if room is not None else [node.cap[r] - node.alloc[r] for r in range(3)])


def _fill(source: Source, c: DemandClass, rules: NarrowRules, out: Narrowed) -> int:
    """Take the class's partitions' members: the lowest node weight first (Slurm's preference, the
    full scan's node order); within a weight, buckets whose every node holds the demand first, then
    those where some may; the smallest bucket first (best fit) in each group; the lowest fragment
    score first inside a bucket, in pages that double (2, 4, ... up to `rules.page`), until the
    nodes taken can hold the class's jobs or the class's reads are spent. Answers the node-slots
    still missing."""
    have = [0, 0]  # slots, nodes
    budget = rules.class_reads + 2 * c.widest
    buckets = sorted((w, not surely_holds(b, c.demand), b, label) for label in c.search
                     for w, b in source.buckets(c.queue, label) if may_hold(b, c.demand))
    for weight, borderline, b, label in buckets:
        # every member of a sure bucket holds the demand: its room is taken as the bucket's floor and
        # its record read once, at the end, if it is chosen (unless the job has several labels)
        floor = bucket_floor(b) if not borderline and len(c.labels) <= 1 else None
        start, step = 0, 2
        while not _enough(c, have, rules) and budget > 0 and len(out.found) < rules.max_nodes:
            # members read without their records cost little: their pages grow even when few
            # slots are missing (nodes earlier classes filled are passed over a page at a time)
            size = step if floor is not None else min(step, _missing(c, have, rules))
            got = source.pages([(c.queue, label, (weight, b), start, size)])[0]
            if floor is None:
                fresh = [n for n in got if n not in out.found]
                budget -= len(fresh)
                out.found.update(source.nodes(fresh))
            _take(c, got, have, rules, out, floor)
            if len(got) < size:
                break
            start, step = start + size, min(2 * size, rules.page)
    return max(0, c.slots - have[0])


def _fill_idle(source: Source, c: DemandClass, wanted: int, rules: NarrowRules, out: Narrowed) -> int:
    """Take idle nodes for a class of whole-node jobs, lowest weight first (then id: the full
    scan's order), in pages that double: the first `wanted` that hold the class's jobs (idle, in the
    queue, with the labels, big enough), or fewer when the class's reads are spent. `wanted` is
    every whole-node slot of the pass: whatever the other whole-node jobs take first, each of this
    class's jobs then finds the nodes the full scan gives it. Answers the node-slots still missing."""
    have = 0
    budget = rules.class_reads + 2 * wanted
    start, step = 0, 2
    while have < wanted and budget > 0 and len(out.found) < rules.max_nodes:
        size = min(step, budget)
        got = source.idle(c.queue, c.search[0], start, size)
        fresh = [n for n in got if n not in out.found]
        budget -= len(fresh)
        out.found.update(source.nodes(fresh))
        for nid in got:
            node = out.found.get(nid)
            if have < wanted and node is not None and _holds_whole(node, c):
                out.chosen.add(nid)
                have += 1
        if len(got) < size:
            break
        start, step = start + size, min(2 * size, rules.page)
    return max(0, c.slots - have)


def _holds_whole(node: Node, c: DemandClass) -> bool:
    """Whether a whole-node job of the class may take the node: idle, eligible, big enough."""
    return (is_idle(node) and c.queue in node.serves and c.labels <= node.labels
            and all(node.cap[r] >= c.demand[r] for r in range(3)))


def _missing(c: DemandClass, have: list[int], rules: NarrowRules) -> int:
    """The most nodes the class may still need (every node holds at least one of its slots)."""
    return max(1, math.ceil(c.slots * rules.slack - have[0]), c.widest - have[1])


def _enough(c: DemandClass, have: list[int], rules: NarrowRules) -> bool:
    return have[0] >= c.slots * rules.slack and have[1] >= c.widest


def _take(c: DemandClass, got: list[str], have: list[int], rules: NarrowRules, out: Narrowed,
          floor: list[int] | None) -> None:
    """Choose the nodes of a page with room for the class's demand, until the class has enough;
    what the class needs is taken from their room (the slack beyond is counted, not taken). A node
    not read yet has its bucket's `floor` as room."""
    for nid in got:
        if _enough(c, have, rules):
            return
        room = out.room.get(nid)
        if room is None:
            node = out.found.get(nid)
            if node is None and floor is None:
                continue
            room = list(floor) if node is None else [node.cap[r] - node.alloc[r] for r in range(3)]
            out.room[nid] = room
        node = out.found.get(nid)
        k = fits(node, c, room) if node is not None else _count(c, room)
        if k:
            out.chosen.add(nid)
            taken = min(k, max(0, c.slots - have[0]))
            for r in range(3):
                room[r] -= taken * c.demand[r]
            have[0] += k
            have[1] += 1


def _count(c: DemandClass, room: list[int]) -> int:
    counts = [room[r] // c.demand[r] for r in range(3) if c.demand[r] > 0]
    return max(0, min(counts)) if counts else c.slots


def _first_to_free(source: Source, queue: str, wanted: int, rules: NarrowRules, out: Narrowed) -> None:
    """Add `wanted` nodes of the queue's running jobs that end first: where reservations will go."""
    added, start = 0, 0
    while added < wanted and len(out.found) < rules.max_nodes:
        size = min(rules.page, max(4, wanted - added))
        page = source.ending_first(queue, start, size)
        start += len(page)
        order = list(dict.fromkeys(n for _, nodes in page for n in nodes if n not in out.chosen))
        out.found.update(source.nodes([n for n in order if n not in out.found]))
        fresh = [n for n in order if n in out.found][:wanted - added]
        out.chosen.update(fresh)
        added += len(fresh)
        if len(page) < size:
            return

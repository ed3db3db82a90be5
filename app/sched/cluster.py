"""The snapshot as numpy arrays, nodes sorted by (queue, weight, id) so a queue is one contiguous
slice, in node order (lower weight first, then id). When some node serves several queues
(overlapping partitions), nodes are sorted by (weight, id) and each queue is an index array instead.

Built once per decision from the records, unless the snapshot carries them already as `NodeColumns`
(a caller deciding many times over one machine keeps those current in place; POST /schedule makes
them from the wire's nodes, `NodeLists`, without a record per node). Eligibility
(queue + required labels) is cached per key, so a pass looks at a job's queue slice (a view, no
copy) and never at the whole cluster.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import chain
from operator import itemgetter

import numpy as np

from app.sched.model import Job, Node, NodeState, RunningJob, Snapshot, Triple, WholeCluster, Window
from app.sched.records import LazyRecords
from app.sched.running import RunningColumns

NEG = -(1 << 40)  # the free amount of a node that must never be given anything
FEW_TYPES = 8  # node types taken out one at a time before sorting the rest (_capacity_types)


@dataclass(frozen=True, slots=True)
class Eligible:
    """The nodes a job may use: a slice of the node arrays, optionally narrowed by an index."""

    key: tuple[str, frozenset[str]]
    sl: slice
    idx: np.ndarray | None  # absolute node indices, sorted; None = the whole slice

    def take(self, arr: np.ndarray) -> np.ndarray:
        return arr[self.sl] if self.idx is None else arr[self.idx]

    def nodes(self, positions: np.ndarray) -> np.ndarray:
        """Absolute node indices of positions inside take()'s result."""
        return positions + self.sl.start if self.idx is None else self.idx[positions]

    def size(self) -> int:
        return self.sl.stop - self.sl.start if self.idx is None else len(self.idx)

    def take_columns(self, arr: np.ndarray) -> np.ndarray:
        """take() of each row of a (rows, N) array."""
        return arr[:, self.sl] if self.idx is None else arr[:, self.idx]

    def holds(self, xs: np.ndarray) -> np.ndarray:
        """Whether each absolute node index of `xs` is eligible."""
        if self.idx is None:
            return (xs >= self.sl.start) & (xs < self.sl.stop)
        at = np.minimum(np.searchsorted(self.idx, xs), max(len(self.idx) - 1, 0))
        return self.idx[at] == xs if len(self.idx) else np.zeros(len(xs), dtype=bool)


Held = tuple[np.ndarray, np.ndarray, np.ndarray]  # node indices, end times, (3, R) amounts


@dataclass(slots=True)
class NodeColumns:
    """The nodes as arrays in (queue, weight, id) order ((weight, id) when queues overlap), and what
    the running jobs hold on them.

    A caller that decides many times over one machine (the replay) builds this once, then changes
    only `alloc` and `held` between calls, so no decision rebuilds it from records. `cap`, `alloc`:
    int64 (3, N); row order cpu, mem, gpu. `held`: one entry per running job and node it holds, its
    expected end, and the amounts it holds there; the entries' order does not matter. What the
    decisions derive from the other columns (eligible sets, capacity types, least capacities) is
    kept here too, so such a caller's decisions derive it once.
    """

    ids: list[str]
    pos: dict[str, int]
    queue_of: list[str]
    labels: list[frozenset[str]]
    queues: dict[str, slice | np.ndarray]  # each queue's nodes: a slice, or indices when they overlap
    cap: np.ndarray
    alloc: np.ndarray
    usable: np.ndarray
    cpu_load: np.ndarray
    cpu_ghz: np.ndarray
    held: Held
    serves: list[tuple[str, ...]] = field(default_factory=list)  # every queue of each node
    eligible: dict[tuple[str, frozenset[str]], Eligible] = field(default_factory=dict)
    cap_types: dict[tuple[str, frozenset[str]], list[tuple[int, int, int, int, int]]] = field(
        default_factory=dict)
    eligible_nodes: dict[tuple[str, frozenset[str]], np.ndarray] = field(default_factory=dict)
    least: dict[tuple[str, frozenset[str]], tuple[int, int, int, int, int]] = field(
        default_factory=dict)
    # the decision core's layout of some eligible sets (`core.CorePass._eligible_sets`), by the sets
    # and the selector: it depends on nothing a replay changes between decisions
    core_sets: dict[tuple[object, ...], tuple[np.ndarray, ...]] = field(default_factory=dict)

    @classmethod
    def of(cls, nodes: Sequence[Node], running: Sequence[RunningJob]) -> NodeColumns:
        overlap = any(n.queues for n in nodes)
        if overlap:
            nodes = sorted(nodes, key=lambda n: (n.weight, n.id))
        else:
            nodes = sorted(nodes, key=lambda n: (n.queue, n.weight, n.id))
        return cls._ordered([n.id for n in nodes], [n.queue for n in nodes], [n.queues for n in nodes],
                            [n.labels for n in nodes], [n.cap for n in nodes], [n.alloc for n in nodes],
                            [n.state for n in nodes], [n.cpu_load for n in nodes], [n.cpu_ghz for n in nodes],
                            overlap, running)

    @classmethod
    def of_lists(cls, nodes: NodeLists, running: Sequence[RunningJob]) -> NodeColumns:
        """`of` for nodes given as lists (`NodeLists`), without their records: the same columns."""
        overlap = any(nodes.queues)
        by = (nodes.weights, nodes.ids) if overlap else (nodes.queue_of, nodes.weights, nodes.ids)
        keys = list(zip(*by, strict=True))
        order = sorted(range(len(keys)), key=keys.__getitem__)  # `of`'s order: stable, by the same keys
        fields = (nodes.ids, nodes.queue_of, nodes.queues, nodes.labels, nodes.caps, nodes.allocs,
                  nodes.states, nodes.cpu_load, nodes.cpu_ghz)
        return cls._ordered(*([values[i] for i in order] for values in fields), overlap, running)

    @classmethod
    def _ordered(cls, ids: list[str], queue_of: list[str], queues: list[tuple[str, ...]],
                 labels: list[frozenset[str]], caps: list[Triple], allocs: list[Triple],
                 states: list[NodeState], cpu_load: list[float], cpu_ghz: list[float], overlap: bool,
                 running: Sequence[RunningJob]) -> NodeColumns:
        """The columns of nodes given field by field, already in the columns' order."""
        pos = {nid: i for i, nid in enumerate(ids)}
        alone = {own: (own,) for own in dict.fromkeys(queue_of)}  # one tuple per queue, shared by its nodes
        serves = [q or alone[own] for q, own in zip(queues, queue_of, strict=True)]  # `Node.serves`
        return cls(
            ids=ids,
            pos=pos,
            queue_of=queue_of,
            labels=labels,
            queues=_queue_members(serves) if overlap else _queue_slices(queue_of),
            cap=_triples(caps),
            alloc=_triples(allocs),
            usable=np.array([state == NodeState.UP for state in states], dtype=bool),
            cpu_load=np.array(cpu_load, dtype=np.float64),
            cpu_ghz=np.array(cpu_ghz, dtype=np.float64),
            held=_held(running, pos),
            serves=serves,
        )


class NodeLists(LazyRecords[Node]):
    """Nodes as one list per field (`Node`'s), in the order given, read as `Node` records made on
    first use. A caller that has the fields without records (POST /schedule's wire nodes) gives
    these as the snapshot's nodes, and `NodeColumns.of_lists` of them as its columns: a decision
    then makes no record per node."""

    __slots__ = ("ids", "queue_of", "caps", "allocs", "labels", "cpu_load", "cpu_ghz", "states", "weights",
                 "queues")

    def __init__(self, ids: list[str], queue_of: list[str], caps: list[Triple], allocs: list[Triple],
                 labels: list[frozenset[str]], cpu_load: list[float], cpu_ghz: list[float],
                 states: list[NodeState], weights: list[int], queues: list[tuple[str, ...]]) -> None:
        self.ids, self.queue_of, self.caps, self.allocs, self.labels = ids, queue_of, caps, allocs, labels
        self.cpu_load, self.cpu_ghz, self.states, self.weights, self.queues = (cpu_load, cpu_ghz, states,
                                                                               weights, queues)
        self._records: tuple[Node, ...] | None = None

    def __len__(self) -> int:
        return len(self.ids)

    def _make_records(self) -> tuple[Node, ...]:
        return tuple(map(Node, self.ids, self.queue_of, self.caps, self.allocs, self.labels, self.cpu_load,
                         self.cpu_ghz, self.states, self.weights, self.queues))


def _triples(rows: list[tuple[int, int, int]]) -> np.ndarray:
    """(3, n) int64 from n triples (read flat: twice as fast as converting the tuples)."""
    flat = np.fromiter(chain.from_iterable(rows), dtype=np.int64, count=3 * len(rows))
    return flat.reshape(-1, 3).T.copy()


def _queue_slices(queue_of: list[str]) -> dict[str, slice | np.ndarray]:
    out: dict[str, slice | np.ndarray] = {}
    start = 0
    for i in range(1, len(queue_of) + 1):
        if i == len(queue_of) or queue_of[i] != queue_of[start]:
            out[queue_of[start]] = slice(start, i)
            start = i
    return out


def _queue_members(serves: list[tuple[str, ...]]) -> dict[str, slice | np.ndarray]:
    """Each queue's nodes, ascending, when a node may serve several."""
    out: dict[str, list[int]] = {}
    for x, queues in enumerate(serves):
        for q in queues:
            out.setdefault(q, []).append(x)
    return {q: np.array(xs, dtype=np.int64) for q, xs in sorted(out.items())}


def _held(running: Sequence[RunningJob], pos: dict[str, int]) -> Held:
    """Every running job's holding on each node of the snapshot (nodes it lists but the snapshot
    lacks are left out), with the job's expected end. Running jobs given as columns (POST /schedule's)
    give theirs without a record each."""
    if isinstance(running, RunningColumns):
        return running.held(pos)
    get = pos.get
    xs: list[int] = []
    ends: list[float] = []
    amounts: list[int] = []  # flat: 3 per entry (one list of ints converts faster than tuples)
    for rj in running:
        end = rj.start_time + rj.walltime_s
        for node_id, d in rj.alloc:
            x = get(node_id)
            if x is not None:
                xs.append(x)
                ends.append(end)
                amounts.extend(d)
    return (
        np.array(xs, dtype=np.int64),
        np.array(ends, dtype=np.float64),
        np.fromiter(amounts, dtype=np.int64, count=len(amounts)).reshape(-1, 3).T,
    )


class ClusterIndex:
    """Node arrays of one snapshot (see `NodeColumns`), and the caches of one decision."""

    def __init__(self, snapshot: Snapshot) -> None:
        cols = snapshot.columns
        if cols is None:
            cols = NodeColumns.of(snapshot.nodes, snapshot.running)
        self.ids, self.pos, self.queue_of, self.labels = cols.ids, cols.pos, cols.queue_of, cols.labels
        self.queues = cols.queues
        self.serves = cols.serves or [(q,) for q in cols.queue_of]
        self.cap, self.alloc, self.usable = cols.cap, cols.alloc, cols.usable
        self.cpu_load, self.cpu_ghz = cols.cpu_load, cols.cpu_ghz
        self.held = cols.held
        self.whole: WholeCluster | None = snapshot.whole
        # maintenance windows on the snapshot's nodes: those in progress hold each node's whole
        # capacity until their end, like a running job; the later ones, (nodes, start, end) each
        self.window_now: Held | None = None
        self.windows_ahead: list[tuple[np.ndarray, float, float]] = []
        if snapshot.windows:
            self._windows(snapshot.windows, snapshot.now)
        self.nodes_total = len(self.ids) if snapshot.whole is None else snapshot.whole.nodes
        self._eligible = cols.eligible
        self._cap_types = cols.cap_types
        self._eligible_nodes = cols.eligible_nodes
        self._least = cols.least
        self.core_sets = cols.core_sets
        self._members: dict[tuple[str, frozenset[str]], np.ndarray] = {}  # see may_use
        self._whole_types: dict[tuple[str, frozenset[str]], list[tuple[int, int, int, int, int]]] = {}

    def __len__(self) -> int:
        return len(self.ids)

    def _windows(self, windows: Sequence[Window], now: float) -> None:
        xs: list[int] = []
        ends: list[float] = []
        for w in windows:
            nodes = [x for nid in w.node_ids if (x := self.pos.get(nid)) is not None]
            if not nodes or w.end <= now:
                continue
            if w.start <= now:
                xs += nodes
                ends += [w.end] * len(nodes)
            else:
                self.windows_ahead.append((np.array(sorted(set(nodes)), dtype=np.int64), w.start, w.end))
        if xs:
            at = np.array(xs, dtype=np.int64)
            self.window_now = (at, np.array(ends, dtype=np.float64), self.cap[:, at])

    def eligible(self, queue: str, labels: frozenset[str]) -> Eligible:
        key = (queue, labels)
        found = self._eligible.get(key)
        if found is None:
            found = self._make_eligible(key)
            self._eligible[key] = found
        return found

    def nodes_of(self, elig: Eligible) -> np.ndarray:
        """Every node index of `elig`, in order (read-only: shared by every search)."""
        found = self._eligible_nodes.get(elig.key)
        if found is None:
            found = elig.nodes(np.arange(elig.size()))
            found.setflags(write=False)
            self._eligible_nodes[elig.key] = found
        return found

    def eligible_for(self, job: Job) -> Eligible:
        return self.eligible(job.queue, job.labels)

    def positions(self, ids: Sequence[str]) -> np.ndarray | None:
        """The node indices of `ids`, in their order; None if one is not in the snapshot."""
        if not ids:
            return np.zeros(0, dtype=np.int64)
        try:
            found = itemgetter(*ids)(self.pos)  # one C call for all: a promise can name thousands
        except KeyError:
            return None
        return np.array(found if len(ids) > 1 else (found,), dtype=np.int64)

    def may_use(self, elig: Eligible, nodes: np.ndarray) -> bool:
        """Whether every one of `nodes` is up and in `elig` (serves its queue, has its labels)."""
        member = self._members.get(elig.key)
        if member is None:
            member = np.zeros(len(self.ids), dtype=bool)
            member[elig.sl if elig.idx is None else elig.idx] = True
            self._members[elig.key] = member
        return bool(self.usable[nodes].all() and member[nodes].all())

    def _make_eligible(self, key: tuple[str, frozenset[str]]) -> Eligible:
        queue, labels = key
        sl = self.queues.get(queue, slice(0, 0))
        if not isinstance(sl, slice):  # the queue's nodes are spread out (overlapping queues)
            idx = [i for i in sl.tolist() if labels <= self.labels[i]]
            return Eligible(key, slice(0, 0), np.array(idx, dtype=np.int64))
        if not labels:
            return Eligible(key, sl, None)
        idx = [i for i in range(sl.start, sl.stop) if labels <= self.labels[i]]
        return Eligible(key, sl, np.array(idx, dtype=np.int64))

    def free_now(self) -> np.ndarray:
        """Free resources now, (3, N); nodes that are down or draining get NEG."""
        free = self.cap - self.alloc
        if not np.logical_and.reduce(self.usable):  # the mask costs more than this test
            free[:, ~self.usable] = NEG
        if self.window_now is not None:  # a window in progress holds the whole node
            xs, _, amounts = self.window_now
            for r in range(3):
                np.subtract.at(free[r], xs, amounts[r])
        return free

    def capacity_counts(self, elig: Eligible, demand: tuple[int, int, int]) -> tuple[int, int]:
        """(nodes of any state whose capacity holds demand, of those the usable ones)."""
        c, m, g = demand  # (a plain loop: queue migration asks this per job)
        any_count = up_count = 0
        for tc, tm, tg, n_any, n_up in self._types_of(elig):
            if tc >= c and tm >= m and tg >= g:
                any_count += n_any
                up_count += n_up
        return any_count, up_count

    def capacity_counts_of(self, elig: Eligible, demands: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """`capacity_counts` of each column of `demands` (3, S) at once: the node types (a cluster
        has few) against every demand, so a queue of thousands of shapes costs one array operation."""
        types = self._types_of(elig)
        if not types:
            zero = np.zeros(demands.shape[1], dtype=np.int64)
            return zero, zero.copy()
        cols = np.array(types, dtype=np.int64).T  # (5, T): c, m, g, nodes, usable
        holds = (cols[:3, :, None] >= demands[:, None, :]).all(axis=0)  # (T, S)
        return cols[3] @ holds, cols[4] @ holds

    def _types_of(self, elig: Eligible) -> list[tuple[int, int, int, int, int]]:
        """The eligible node types with their counts (all, usable): the whole cluster's when the
        snapshot holds only some of its nodes."""
        if self.whole is not None:
            found = self._whole_types.get(elig.key)
            if found is None:
                queue, labels = elig.key
                found = [(*t.cap, t.nodes, t.up) for t in self.whole.capacity_types
                         if t.queue == queue and labels <= t.labels]
                self._whole_types[elig.key] = found
            return found
        types = self._cap_types.get(elig.key)
        if types is None:
            types = self._cap_types[elig.key] = self._capacity_types(elig)
        return types

    def whole_node(self, elig: Eligible, demand: tuple[int, int, int]) -> tuple[int, int, int]:
        """The capacity of the smallest eligible node type that holds demand: what a whole-node
        (exclusive) job of that demand takes of each node it runs on. The demand itself when no
        eligible node holds it."""
        c, m, g = demand
        holding = [(tc, tm, tg) for tc, tm, tg, _, _ in self._types_of(elig)
                   if tc >= c and tm >= m and tg >= g]
        return min(holding, default=demand)

    def least_capacity(self, elig: Eligible) -> tuple[int, int, int, int, int]:
        """(c, m, g, nodes, usable): every eligible node's capacity holds (c, m, g) (the least of
        each resource over them), so `capacity_counts` of any demand within it is (nodes, usable).
        (-1, -1, -1, 0, 0), which holds no demand, when no node is eligible or the snapshot holds
        only some of the cluster's nodes (its counts are the whole cluster's)."""
        if self.whole is not None:
            return (-1, -1, -1, 0, 0)
        found = self._least.get(elig.key)
        if found is None:
            found = self._least[elig.key] = self._make_least(elig)
        return found

    def _make_least(self, elig: Eligible) -> tuple[int, int, int, int, int]:
        types = self._types_of(elig)
        if not types:
            return (-1, -1, -1, 0, 0)
        c, m, g, n_any, n_up = (list(col) for col in zip(*types, strict=True))
        return min(c), min(m), min(g), sum(n_any), sum(n_up)

    def _capacity_types(self, elig: Eligible) -> list[tuple[int, int, int, int, int]]:
        """The distinct capacities among eligible nodes, with their counts (all, usable), in
        capacity order."""
        caps = self.cap[:, elig.sl if elig.idx is None else elig.idx]
        usable = elig.take(self.usable)
        found: list[tuple[int, int, int, int, int]] = []
        # a cluster has few node types: taking out the nodes of one type at a time spares
        # np.unique's sort of every row (a third of a 10k-node decision's setup)
        while caps.shape[1] and len(found) < FEW_TYPES:
            c, m, g = caps[:, 0].tolist()
            same = (caps[0] == c) & (caps[1] == m) & (caps[2] == g)
            found.append((c, m, g, int(np.count_nonzero(same)), int(np.count_nonzero(usable[same]))))
            caps, usable = caps[:, ~same], usable[~same]
        if caps.shape[1]:
            found += _unique_capacities(caps, usable)
        return sorted(found)

    def examined(self, keys: set[tuple[str, frozenset[str]]]) -> int:
        """How many distinct nodes the eligibility sets of `keys` cover."""
        if len(keys) == 1:  # the common case: one set, whose nodes are distinct
            (key,) = keys
            return self._eligible[key].size()
        seen = np.zeros(len(self), dtype=bool)
        for key in keys:
            e = self._eligible[key]
            if e.idx is None:
                seen[e.sl] = True
            else:
                seen[e.idx] = True
        return int(seen.sum())


def _unique_capacities(caps: np.ndarray, usable: np.ndarray) -> list[tuple[int, int, int, int, int]]:
    """The distinct columns of caps (3, n), with their counts (all, usable)."""
    uniq, inverse = np.unique(caps.T, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    any_count = np.bincount(inverse, minlength=len(uniq))
    up_count = np.bincount(inverse, weights=usable, minlength=len(uniq))
    return [
        (int(c), int(m), int(g), int(a), int(u))
        for (c, m, g), a, u in zip(uniq.tolist(), any_count, up_count, strict=True)
    ]

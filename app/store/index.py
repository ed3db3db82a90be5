"""The cluster cache and its index (docs/methods.md §5), on Redis or in process (`app.store.kv`).

Per cluster, under `hpcsched:cl:{tenant}:{cluster}:`, a `meta` hash: `version` (never reused, also
across DELETE), `live`, and `gen`, the generation that holds the state. Every write bumps the version
inside its transaction, and every transaction watches `meta`. Under `...:g{gen}:`:
- `node` / `job` hashes: one field per node / running job (a compact JSON record);
- `p:[queue,label,bucket,weight]` sorted sets: the members of a label partition of a queue whose
  free resources fall in a capacity bucket, one set per node weight (a pass takes the lightest
  first), scored by fragment score; `keys` lists them;
- `pos` hash: where each node sits (its sorted sets) and its free resources when it last moved; a
  node moves only when `should_move` says so (hysteresis);
- `i:[queue,label]` sorted sets: the queue's idle nodes (up, holding nothing), scored by weight (ties
  by id: the full scan's order), one set of every idle node (`*`), one of those with gpus and one
  per feature label, where a whole-node (exclusive) job looks; no hysteresis, a node is in them
  exactly while it is idle;
- `e:[queue]` sorted sets: running jobs by expected end;
- `types` / `qtot` hashes: node counts per capacity type and per-queue totals, so what can ever fit
  and each queue's load are known without reading the nodes;
- `win` hash: one field per maintenance window (its nodes, start, end).
A node serving several queues (overlapping partitions) is a member of each queue's partitions, counts
in each queue's types and totals, and a running job is in the `e:` set of every queue its nodes serve
(its end frees room for each of them).

A PUT writes a new generation piece by piece (nobody reads it yet; every key expires unless
switched to), then switches `meta` to it in one small transaction that makes it permanent, and
frees the old one: a big snapshot never blocks Redis in one long EXEC, and readers see the old
state or the new one, never a mix. A PUT that fails removes its copy; one whose process dies
leaves keys that expire (`STAGING_TTL_S`), never a half-written state.

Reads (`read`, `summary`, `whole`) see one version whole and are never refused because a writer
moved the state (`app.store.reads`); only writers get a 409.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import chain
from operator import itemgetter
from typing import TypeVar, cast

import numpy as np

from app.errors import ClusterBehindError, ClusterUnknownError, StoreUnavailableError, VersionConflictError
from app.sched.model import (
    CapacityType,
    Node,
    NodeState,
    RunningJob,
    Snapshot,
    Triple,
    WholeCluster,
    Window,
)
from app.sched.narrow import Narrowed, Place
from app.sched.partitions import (
    PartitionRules,
    capacity_bucket,
    idle_labels,
    is_idle,
    offered_labels,
    should_move,
)
from app.sched.running import RunningColumns
from app.sched.selectors.fragment import fragment_scores
from app.store.kv import Conflict, MemoryKv, RedisKv, Tx, Writes
from app.store.reads import Lease, Moved, RedisReadTx, copy_generation, summary_at_once, writers_wait

PREFIX = "hpcsched:cl:"
T = TypeVar("T")
RETRIES = 5
LEASED_READS = 3  # reads moved by writers even under a lease this often fall back to an atomic copy
STAGING_TTL_S = 3600  # a PUT's staged generation expires unless switched to within this


class Keys:
    """A cluster's key names: `meta` at its root, the rest under generation `gen` (see `at`)."""

    def __init__(self, key: str, gen: str = "") -> None:
        self.root = f"{PREFIX}{key}:"
        self.meta, self.readers = self.root + "meta", self.root + "readers"
        self.at(gen)

    def at(self, gen: str) -> Keys:
        self.gen = gen
        self.ns = f"{self.root}g{gen}:"
        self.node, self.job, self.pos, self.keys = (self.ns + s for s in ("node", "job", "pos", "keys"))
        self.types, self.qtot, self.win = self.ns + "types", self.ns + "qtot", self.ns + "win"
        self._parts: dict[tuple[str, str, Place], str] = {}
        return self

    def part(self, queue: str, label: str, place: Place) -> str:
        name = self._parts.get((queue, label, place))
        if name is None:
            weight, bucket = place
            name = self.ns + "p:" + json.dumps([queue, label, list(bucket), weight])
            self._parts[queue, label, place] = name
        return name

    def ends(self, queue: str) -> str:
        return self.ns + "e:" + json.dumps(queue)

    def idle(self, queue: str, label: str) -> str:
        return self.ns + "i:" + json.dumps([queue, label])

    def fixed(self) -> list[str]:
        return [self.node, self.job, self.pos, self.keys, self.types, self.qtot, self.win]


# --- records --------------------------------------------------------------------------------------
@dataclass(slots=True)
class NodeRec:
    node: Node
    jobs: list[str]


_compact = json.JSONEncoder(separators=(",", ":")).encode  # one encoder, not one per record


def encode_node(r: NodeRec) -> str:
    n = r.node
    return _compact([n.queue, sorted(n.labels), n.cap, n.alloc, n.cpu_load, n.cpu_ghz, n.state.value,
                     r.jobs, n.weight, n.queues])


def decode_node(nid: str, raw: str) -> NodeRec:
    q, labels, cap, alloc, load, ghz, state, jobs, *more = json.loads(raw)
    weight, queues = more if more else (1, [])  # a record written before weights and queues
    return NodeRec(Node(nid, q, tuple(cap), tuple(alloc), frozenset(labels), load, ghz, NodeState(state),
                        weight, tuple(queues)), jobs)


def encode_window(w: Window) -> str:
    return _compact([list(w.node_ids), w.start, w.end])


def decode_window(wid: str, raw: str) -> Window:
    nodes, start, end = json.loads(raw)
    return Window(wid, tuple(nodes), start, end)


def end_queues(job: RunningJob, serves: Callable[[str], Sequence[str]]) -> list[str]:
    """The queues whose `e:` set lists the job: its own, and every queue its nodes serve."""
    return sorted({job.queue}.union(*(serves(nid) for nid, _ in job.alloc)))


def encode_job(j: RunningJob) -> str:
    return _compact([j.queue, [[n, *d] for n, d in j.alloc], j.start_time, j.walltime_s, j.migrated])


def decode_job(jid: str, raw: str) -> RunningJob:
    return decode_jobs([jid], [raw])[0]


def decode_jobs(ids: Sequence[str], raws: Sequence[str | None]) -> list[RunningJob]:
    """`decode_job` of each record found (None: gone), with one JSON parse for them all."""
    found = [(jid, r) for jid, r in zip(ids, raws, strict=True) if r is not None]
    rows = json.loads(f"[{','.join(r for _, r in found)}]")
    return [RunningJob(jid, q, tuple((a[0], (a[1], a[2], a[3])) for a in alloc), start, wall, migrated)
            for (jid, _), (q, alloc, start, wall, migrated) in zip(found, rows, strict=True)]


def decode_running(ids: Sequence[str], raws: Sequence[str | None]) -> RunningColumns:
    """`decode_jobs` as columns, records made only if read: a pass needs only what each job holds
    where and until when (`RunningColumns.held`), and a record per job (with a tuple per node it
    holds) cost as much as the JSON parse itself on a big cluster's candidates."""
    found = [(jid, r) for jid, r in zip(ids, raws, strict=True) if r is not None]
    rows = json.loads(f"[{','.join(r for _, r in found)}]")
    queues, allocs, start, wall, migrated = zip(*rows, strict=True) if rows else ((), (), (), (), ())
    first = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, allocs), dtype=np.int64, count=len(allocs)), out=first[1:])
    entries = list(chain.from_iterable(allocs))  # [node, cpu, mem_mib, gpu] each
    where: dict[str, int] = {}  # each node's number, in the order first met
    node_of = np.array([where.setdefault(e[0], len(where)) for e in entries], dtype=np.int64)
    amounts = np.fromiter(chain.from_iterable(map(_AMOUNTS, entries)), dtype=np.int64,
                          count=3 * len(entries)).reshape(-1, 3)
    return RunningColumns(list(where), first, node_of, amounts, np.array(start, dtype=np.float64),
                          np.array(wall, dtype=np.float64), np.array(migrated, dtype=np.bool_),
                          lambda: ([jid for jid, _ in found], list(queues)))


_AMOUNTS = itemgetter(1, 2, 3)


def _free(n: Node) -> Triple:
    return (n.cap[0] - n.alloc[0], n.cap[1] - n.alloc[1], n.cap[2] - n.alloc[2])


def _type_fields(kind: tuple[str, tuple[str, ...], Triple, bool]) -> list[str]:
    queue, labels, cap, up = kind
    base = [queue, list(labels), *cap]
    return [json.dumps([*base, "any"]), *([json.dumps([*base, "up"])] if up else [])]


def _kinds(n: Node) -> list[tuple[str, tuple[str, ...], Triple, bool]]:
    """The node's capacity type in each queue it serves."""
    labels, up = tuple(sorted(n.labels)), n.state == NodeState.UP
    return [(q, labels, n.cap, up) for q in n.serves]


class ClusterCache:
    """PUT / PATCH / GET / DELETE of cached clusters, and the candidate nodes of a pass."""

    def __init__(self, kv: MemoryKv | RedisKv, rules: PartitionRules | None = None) -> None:
        self.kv = kv
        self.rules = rules or PartitionRules()
        self.backend = kv.backend
        self.copied_reads = 0  # reads that fell back to an atomic copy (writers kept interleaving)

    # --- writes ----------------------------------------------------------------------------------
    def put(self, key: str, nodes: Sequence[Node], running: Sequence[RunningJob],
            windows: Sequence[Window] = ()) -> int:
        """Replace the cluster with this snapshot (nodes' alloc = what `running` holds): written as a
        new generation that expires unless switched to, then switched to (and made permanent)."""
        new = Keys(key, uuid.uuid4().hex[:12])
        staged = Writes()
        self._fill(staged, new, nodes, running)
        staged.hset(new.win, {w.id: encode_window(w) for w in windows})
        written = sorted({op[1] for op in staged.ops})
        try:
            self.kv.bulk(staged.ops, expire_s=STAGING_TTL_S)
            version, old = self._switch(key, new, written)
        except BaseException:
            self._forget(written)  # best effort; the expiry frees what this cannot
            raise
        self.kv.bulk([("delete", old)])
        return version

    def _switch(self, key: str, new: Keys, written: list[str]) -> tuple[int, list[str]]:
        """Point `meta` at the staged generation (last writer wins: a PATCH or PUT in between only
        retries); answers the version and the keys of the generation it replaced."""
        for attempt in range(RETRIES):
            try:
                k = Keys(key)
                with self._tx(k, must_exist=False) as tx:
                    if tx.exists(written) != len(written):
                        raise StoreUnavailableError("the PUT's staged copy expired before it was "
                                                    "complete (the cache stalled): send the PUT again")
                    old = _generation_keys(tx, k)
                    tx.persist(written)
                    tx.hset(k.meta, {"gen": new.gen})
                    return self._bump(tx, k), old
            except VersionConflictError:
                if attempt == RETRIES - 1:
                    raise
        raise AssertionError("unreachable")

    def _forget(self, keys: list[str]) -> None:
        try:
            self.kv.bulk([("delete", keys)])
        except StoreUnavailableError:
            pass

    def _fill(self, w: Writes, k: Keys, nodes: Sequence[Node], running: Sequence[RunningJob]) -> None:
        jobs_on: dict[str, list[str]] = {}
        for rj in running:
            for nid, _ in rj.alloc:
                jobs_on.setdefault(nid, []).append(rj.id)
        recs = [NodeRec(n, jobs_on.get(n.id, [])) for n in nodes]
        w.hset(k.node, {r.node.id: encode_node(r) for r in recs})
        w.hset(k.job, {j.id: encode_job(j) for j in running})
        serves = {n.id: n.serves for n in nodes}
        ends: dict[str, dict[str, float]] = {}
        for j in running:
            for q in end_queues(j, lambda nid: serves.get(nid, ())):
                ends.setdefault(q, {})[j.id] = j.end_time
        for q in sorted(ends):
            w.zadd(k.ends(q), ends[q])
            w.sadd(k.keys, [k.ends(q)])
        _Writer(w, k, self.rules).place(recs, {})
        _counts(w, k, [], [r.node for r in recs])
        _idle(w, k, [], [r.node for r in recs])

    def patch(self, key: str, if_match: int, apply: Callable[[Edit], None]) -> tuple[int, int, int]:
        """Apply changes (`apply` edits the records) to the version the caller saw, all or none:
        an exception from `apply` writes nothing. Answers (version, nodes, running jobs) after."""
        k = Keys(key)
        with self._tx(k, if_match) as tx:
            edit = Edit(tx, k)
            apply(edit)
            edit.commit(self.rules)
            nodes = tx.hlen(k.node) + _grown(edit.before, edit.nodes)
            return self._bump(tx, k), nodes, tx.hlen(k.job) + _grown(edit.job_before, edit.jobs)

    def delete(self, key: str) -> bool:
        k = Keys(key)
        try:
            with self._tx(k) as tx:
                old = _generation_keys(tx, k)
                tx.hset(k.meta, {"live": 0, "gen": ""})
                tx.hincrby(k.meta, "version", 1)
        except ClusterUnknownError:
            return False
        self.kv.bulk([("delete", old)])
        return True

    # --- reads ------------------------------------------------------------------------------------
    def summary(self, key: str) -> tuple[int, int, int, list[tuple[str, int, float, float]]]:
        """(version, nodes, running jobs, per label: (label, nodes, lowest score, highest score))."""
        if isinstance(self.kv, RedisKv):  # one small script: one version, never a copy
            k = Keys(key)
            meta, nodes, jobs, zkeys, sizes, ends = summary_at_once(self.kv.r, k.meta, k.root)
            if meta.get("live") != "1":
                raise ClusterUnknownError(_name(k))
            k.at(meta["gen"])
            return int(meta.get("version", 0)), nodes, jobs, _partitions(k, zkeys, sizes, ends)
        return self.read(key, summary_read)

    def whole(self, key: str) -> tuple[int, list[Node], list[RunningJob]]:
        """(version, every node, every running job)."""
        version, nodes, running, _ = self.whole_with_windows(key)
        return version, nodes, running

    def whole_with_windows(self, key: str) -> tuple[int, list[Node], list[RunningJob], list[Window]]:
        """(version, every node, every running job, every window): for a pass that examines the
        whole cluster."""
        def read(tx: Tx, k: Keys) -> tuple[int, list[Node], list[RunningJob], list[Window]]:
            nodes = [decode_node(i, raw).node for i, raw in tx.hgetall(k.node).items()]
            jobs = tx.hgetall(k.job)
            running = decode_jobs(list(jobs), list(jobs.values()))
            return _version(tx, k), nodes, running, windows(tx, k)
        return self.read(key, read)

    def read(self, key: str, fn: Callable[[Tx, Keys], T]) -> T:
        """fn's answer over one whole version of the cluster, never refused because a writer moved
        the state: on Redis, a read moved once reads again under a lease (`app.store.reads`)."""
        k = Keys(key)
        if isinstance(self.kv, MemoryKv):  # one lock for the whole read: nothing interleaves
            with self.kv.tx(k.meta) as tx:
                return fn(self._checked(tx, k), k)
        try:
            return self._read_once(key, fn)
        except Moved:
            pass
        with Lease(self.kv.r, k.readers):
            for _ in range(LEASED_READS):
                try:
                    return self._read_once(key, fn)
                except Moved:
                    continue
        self.copied_reads += 1
        return ClusterCache(copy_generation(self.kv.r, k.meta, k.root), self.rules).read(key, fn)

    def _read_once(self, key: str, fn: Callable[[Tx, Keys], T]) -> T:
        k = Keys(key)
        reads = cast(Tx, RedisReadTx(self.kv.r, k.meta))  # type: ignore[union-attr]  # fn only reads
        return fn(self._checked(reads, k), k)

    # --- helpers ----------------------------------------------------------------------------------
    @contextmanager
    def _tx(self, k: Keys, if_match: int | None = None, must_exist: bool = True) -> Iterator[Tx]:
        """A write transaction on the version `k` names (409 when If-Match is stale or a writer
        commits first)."""
        if isinstance(self.kv, RedisKv):
            writers_wait(self.kv.r, k.readers)
        try:
            with self.kv.tx(k.meta) as tx:
                yield self._checked(tx, k, if_match, must_exist)
        except Conflict as exc:
            raise _stale(k, if_match, None) from exc

    @staticmethod
    def _checked(tx: Tx, k: Keys, if_match: int | None = None, must_exist: bool = True) -> Tx:
        """`tx`, once `k` points at the generation `meta` names and the cluster is as required."""
        live, version, gen = tx.hmget(k.meta, ["live", "version", "gen"])
        k.at(gen or "")
        if live != "1" and must_exist:
            raise ClusterUnknownError(_name(k))
        if if_match is not None and int(version or 0) < if_match:
            raise ClusterBehindError(
                f"cluster {_name(k)!r} is at version {int(version or 0)}, behind the {if_match} you were "
                "given: the cache lost changes it had acknowledged (it restarted without them). "
                f"PUT /clusters/{_name(k)} with the whole snapshot, then PATCH from the new version")
        if if_match is not None and int(version or 0) != if_match:
            raise _stale(k, if_match, version)
        return tx

    @staticmethod
    def _bump(tx: Tx, k: Keys) -> int:
        version = _version(tx, k) + 1
        tx.hset(k.meta, {"live": 1})
        tx.hincrby(k.meta, "version", 1)
        return version


def summary_read(tx: Tx, k: Keys) -> tuple[int, int, int, list[tuple[str, int, float, float]]]:
    """`ClusterCache.summary` read by round trips (in process; on Redis, `summary_at_once`)."""
    zkeys = sorted(z for z in tx.smembers(k.keys) if z.startswith(k.ns + "p:"))
    ends = tx.zrange_many([(z, 0, 0) for z in zkeys] + [(z, -1, -1) for z in zkeys])
    parts = _partitions(k, zkeys, tx.zcard_many(zkeys), ends)
    return _version(tx, k), tx.hlen(k.node), tx.hlen(k.job), parts


def windows(tx: Tx, k: Keys) -> list[Window]:
    """The cluster's maintenance windows, by id."""
    return [decode_window(i, raw) for i, raw in sorted(tx.hgetall(k.win).items())]


def _generation_keys(tx: Tx, k: Keys) -> list[str]:
    """Every key of the generation `k` names (to free once it is replaced)."""
    return [*sorted(tx.smembers(k.keys)), *k.fixed()] if k.gen else []


def _grown(before: dict[str, object], after: dict[str, object]) -> int:
    """Records added minus records removed."""
    return sum((after[i] is not None) - (before[i] is not None) for i in after)


def _version(tx: Tx, k: Keys) -> int:
    return int(tx.hget(k.meta, "version") or 0)


def _name(k: Keys) -> str:
    return k.root[len(PREFIX):-1].split(":", 1)[-1]


def _stale(k: Keys, if_match: int | None, version: str | None) -> VersionConflictError:
    """A writer's 409 (readers never get one)."""
    if if_match is None:
        return VersionConflictError(f"cluster {_name(k)!r} kept changing while this write tried to land "
                                    f"({RETRIES} tries): send it again")
    now = f"is at version {version}" if version is not None else "changed meanwhile"
    return VersionConflictError(f"cluster {_name(k)!r} {now}, not {if_match}: nothing was changed; "
                                "GET it (or use your last answer's version), then send your changes "
                                "again with that If-Match")


def _partitions(k: Keys, zkeys: list[str], sizes: list[int], ends: list[list[tuple[str, float]]]
                ) -> list[tuple[str, int, float, float]]:
    acc: dict[str, list[float]] = {}
    n = len(zkeys)
    for i, z in enumerate(zkeys):
        if not sizes[i]:
            continue
        label = json.loads(z[len(k.ns) + 2:])[1]
        a = acc.setdefault(label, [0, float("inf"), float("-inf")])
        a[0] += sizes[i]
        a[1] = min(a[1], ends[i][0][1])
        a[2] = max(a[2], ends[n + i][0][1])
    return [(label, int(a[0]), a[1], a[2]) for label, a in sorted(acc.items())]


def _counts(tx: Tx | Writes, k: Keys, before: list[Node], after: list[Node]) -> None:
    """Capacity-type counts and queue totals moved from the `before` records to the `after` ones."""
    kinds: Counter[tuple[str, tuple[str, ...], Triple, bool]] = Counter()
    totals: Counter[tuple[str, str, int]] = Counter()
    for sign, nodes in ((-1, before), (1, after)):
        for n in nodes:
            for kind in _kinds(n):
                kinds[kind] += sign
            if n.state == NodeState.UP:
                for q in n.serves:  # each queue counts its nodes
                    for r in range(3):
                        totals[q, "cap", r] += sign * n.cap[r]
                        totals[q, "used", r] += sign * n.alloc[r]
    delta: Counter[str] = Counter()
    for kind, v in kinds.items():
        for f in _type_fields(kind):
            delta[f] += v
    for f, v in delta.items():
        tx.hincrby(k.types, f, v)
    for (q, what, r), v in totals.items():
        tx.hincrby(k.qtot, json.dumps([q, what, r]), v)


def _idle(tx: Tx | Writes, k: Keys, before: list[Node], after: list[Node]) -> None:
    """The idle sets moved from the `before` records to the `after` ones: a node idle before
    leaves its sets, one idle after joins its sets (a node idle in both leaves and rejoins)."""
    for n in before:
        if is_idle(n):
            for q in n.serves:
                for label in idle_labels(n):
                    tx.zrem(k.idle(q, label), [n.id])
    joins: dict[str, dict[str, float]] = {}
    for n in after:
        if is_idle(n):
            for q in n.serves:
                for label in idle_labels(n):
                    joins.setdefault(k.idle(q, label), {})[n.id] = float(n.weight)
    for z, members in sorted(joins.items()):
        tx.zadd(z, members)
    tx.sadd(k.keys, sorted(joins))


class _Writer:
    """Moves nodes in the partition sorted sets, with hysteresis."""

    def __init__(self, tx: Tx | Writes, k: Keys, rules: PartitionRules) -> None:
        self.tx, self.k, self.rules = tx, k, rules

    def place(self, recs: list[NodeRec], before: dict[str, tuple[list[str], Triple] | None]) -> None:
        """Sorted-set membership for `recs`, given where each was (`before`, None = nowhere)."""
        if not recs:
            return
        cap = np.array([r.node.cap for r in recs], dtype=np.int64).T
        free = np.array([_free(r.node) for r in recs], dtype=np.int64).T
        scores, _ = fragment_scores(cap, free)
        adds: dict[str, dict[str, float]] = {}
        rems: dict[str, list[str]] = {}
        pos: dict[str, object] = {}
        for i, r in enumerate(recs):
            n, f = r.node, _free(r.node)
            old = before.get(n.id)
            keys = self._keys(n, f)
            if old is not None and self._stays(old, keys, n, f):
                continue
            for z in old[0] if old is not None else []:
                rems.setdefault(z, []).append(n.id)
            for z in keys:
                adds.setdefault(z, {})[n.id] = round(float(scores[i]), 9)
            pos[n.id] = json.dumps([keys, f])
        for z, members in rems.items():
            self.tx.zrem(z, members)
        for z, m in adds.items():
            self.tx.zadd(z, m)
        self.tx.sadd(self.k.keys, sorted(adds))
        self.tx.hset(self.k.pos, pos)

    def _stays(self, old: tuple[list[str], Triple], keys: list[str], n: Node, f: Triple) -> bool:
        """Hysteresis: a node still offered keeps its place until its free resources drift enough."""
        return bool(old[0]) == bool(keys) and not should_move(old[1], f, self.rules, n.cap)

    def _keys(self, n: Node, f: Triple) -> list[str]:
        if n.state != NodeState.UP:
            return []
        b = capacity_bucket(f)
        labels = sorted(offered_labels(n, f, self.rules))
        return [self.k.part(q, label, (n.weight, b)) for q in n.serves for label in labels]


class Edit:
    """One PATCH's changes on lazily read records; `commit` turns them into the writes."""

    def __init__(self, tx: Tx, k: Keys) -> None:
        self.tx, self.k = tx, k
        self.nodes: dict[str, NodeRec | None] = {}
        self.before: dict[str, Node | None] = {}
        self.jobs: dict[str, RunningJob | None] = {}
        self.job_before: dict[str, RunningJob | None] = {}
        self.windows: dict[str, Window | None] = {}  # changed ones (None: removed)

    def node(self, nid: str) -> NodeRec | None:
        if nid not in self.nodes:
            raw = self.tx.hget(self.k.node, nid)
            rec = decode_node(nid, raw) if raw is not None else None
            self.nodes[nid] = rec
            self.before[nid] = rec.node if rec else None
        return self.nodes[nid]

    def job(self, jid: str) -> RunningJob | None:
        if jid not in self.jobs:
            raw = self.tx.hget(self.k.job, jid)
            self.jobs[jid] = decode_job(jid, raw) if raw is not None else None
            self.job_before[jid] = self.jobs[jid]
        return self.jobs[jid]

    def set_node(self, nid: str, rec: NodeRec | None) -> None:
        self.node(nid)
        self.nodes[nid] = rec

    def set_job(self, jid: str, job: RunningJob | None) -> None:
        self.job(jid)
        self.jobs[jid] = job

    def window(self, wid: str) -> Window | None:
        if wid in self.windows:
            return self.windows[wid]
        raw = self.tx.hget(self.k.win, wid)
        return decode_window(wid, raw) if raw is not None else None

    def set_window(self, wid: str, window: Window | None) -> None:
        self.windows[wid] = window

    def commit(self, rules: PartitionRules) -> None:
        tx, k = self.tx, self.k
        touched = sorted(self.nodes)
        raw_pos = tx.hmget(k.pos, touched)
        before = {nid: _decode_pos(p) for nid, p in zip(touched, raw_pos, strict=True)}
        live = [r for nid in touched if (r := self.nodes[nid]) is not None]
        gone = [nid for nid in touched if self.nodes[nid] is None and self.before[nid] is not None]
        tx.hset(k.node, {r.node.id: encode_node(r) for r in live})
        tx.hdel(k.node, gone)
        for nid in gone:
            old = before.get(nid)
            for z in old[0] if old else []:
                tx.zrem(z, [nid])
        tx.hdel(k.pos, gone)
        _Writer(tx, k, rules).place(live, before)
        was = [n for n in self.before.values() if n is not None]
        _counts(tx, k, was, [r.node for r in live])
        _idle(tx, k, was, [r.node for r in live])
        self._commit_jobs()
        tx.hset(k.win, {i: encode_window(w) for i, w in sorted(self.windows.items()) if w is not None})
        tx.hdel(k.win, sorted(i for i, w in self.windows.items() if w is None))

    def _commit_jobs(self) -> None:
        tx, k = self.tx, self.k
        for jid in sorted(self.jobs):
            old, new = self.job_before[jid], self.jobs[jid]
            if old is not None and (new is None or new != old):
                for q in end_queues(old, self._serves):
                    tx.zrem(k.ends(q), [jid])
            if new is None:
                tx.hdel(k.job, [jid] if old is not None else [])
            elif new != old:
                tx.hset(k.job, {jid: encode_job(new)})
                for q in end_queues(new, self._serves):
                    tx.zadd(k.ends(q), {jid: new.end_time})
                    tx.sadd(k.keys, [k.ends(q)])

    def _serves(self, nid: str) -> tuple[str, ...]:
        """The queues a node serves (a running job's nodes exist: removing a busy node is refused)."""
        rec = self.node(nid)
        return rec.node.serves if rec is not None else ()


def _decode_pos(raw: str | None) -> tuple[list[str], Triple] | None:
    if raw is None:
        return None
    keys, f = json.loads(raw)
    return keys, (f[0], f[1], f[2])


class IndexSource:
    """`app.sched.narrow.Source` over one read transaction."""

    def __init__(self, tx: Tx, k: Keys) -> None:
        self.tx, self.k = tx, k
        self.version = _version(tx, k)
        self._buckets: dict[tuple[str, str], list[Place]] = {}
        self._names: dict[tuple[str, str, Place], str] = {}
        for z in tx.smembers(k.keys):
            if z.startswith(k.ns + "p:"):
                q, label, b, *weight = json.loads(z[len(k.ns) + 2:])  # no weight: written before tiers
                place = (weight[0] if weight else 1, (b[0], b[1], b[2]))
                self._buckets.setdefault((q, label), []).append(place)
                self._names[q, label, place] = z
        self.recs: dict[str, NodeRec] = {}
        self._read: dict[str, list[str]] = {}  # each sorted set's members read so far, in order
        self._ended: set[str] = set()  # sorted sets read to their end

    def queues(self) -> list[str]:
        return sorted({q for q, _ in self._buckets})

    def buckets(self, queue: str, label: str) -> list[Place]:
        return sorted(self._buckets.get((queue, label), []))

    def pages(self, asks: list[tuple[str, str, Place, int, int]]) -> list[list[str]]:
        """Members start..start+count-1 of each asked sorted set; what was read once is not read again."""
        if not self._read:
            self._prefetch()
        keys = [self._names.get((q, lab, b)) or self.k.part(q, lab, b) for q, lab, b, _, _ in asks]
        missing = sorted({z: s + n for z, (_, _, _, s, n) in zip(keys, asks, strict=True)
                          if z not in self._ended and len(self._read.get(z, [])) < s + n}.items())
        ranges = [(z, len(self._read.get(z, [])), upto - 1) for z, upto in missing]
        for (z, first, last), got in zip(ranges, self.tx.zrange_many(ranges), strict=True):
            self._read.setdefault(z, []).extend(m for m, _ in got)
            if len(got) < last - first + 1:
                self._ended.add(z)
        return [self._read.get(z, [])[s:s + n] for z, (_, _, _, s, n) in zip(keys, asks, strict=True)]

    def _prefetch(self, count: int = 16) -> None:
        """The first members of every partition's sorted sets, in one round trip: most classes'
        first pages come from here."""
        keys = sorted(self._names.values())
        for z, got in zip(keys, self.tx.zrange_many([(z, 0, count - 1) for z in keys]), strict=True):
            self._read[z] = [m for m, _ in got]
            if len(got) < count:
                self._ended.add(z)

    def nodes(self, ids: list[str]) -> dict[str, Node]:
        raw = self.tx.hmget(self.k.node, ids)
        for nid, r in zip(ids, raw, strict=True):
            if r is not None:
                self.recs[nid] = decode_node(nid, r)
        return {nid: self.recs[nid].node for nid in ids if nid in self.recs}

    def ending_first(self, queue: str, start: int, count: int) -> list[tuple[str, list[str]]]:
        ids = [m for m, _ in self.tx.zrange_many([(self.k.ends(queue), start, start + count - 1)])[0]]
        return [(j.id, [n for n, _ in j.alloc]) for j in self.running(ids)]

    def idle(self, queue: str, label: str, start: int, count: int) -> list[str]:
        return [m for m, _ in self.tx.zrange_many([(self.k.idle(queue, label), start, start + count - 1)])[0]]

    def running(self, ids: list[str]) -> list[RunningJob]:
        return decode_jobs(ids, self.tx.hmget(self.k.job, ids))

    def snapshot(self, now: float, narrowed: Narrowed) -> Snapshot:
        """The pass's snapshot: the chosen nodes, the running jobs on them, the whole cluster's facts."""
        chosen = sorted(narrowed.chosen)
        job_ids = sorted({j for nid in chosen for j in self.recs[nid].jobs})
        running = decode_running(job_ids, self.tx.hmget(self.k.job, job_ids))
        return Snapshot(now, tuple(self.recs[n].node for n in chosen), running,
                        self.whole_facts(), windows=tuple(windows(self.tx, self.k)))

    def whole_facts(self) -> WholeCluster:
        counts: dict[tuple, list[int]] = {}  # type: ignore[type-arg]
        for f, v in self.tx.hgetall(self.k.types).items():
            q, labels, c, m, g, kind = json.loads(f)
            counts.setdefault((q, frozenset(labels), (c, m, g)), [0, 0])[kind == "up"] += int(v)
        types = tuple(CapacityType(q, lab, cap, n, up) for (q, lab, cap), (n, up) in sorted(
            counts.items(), key=repr) if n > 0)
        cap: dict[str, list[int]] = {t.queue: [0, 0, 0] for t in types}  # every queue, even all down
        used: dict[str, list[int]] = {t.queue: [0, 0, 0] for t in types}
        for f, v in self.tx.hgetall(self.k.qtot).items():
            q, kind, r = json.loads(f)
            if q in cap:
                (cap if kind == "cap" else used)[q][r] = int(v)
        return WholeCluster(
            self.tx.hlen(self.k.node), types,
            {q: (c[0], c[1], c[2]) for q, c in cap.items()},
            {q: (u[0], u[1], u[2]) for q, u in used.items()})


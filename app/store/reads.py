"""Consistent reads of a cluster on Redis, never refused because a writer moved the state.

A reader (GET /clusters/{id}, a pass on a cached cluster) makes several round trips. Each one is
a MULTI/EXEC that also reads the guard's `version`; when the version differs from the first round
trip's, a writer committed in between and the reader raises `Moved` before it sees a mix of two
versions (every write bumps the version, so one version means one state).

A reader moved once takes a lease (`Lease`: a member of the cluster's `readers` sorted set, scored
by its expiry) and reads again: writers wait while a live lease exists (`writers_wait`, at most
`WRITER_WAIT_S`), so only writers already past that check can still move it. Should that go on
(a lease held past the writers' patience), the reader's last resort is `copy_generation`: one Lua
script that copies the whole generation atomically into an in-process `MemoryKv` (it holds Redis
for the copy's time, ~1 s at 10,000 nodes, hence last). A reader always gets one version whole.
GET's summary is small, so it is always read in one atomic script (`summary_at_once`).
"""

from __future__ import annotations

import time
import uuid

import redis
from sortedcontainers import SortedList

from app.errors import StoreUnavailableError
from app.store.kv import MemoryKv

HASHES = ("node", "job", "types", "qtot", "win")  # what a read needs of a generation (not `pos`)
LEASE_MS = 5_000  # a reader's lease lapses by itself after this (a reader that died)
WRITER_WAIT_S = 1.0  # a writer waits this long at most for leased readers, then writes anyway

_COPY = """
local out = {redis.call('HGETALL', KEYS[1])}
local gen = redis.call('HGET', KEYS[1], 'gen')
if not gen or gen == '' then return out end
local ns = ARGV[1] .. 'g' .. gen .. ':'
for i = 2, #ARGV do table.insert(out, redis.call('HGETALL', ns .. ARGV[i])) end
local zkeys = redis.call('SMEMBERS', ns .. 'keys')
table.insert(out, zkeys)
for _, z in ipairs(zkeys) do table.insert(out, redis.call('ZRANGE', z, 0, -1, 'WITHSCORES')) end
return out
"""


_SUMMARY = """
local meta = redis.call('HGETALL', KEYS[1])
local gen = redis.call('HGET', KEYS[1], 'gen')
if redis.call('HGET', KEYS[1], 'live') ~= '1' or not gen then return {meta} end
local ns = ARGV[1] .. 'g' .. gen .. ':'
local prefix = ns .. 'p:'
local parts = {}
for _, z in ipairs(redis.call('SMEMBERS', ns .. 'keys')) do
  if string.sub(z, 1, #prefix) == prefix then
    table.insert(parts, {z, redis.call('ZCARD', z), redis.call('ZRANGE', z, 0, 0, 'WITHSCORES'),
                         redis.call('ZRANGE', z, -1, -1, 'WITHSCORES')})
  end
end
return {meta, redis.call('HLEN', ns .. 'node'), redis.call('HLEN', ns .. 'job'), parts}
"""

Ends = list[list[tuple[str, float]]]


class Moved(Exception):
    """A writer committed between two round trips of a read; nothing read may be used."""


class RedisReadTx:
    """`app.store.kv.Tx`'s reads, each round trip atomic and checked against the first's version."""

    def __init__(self, client: redis.Redis, guard: str) -> None:
        self.r, self.guard = client, guard
        self.version: object = Moved  # not read yet

    def _run(self, queue: list[tuple[str, tuple[object, ...]]]) -> list[object]:
        pipe = self.r.pipeline(transaction=True)
        pipe.hget(self.guard, "version")
        for name, args in queue:
            if name == "zrange":
                key, first, last = args
                pipe.zrange(key, first, last, withscores=True)  # type: ignore[arg-type]
            else:
                getattr(pipe, name)(*args)
        try:
            version, *got = pipe.execute()
        except redis.RedisError as exc:
            raise StoreUnavailableError(f"the cluster cache (Redis) cannot be reached: {exc}") from exc
        if self.version is Moved:
            self.version = version
        elif version != self.version:
            raise Moved(self.guard)
        return got

    def _one(self, name: str, *args: object) -> object:
        return self._run([(name, args)])[0]

    def hget(self, key: str, field: str) -> str | None:
        return self._one("hget", key, field)  # type: ignore[return-value]

    def hmget(self, key: str, fields: list[str]) -> list[str | None]:
        return self._one("hmget", key, fields) if fields else []  # type: ignore[return-value]

    def hgetall(self, key: str) -> dict[str, str]:
        return self._one("hgetall", key)  # type: ignore[return-value]

    def hlen(self, key: str) -> int:
        return int(str(self._one("hlen", key)))

    def zrange_many(self, ranges: list[tuple[str, int, int]]) -> list[list[tuple[str, float]]]:
        if not ranges:
            return []
        return self._run([("zrange", (z, a, b)) for z, a, b in ranges])  # type: ignore[return-value]

    def zcard_many(self, keys: list[str]) -> list[int]:
        return [int(n) for n in self._run([("zcard", (z,)) for z in keys])] if keys else []  # type: ignore[call-overload]

    def smembers(self, key: str) -> set[str]:
        return self._one("smembers", key)  # type: ignore[return-value]


class Lease:
    """A reader's hold on a cluster: writers that have not checked yet wait until it is given back."""

    def __init__(self, client: redis.Redis, key: str) -> None:
        self.r, self.key, self.token = client, key, uuid.uuid4().hex

    def __enter__(self) -> Lease:
        now = _now_ms()
        pipe = self.r.pipeline(transaction=False)
        pipe.zremrangebyscore(self.key, "-inf", now)  # lapsed leases of readers that died
        pipe.zadd(self.key, {self.token: now + LEASE_MS})
        pipe.pexpire(self.key, LEASE_MS)
        _run(pipe)
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.r.zrem(self.key, self.token)
        except redis.RedisError:
            pass  # it lapses by itself


def writers_wait(client: redis.Redis, key: str) -> None:
    """Before a write: wait while a reader holds a live lease on the cluster (WRITER_WAIT_S at most)."""
    deadline = time.monotonic() + WRITER_WAIT_S
    while time.monotonic() < deadline:
        pipe = client.pipeline(transaction=False)
        pipe.zcount(key, _now_ms(), "+inf")
        if not _run(pipe)[0]:
            return
        time.sleep(0.002)


def _now_ms() -> int:
    return int(time.time() * 1000)  # the service hosts' clocks agree well within LEASE_MS (NTP)


def _run(pipe: redis.client.Pipeline) -> list[object]:
    try:
        return pipe.execute()  # type: ignore[no-any-return]
    except redis.RedisError as exc:
        raise StoreUnavailableError(f"the cluster cache (Redis) cannot be reached: {exc}") from exc


def copy_generation(client: redis.Redis, meta: str, root: str) -> MemoryKv:
    """The guard hash `meta` and the generation it names (under `{root}g{gen}:`), copied in one
    atomic step into a MemoryKv: what a reader reads when writers keep moving the state."""
    try:
        got = client.eval(_COPY, 1, meta, root, *HASHES)  # the service's only EVAL: a count of copies
    except redis.RedisError as exc:
        raise StoreUnavailableError(f"the cluster cache (Redis) cannot be reached: {exc}") from exc
    kv = MemoryKv()
    kv._hashes[meta] = _pairs(got[0])
    if len(got) == 1:
        return kv
    ns = f"{root}g{kv._hashes[meta]['gen']}:"
    for name, flat in zip(HASHES, got[1:], strict=False):
        kv._hashes[ns + name] = _pairs(flat)
    zkeys = got[1 + len(HASHES)]
    kv._sets[ns + "keys"] = set(zkeys)
    for z, flat in zip(zkeys, got[2 + len(HASHES):], strict=True):
        scores = {m: float(s) for m, s in _pairs(flat).items()}
        kv._zsets[z] = (scores, SortedList((s, m) for m, s in scores.items()))
    return kv


def summary_at_once(client: redis.Redis, meta: str, root: str
                    ) -> tuple[dict[str, str], int, int, list[str], list[int], Ends]:
    """What GET /clusters/{id} shows, read in one atomic step (small, whatever the cluster's size):
    the guard hash, node and job counts, each partition sorted set's name and size, and its first
    then its last member (all firsts, then all lasts)."""
    try:
        got = client.register_script(_SUMMARY)(keys=[meta], args=[root])  # EVALSHA
    except redis.RedisError as exc:
        raise StoreUnavailableError(f"the cluster cache (Redis) cannot be reached: {exc}") from exc
    if len(got) == 1:
        return _pairs(got[0]), 0, 0, [], [], []
    parts = sorted(got[3])
    ends = [[(e[0], float(e[1]))] if e else [] for i in (2, 3) for e in (p[i] for p in parts)]
    return _pairs(got[0]), int(got[1]), int(got[2]), [p[0] for p in parts], [int(p[1]) for p in parts], ends


def _pairs(flat: list[str]) -> dict[str, str]:
    return dict(zip(flat[::2], flat[1::2], strict=True))

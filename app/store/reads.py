"""Consistent reads of a cluster on Redis, never refused because a writer moved the state.

A reader (GET /clusters/{id}, a pass on a cached cluster) makes several round trips. Each one is
a MULTI/EXEC that also reads the guard's `version`; when the version differs from the first round
trip's, a writer committed in between and the reader raises `Moved` before it sees a mix of two
versions (every write bumps the version, so one version means one state). The caller retries a
few times, then falls back to `copy_generation`: one Lua script that copies the whole generation
atomically into an in-process `MemoryKv`, where the same read runs undisturbed. Writers never
wait for readers, and a reader always gets one version whole, whatever the write rate.
"""

from __future__ import annotations

import redis
from sortedcontainers import SortedList

from app.errors import StoreUnavailableError
from app.store.kv import MemoryKv

HASHES = ("node", "job", "types", "qtot")  # what a read needs of a generation (not `pos`)

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


def copy_generation(client: redis.Redis, meta: str, root: str) -> MemoryKv:
    """The guard hash `meta` and the generation it names (under `{root}g{gen}:`), copied in one
    atomic step into a MemoryKv: what a reader reads when writers keep moving the state."""
    try:
        got = client.eval(_COPY, 1, meta, root, *HASHES)
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


def _pairs(flat: list[str]) -> dict[str, str]:
    return dict(zip(flat[::2], flat[1::2], strict=True))

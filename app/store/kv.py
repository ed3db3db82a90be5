"""The few Redis primitives the cluster index needs (hashes, sorted sets, sets), with transactions,
on Redis or in process. The index is written once against `Tx`; both backends run the same code.

A transaction reads immediately and buffers its writes; at the end the writes land all at once, and
only if no other writer touched the cluster's `guard` key since the transaction began:
- Redis: WATCH guard, read, then MULTI/EXEC; a concurrent writer makes EXEC fail (`Conflict`), a
  crash before EXEC leaves nothing. An error raised on what was read becomes a `Conflict` too when
  a writer moved the state meanwhile (the reads may have been a mix). Readers that must never be
  refused use `app.store.reads` instead.
- memory: one lock held for the whole transaction; writes applied at the end.

`bulk` applies buffered writes outside any transaction, in pieces of at most `PIECE` fields, so a
100,000-node snapshot never becomes one multi-second EXEC that stalls every other client (and
outlives the client's socket timeout). The index uses it only on keys nobody reads yet (a new
generation) or nobody reads any more (an old one).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol

import redis
from sortedcontainers import SortedList

from app.errors import StoreUnavailableError

Op = tuple  # (method name, *args), replayed on commit
PIECE = 2_000  # fields or members per command in `bulk`


class Conflict(Exception):
    """Another writer changed the guarded key during the transaction; nothing was written."""


class Tx(Protocol):
    def hget(self, key: str, field: str) -> str | None: ...
    def hmget(self, key: str, fields: list[str]) -> list[str | None]: ...
    def hgetall(self, key: str) -> dict[str, str]: ...
    def hlen(self, key: str) -> int: ...
    def zrange_many(self, ranges: list[tuple[str, int, int]]) -> list[list[tuple[str, float]]]: ...
    def zcard_many(self, keys: list[str]) -> list[int]: ...
    def smembers(self, key: str) -> set[str]: ...
    def exists(self, keys: list[str]) -> int: ...
    def hset(self, key: str, mapping: dict[str, object]) -> None: ...
    def hdel(self, key: str, fields: list[str]) -> None: ...
    def hincrby(self, key: str, field: str, n: int) -> None: ...
    def zadd(self, key: str, mapping: dict[str, float]) -> None: ...
    def zrem(self, key: str, members: list[str]) -> None: ...
    def sadd(self, key: str, members: list[str]) -> None: ...
    def delete(self, keys: list[str]) -> None: ...
    def persist(self, keys: list[str]) -> None: ...


class Writes:
    """Buffers the writes of a transaction as (name, *args); empty ones are dropped."""

    def __init__(self) -> None:
        self.ops: list[Op] = []

    def _add(self, name: str, *args: object) -> None:
        if args[-1]:
            self.ops.append((name, *args))

    def hset(self, key: str, mapping: dict[str, object]) -> None:
        self._add("hset", key, mapping)

    def hdel(self, key: str, fields: list[str]) -> None:
        self._add("hdel", key, fields)

    def hincrby(self, key: str, field: str, n: int) -> None:
        if n:
            self.ops.append(("hincrby", key, field, n))

    def zadd(self, key: str, mapping: dict[str, float]) -> None:
        self._add("zadd", key, mapping)

    def zrem(self, key: str, members: list[str]) -> None:
        self._add("zrem", key, members)

    def sadd(self, key: str, members: list[str]) -> None:
        self._add("sadd", key, members)

    def delete(self, keys: list[str]) -> None:
        self._add("delete", keys)

    def persist(self, keys: list[str]) -> None:
        """Keep keys written by `bulk(..., expire_s=)` for good."""
        self._add("persist", keys)


class MemoryKv:
    """Dicts and sorted lists behind one lock; the in-process default."""

    backend = "memory"

    def __init__(self) -> None:
        self._hashes: dict[str, dict[str, str]] = {}
        self._zsets: dict[str, tuple[dict[str, float], SortedList]] = {}
        self._sets: dict[str, set[str]] = {}
        self._lock = threading.RLock()

    @contextmanager
    def tx(self, guard: str) -> Iterator[Tx]:
        with self._lock:
            t = _MemoryTx(self)
            yield t
            for name, *args in t.ops:
                getattr(self, "_" + name)(*args)

    def bulk(self, ops: list[Op], expire_s: int | None = None) -> None:
        """Apply writes piece by piece, letting other threads in between (`expire_s` matters only
        to Redis: what a dead process leaves in its memory dies with it)."""
        for op in _pieces(ops):
            with self._lock:
                getattr(self, "_" + op[0])(*op[1:])

    # --- writes, applied at commit ---------------------------------------------------------------
    def _hset(self, key: str, mapping: dict[str, object]) -> None:
        self._hashes.setdefault(key, {}).update({f: str(v) for f, v in mapping.items()})

    def _hdel(self, key: str, fields: list[str]) -> None:
        h = self._hashes.get(key, {})
        for f in fields:
            h.pop(f, None)

    def _hincrby(self, key: str, field: str, n: int) -> None:
        h = self._hashes.setdefault(key, {})
        h[field] = str(int(h.get(field, 0)) + n)

    def _zadd(self, key: str, mapping: dict[str, float]) -> None:
        scores, ordered = self._zsets.setdefault(key, ({}, SortedList()))
        for member, score in mapping.items():
            old = scores.get(member)
            if old is not None:
                ordered.remove((old, member))
            scores[member] = score
            ordered.add((score, member))

    def _zrem(self, key: str, members: list[str]) -> None:
        scores, ordered = self._zsets.get(key, ({}, SortedList()))
        for member in members:
            old = scores.pop(member, None)
            if old is not None:
                ordered.remove((old, member))

    def _sadd(self, key: str, members: list[str]) -> None:
        self._sets.setdefault(key, set()).update(members)

    def _persist(self, keys: list[str]) -> None:
        pass

    def _delete(self, keys: list[str]) -> None:
        for k in keys:
            self._hashes.pop(k, None)
            self._zsets.pop(k, None)
            self._sets.pop(k, None)


class _MemoryTx(Writes):
    def __init__(self, kv: MemoryKv) -> None:
        super().__init__()
        self.kv = kv

    def hget(self, key: str, field: str) -> str | None:
        return self.kv._hashes.get(key, {}).get(field)

    def hmget(self, key: str, fields: list[str]) -> list[str | None]:
        h = self.kv._hashes.get(key, {})
        return [h.get(f) for f in fields]

    def hgetall(self, key: str) -> dict[str, str]:
        return dict(self.kv._hashes.get(key, {}))

    def hlen(self, key: str) -> int:
        return len(self.kv._hashes.get(key, {}))

    def zrange_many(self, ranges: list[tuple[str, int, int]]) -> list[list[tuple[str, float]]]:
        out = []
        for key, start, stop in ranges:
            ordered = self.kv._zsets.get(key, ({}, SortedList()))[1]
            end = len(ordered) if stop == -1 else stop + 1
            out.append([(m, s) for s, m in ordered[start:end]])
        return out

    def zcard_many(self, keys: list[str]) -> list[int]:
        return [len(self.kv._zsets.get(k, ({}, ()))[0]) for k in keys]

    def smembers(self, key: str) -> set[str]:
        return set(self.kv._sets.get(key, set()))

    def exists(self, keys: list[str]) -> int:
        kv = self.kv
        return sum(k in kv._hashes or k in kv._zsets or k in kv._sets for k in keys)


class RedisKv:
    """The same on a Redis server: WATCH/MULTI/EXEC transactions, batched reads."""

    backend = "redis"

    def __init__(self, client: redis.Redis) -> None:
        self.r = client

    @contextmanager
    def tx(self, guard: str) -> Iterator[Tx]:
        try:
            with self.r.pipeline() as pipe:
                pipe.watch(guard)
                t = _RedisTx(self.r, pipe)
                try:
                    yield t
                except redis.RedisError:
                    raise  # the store failed: 503, whatever else happened
                except Exception:
                    _raise_if_moved(pipe, guard)  # what was read may be a mix: a conflict, not an error
                    raise
                pipe.multi()
                pipe.exists(guard)  # an EXEC even with no writes, so a read-only tx is checked too
                for op in t.ops:
                    _queue(pipe, *op)
                pipe.execute()
        except redis.WatchError as exc:
            if _connection_lost(exc):
                raise StoreUnavailableError(
                    "the connection to the cluster cache (Redis) broke during the change: it may or may "
                    "not have landed; GET the cluster to see its version before sending it again") from exc
            raise Conflict(guard) from exc
        except redis.RedisError as exc:
            raise StoreUnavailableError(f"the cluster cache (Redis) cannot be reached: {exc}") from exc

    def bulk(self, ops: list[Op], expire_s: int | None = None) -> None:
        """Apply writes piece by piece, a pipeline (not a transaction) of up to 50 pieces at a time;
        keys are freed with UNLINK, in the background of the server. With `expire_s`, each key
        written expires unless made permanent (`persist`) by then: a writer that dies half-way
        leaves nothing behind for good."""
        try:
            batch = self.r.pipeline(transaction=False)
            for i, op in enumerate(_pieces(ops), 1):
                _queue(batch, *op)
                if expire_s and op[0] != "delete":
                    batch.expire(op[1], expire_s)
                if i % 50 == 0:
                    batch.execute()
            batch.execute()
        except redis.RedisError as exc:
            raise StoreUnavailableError(f"the cluster cache (Redis) cannot be reached: {exc}") from exc


class _RedisTx(Writes):
    def __init__(self, client: redis.Redis, pipe: redis.client.Pipeline) -> None:
        super().__init__()
        self.r = client  # batched reads go on another connection; the WATCH stays on `pipe`
        self.pipe = pipe

    def hget(self, key: str, field: str) -> str | None:
        return self.pipe.hget(key, field)  # type: ignore[return-value]

    def hmget(self, key: str, fields: list[str]) -> list[str | None]:
        return self.pipe.hmget(key, fields) if fields else []  # type: ignore[return-value]

    def hgetall(self, key: str) -> dict[str, str]:
        return self.pipe.hgetall(key)  # type: ignore[return-value]

    def hlen(self, key: str) -> int:
        return int(self.pipe.hlen(key))  # type: ignore[arg-type]

    def zrange_many(self, ranges: list[tuple[str, int, int]]) -> list[list[tuple[str, float]]]:
        batch = self.r.pipeline(transaction=False)
        for key, start, stop in ranges:
            batch.zrange(key, start, stop, withscores=True)
        return batch.execute()  # type: ignore[no-any-return]

    def zcard_many(self, keys: list[str]) -> list[int]:
        batch = self.r.pipeline(transaction=False)
        for key in keys:
            batch.zcard(key)
        return [int(n) for n in batch.execute()]

    def smembers(self, key: str) -> set[str]:
        return self.pipe.smembers(key)  # type: ignore[return-value]

    def exists(self, keys: list[str]) -> int:
        return int(self.pipe.exists(*keys)) if keys else 0  # type: ignore[arg-type]


def _connection_lost(exc: redis.WatchError) -> bool:
    """redis-py reports a connection lost under WATCH as a WatchError: not another writer, and an
    EXEC already sent may have been applied."""
    lost = isinstance(exc.__context__, (redis.ConnectionError, redis.TimeoutError))
    return lost or "occurred while watching" in str(exc)


def _raise_if_moved(pipe: redis.client.Pipeline, guard: str) -> None:
    """Conflict when another writer touched `guard` since the WATCH (an empty EXEC tells)."""
    try:
        pipe.multi()
        pipe.exists(guard)
        pipe.execute()
    except redis.WatchError as exc:
        if _connection_lost(exc):
            raise redis.ConnectionError(str(exc)) from exc  # a 503, not a conflict
        raise Conflict(guard) from exc


def _queue(pipe: redis.client.Pipeline, name: str, key: object, arg: object = None,
           n: int = 0) -> None:
    """Queue one buffered write on a MULTI pipeline."""
    if name == "hset":
        pipe.hset(key, mapping=arg)  # type: ignore[arg-type]
    elif name == "hincrby":
        pipe.hincrby(key, arg, n)  # type: ignore[arg-type]
    elif name == "zadd":
        pipe.zadd(key, arg)  # type: ignore[arg-type]
    elif name == "delete":
        pipe.unlink(*key)  # type: ignore[misc]
    elif name == "persist":
        for k in key:  # type: ignore[attr-defined]
            pipe.persist(k)
    else:  # hdel, zrem, sadd: key and a list of fields or members
        getattr(pipe, name)(key, *arg)  # type: ignore[misc]


def _pieces(ops: list[Op]) -> Iterator[Op]:
    """The same writes with no command over PIECE fields, members or keys."""
    for name, key, *rest in ops:
        if name == "hincrby":
            yield (name, key, *rest)
            continue
        items = key if name == "delete" else rest[0]
        seq = list(items.items()) if isinstance(items, dict) else list(items)
        for i in range(0, len(seq), PIECE):
            part = seq[i:i + PIECE]
            if name == "delete":
                yield (name, part)
            else:
                yield (name, key, dict(part) if isinstance(items, dict) else part)


def index_kv(redis_url: str | None) -> MemoryKv | RedisKv:
    if not redis_url:
        return MemoryKv()
    client = redis.Redis.from_url(redis_url, socket_timeout=2.0, socket_connect_timeout=2.0,
                                  decode_responses=True)
    return RedisKv(client)

"""Cached cluster snapshots, versioned: Redis when configured (one hash per cluster, every update a
Lua script, so a crash or a concurrent writer never leaves half an update), else process memory.

A snapshot is kept as the JSON of its ClusterPut. `replace` is compare-and-set on the version: the
loser of two concurrent PATCHes gets VersionConflictError and changes nothing.
"""

from __future__ import annotations

import threading
from typing import Protocol

import redis

from app.errors import NotFoundError, StoreUnavailableError, VersionConflictError

PREFIX = "hpcsched:cluster:"

_PUT = """
local v = redis.call('HINCRBY', KEYS[1], 'version', 1)
redis.call('HSET', KEYS[1], 'state', ARGV[1])
return v
"""
_REPLACE = """
local v = redis.call('HGET', KEYS[1], 'version')
if not v then return -1 end
if tonumber(v) ~= tonumber(ARGV[1]) then return -2 end
redis.call('HSET', KEYS[1], 'version', tonumber(v) + 1, 'state', ARGV[2])
return tonumber(v) + 1
"""


class ClusterStore(Protocol):
    backend: str

    def put(self, key: str, state: bytes) -> int: ...
    def get(self, key: str) -> tuple[int, bytes] | None: ...
    def replace(self, key: str, if_match: int, state: bytes) -> int: ...
    def delete(self, key: str) -> bool: ...


def _conflict(key: str, if_match: int) -> VersionConflictError:
    return VersionConflictError(f"cluster {key.split(':', 1)[-1]!r} is no longer at version {if_match}: "
                                "read it again and resend the changes")


class MemoryClusterStore:
    backend = "memory"

    def __init__(self) -> None:
        self._data: dict[str, tuple[int, bytes]] = {}
        self._versions: dict[str, int] = {}  # survive DELETE, so a re-created cluster never reuses one
        self._lock = threading.Lock()

    def put(self, key: str, state: bytes) -> int:
        with self._lock:
            v = self._versions.get(key, 0) + 1
            self._versions[key] = v
            self._data[key] = (v, state)
            return v

    def get(self, key: str) -> tuple[int, bytes] | None:
        with self._lock:
            return self._data.get(key)

    def replace(self, key: str, if_match: int, state: bytes) -> int:
        with self._lock:
            current = self._data.get(key)
            if current is None:
                raise NotFoundError(f"no cluster {key.split(':', 1)[-1]!r}")
            if current[0] != if_match:
                raise _conflict(key, if_match)
            v = if_match + 1
            self._versions[key] = v
            self._data[key] = (v, state)
            return v

    def delete(self, key: str) -> bool:
        with self._lock:
            return self._data.pop(key, None) is not None


class RedisClusterStore:
    backend = "redis"

    def __init__(self, client: redis.Redis) -> None:
        self._r = client
        self._put = client.register_script(_PUT)
        self._replace = client.register_script(_REPLACE)

    def put(self, key: str, state: bytes) -> int:
        with _mapped():
            return int(self._put(keys=[PREFIX + key], args=[state]))

    def get(self, key: str) -> tuple[int, bytes] | None:
        with _mapped():
            version, state = self._r.hmget(PREFIX + key, ["version", "state"])
        if state is None:
            return None
        return int(version), state  # type: ignore[arg-type, return-value]

    def replace(self, key: str, if_match: int, state: bytes) -> int:
        with _mapped():
            v = int(self._replace(keys=[PREFIX + key], args=[if_match, state]))
        if v == -1:
            raise NotFoundError(f"no cluster {key.split(':', 1)[-1]!r}")
        if v == -2:
            raise _conflict(key, if_match)
        return v

    def delete(self, key: str) -> bool:
        with _mapped():  # keep the version counter: a re-created cluster continues the numbering
            return bool(self._r.hdel(PREFIX + key, "state"))


class _mapped:
    """Redis errors become StoreUnavailableError (503)."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, exc: BaseException | None, tb: object) -> bool:
        if isinstance(exc, redis.RedisError):
            raise StoreUnavailableError(f"the cluster cache (Redis) cannot be reached: {exc}") from exc
        return False


def cluster_store(redis_url: str | None) -> ClusterStore:
    if not redis_url:
        return MemoryClusterStore()
    return RedisClusterStore(redis.Redis.from_url(redis_url, socket_timeout=2.0, socket_connect_timeout=2.0))

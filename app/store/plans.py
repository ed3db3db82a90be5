"""Where DAG plans wait for a portal to poll them: Redis when configured, else this process's memory.

Both keep a plan as the JSON bytes of its answer for `ttl_s` seconds. Redis errors become
StoreUnavailableError (503), so a caller can tell "not found" from "cannot look".
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from typing import Protocol

import redis

from app.errors import StoreUnavailableError

PREFIX = "hpcsched:plan:"


class PlanStore(Protocol):
    backend: str  # "memory" or "redis"

    def save(self, plan_id: str, body: bytes, ttl_s: int) -> None: ...
    def load(self, plan_id: str) -> bytes | None: ...
    def ping(self) -> None: ...  # StoreUnavailableError when the backend cannot be reached


class MemoryPlanStore:
    """Bounded (oldest evicted first) and expiring; safe across the thread pool."""

    backend = "memory"

    def __init__(self, max_plans: int = 1000, clock=time.monotonic) -> None:  # type: ignore[no-untyped-def]
        self._plans: OrderedDict[str, tuple[float, bytes]] = OrderedDict()
        self._lock = threading.Lock()
        self._max = max_plans
        self._clock = clock

    def save(self, plan_id: str, body: bytes, ttl_s: int) -> None:
        with self._lock:
            self._plans[plan_id] = (self._clock() + ttl_s, body)
            self._plans.move_to_end(plan_id)
            while len(self._plans) > self._max:
                self._plans.popitem(last=False)

    def load(self, plan_id: str) -> bytes | None:
        with self._lock:
            entry = self._plans.get(plan_id)
            if entry is None:
                return None
            if entry[0] <= self._clock():
                del self._plans[plan_id]
                return None
            return entry[1]

    def ping(self) -> None:
        return None


class RedisPlanStore:
    backend = "redis"

    def __init__(self, client: redis.Redis) -> None:
        self._r = client

    @classmethod
    def from_url(cls, url: str) -> RedisPlanStore:
        return cls(redis.Redis.from_url(url, socket_timeout=2.0, socket_connect_timeout=2.0))

    def save(self, plan_id: str, body: bytes, ttl_s: int) -> None:
        try:
            self._r.set(PREFIX + plan_id, body, ex=ttl_s)
        except redis.RedisError as exc:
            raise StoreUnavailableError(f"the plan cache (Redis) cannot be reached: {exc}") from exc

    def load(self, plan_id: str) -> bytes | None:
        try:
            return self._r.get(PREFIX + plan_id)  # type: ignore[return-value]
        except redis.RedisError as exc:
            raise StoreUnavailableError(f"the plan cache (Redis) cannot be reached: {exc}") from exc


    def ping(self) -> None:
        try:
            self._r.ping()
        except redis.RedisError as exc:
            raise StoreUnavailableError(f"Redis cannot be reached: {exc}") from exc


def plan_store(redis_url: str | None) -> PlanStore:
    return RedisPlanStore.from_url(redis_url) if redis_url else MemoryPlanStore()

"""Plans kept in a real Redis (the redis-server the test session starts) and in memory."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import redis

from app.main import create_app
from app.settings import Settings
from app.store.plans import PREFIX, MemoryPlanStore, RedisPlanStore
from schemas.dag import EXAMPLE
from tests.conftest import Client

DEAD_URL = "redis://127.0.0.1:1/0"  # nothing listens on port 1


@pytest.fixture
def real_redis(redis_url: str) -> Iterator[redis.Redis]:
    yield redis.Redis.from_url(redis_url)


def test_two_instances_share_plans_through_redis(real_redis: redis.Redis, redis_url: str) -> None:
    one = Client(create_app(Settings(redis_url=redis_url, plan_ttl_s=120)))
    two = Client(create_app(Settings(redis_url=redis_url, plan_ttl_s=120)))
    plan = one.post("/dag/plan", json=EXAMPLE).json()
    assert 0 < real_redis.ttl(PREFIX + "public:" + plan["plan_id"]) <= 120
    got = two.get(f"/dag/plan/{plan['plan_id']}")
    assert got.status_code == 200 and got.json() == plan
    assert two.get(f"/dag/plan/{plan['plan_id']}?format=svg").status_code == 200


def test_redis_plan_expires(real_redis: redis.Redis) -> None:
    store = RedisPlanStore(real_redis)
    store.save("p1", b"{}", ttl_s=60)
    assert store.load("p1") == b"{}"
    real_redis.pexpire(PREFIX + "p1", 1)
    time.sleep(0.01)
    assert store.load("p1") is None


def test_unreachable_redis_still_plans_and_get_says_503() -> None:
    c = Client(create_app(Settings(redis_url=DEAD_URL)))
    r = c.post("/dag/plan", json=EXAMPLE)
    assert r.status_code == 200
    assert r.json()["plan_id"] is None and "not kept" in r.json()["warnings"][0]
    g = c.get("/dag/plan/anything")
    assert g.status_code == 503 and "Redis" in g.json()["detail"][0]["msg"]


def test_memory_store_expires_and_evicts_the_oldest() -> None:
    now = [0.0]
    store = MemoryPlanStore(max_plans=2, clock=lambda: now[0])
    store.save("a", b"A", ttl_s=10)
    store.save("b", b"B", ttl_s=100)
    now[0] = 11.0
    assert store.load("a") is None and store.load("b") == b"B"
    store.save("c", b"C", ttl_s=100)
    store.save("d", b"D", ttl_s=100)
    assert store.load("b") is None and store.load("c") == b"C" and store.load("d") == b"D"


def test_readyz_follows_redis(redis_url: str) -> None:
    assert Client(create_app(Settings(redis_url=redis_url))).get("/readyz").json() == {
        "status": "ok", "store": "redis"}
    down = Client(create_app(Settings(redis_url=DEAD_URL))).get("/readyz")
    assert down.status_code == 503 and down.json()["status"] == "unavailable"
    assert "Redis cannot be reached" in down.json()["detail"]


def test_readyz_without_redis_is_ready(client: Client) -> None:
    assert client.get("/readyz").json() == {"status": "ok", "store": "memory"}

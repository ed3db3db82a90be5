"""Shared fixtures: the app over real HTTP semantics through httpx's ASGI transport, and a real
redis-server the session starts on a free port (never a Redis it did not start)."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import settings

from app.main import create_app, warm
from app.settings import Settings
from tests.redis_server import BINARY, MISSING, RedisServer

settings.register_profile("dev", max_examples=60, deadline=None)
settings.register_profile("ci", max_examples=200, deadline=None)
settings.load_profile("ci" if __import__("os").environ.get("CI") else "dev")


@functools.cache
def _warm_once() -> None:
    """The service's compiled loops made ready before a test's first request, as the lifespan does
    before a server's: on a cold numba cache a request would otherwise compile them inside its
    decision budget, and run out of it (a pass cut short: `not_evaluated`)."""
    warm()


class Client:
    """A synchronous face on httpx.AsyncClient + ASGITransport (no server thread, real HTTP)."""

    def __init__(self, app: Any) -> None:
        self.transport = httpx.ASGITransport(app=app)
        _warm_once()  # (the transport runs no lifespan, where the service warms its loops)

    async def _send(self, method: str, url: str, **kw: Any) -> httpx.Response:
        async with httpx.AsyncClient(transport=self.transport, base_url="http://test") as c:
            return await c.request(method, url, **kw)

    def request(self, method: str, url: str, **kw: Any) -> httpx.Response:
        return asyncio.run(self._send(method, url, **kw))

    def get(self, url: str, **kw: Any) -> httpx.Response:
        return self.request("GET", url, **kw)

    def post(self, url: str, **kw: Any) -> httpx.Response:
        return self.request("POST", url, **kw)


@pytest.fixture
def client() -> Iterator[Client]:
    yield Client(create_app(Settings(max_body_bytes=1_000_000)))


async def chunks(data: bytes, size: int = 4096) -> AsyncIterator[bytes]:
    for i in range(0, len(data), size):
        yield data[i : i + size]


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A redis-server of the session's own (no persistence), stopped at the end."""
    if BINARY is None:
        pytest.skip(MISSING)
    server = RedisServer(Path(tmp_path_factory.mktemp("redis"))).start()
    yield server
    server.stop()


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    """The session's Redis, emptied for this test (it is ours to wipe)."""
    redis_server.client().flushall()
    return redis_server.url

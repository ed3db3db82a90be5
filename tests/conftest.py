"""Shared fixtures: the app over real HTTP semantics through httpx's ASGI transport."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from hypothesis import settings

from app.main import create_app
from app.settings import Settings

settings.register_profile("dev", max_examples=60, deadline=None)
settings.register_profile("ci", max_examples=200, deadline=None)
settings.load_profile("ci" if __import__("os").environ.get("CI") else "dev")


class Client:
    """A synchronous face on httpx.AsyncClient + ASGITransport (no server thread, real HTTP)."""

    def __init__(self, app: Any) -> None:
        self.transport = httpx.ASGITransport(app=app)

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

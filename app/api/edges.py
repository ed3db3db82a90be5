"""HTTP edges every route shares: the catch-all that answers an unexpected error as a normal 500
(so uvicorn keeps the connection), and OPTIONS answered with the methods a path allows.

Both are pure ASGI middleware. Starlette's own catch-all (ServerErrorMiddleware) answers and then
re-raises, and uvicorn closes a keep-alive connection on an exception raised after the answer began.
"""

from __future__ import annotations

import json
import logging
import re

from fastapi import FastAPI
from starlette.routing import Route, compile_path
from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger("hpcsched")


async def _answer(send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [*headers, (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


class CatchAll:
    """Log an unexpected error with the request id and answer 500 without internals; the exception
    goes no further."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracking_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except Exception:
            request_id = scope.get("state", {}).get("request_id")
            log.exception("unexpected error on %s %s (request %s)", scope["method"], scope["path"],
                          request_id)
            if started:  # nothing sensible left to send: the client sees a cut answer
                return
            body = json.dumps({"detail": [{"loc": [], "msg": "internal error", "type": "internal"}]})
            await _answer(send, 500, body.encode(), [(b"content-type", b"application/json")])


class Options:
    """OPTIONS on a known path: 204 with `Allow` listing its methods; on an unknown path: 404.
    A CORS preflight (Origin + Access-Control-Request-Method) is left to the CORS middleware.

    The methods come from the OpenAPI paths (every API route is documented) and the app's top-level
    routes (the docs pages), read once."""

    def __init__(self, app: ASGIApp, owner: FastAPI) -> None:
        self.app, self.owner = app, owner
        self.table: list[tuple[re.Pattern[str], frozenset[str]]] | None = None

    def _methods(self, path: str) -> set[str]:
        if self.table is None:
            self.table = _method_table(self.owner)
        found: set[str] = set()
        for regex, methods in self.table:
            if regex.match(path):
                found |= methods
        return found

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "OPTIONS":
            await self.app(scope, receive, send)
            return
        methods = self._methods(scope["path"])
        if not methods:
            await self.app(scope, receive, send)  # the router's own 404
            return
        allow = ", ".join(sorted(methods | {"OPTIONS"}))
        await _answer(send, 204, b"", [(b"allow", allow.encode())])


def _method_table(app: FastAPI) -> list[tuple[re.Pattern[str], frozenset[str]]]:
    table = [(compile_path(path)[0], frozenset(m.upper() for m in ops if m.upper() in HTTP_METHODS))
             for path, ops in app.openapi().get("paths", {}).items()]
    for route in app.routes:
        methods = getattr(route, "methods", None)
        if isinstance(route, Route) and methods:
            table.append((route.path_regex, frozenset(methods)))
    return table


HTTP_METHODS = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"}

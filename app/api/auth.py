"""Optional API keys. With `HPCSCHED_API_KEYS` set, every request but the public paths (health,
metrics, docs) needs a valid key in `X-API-Key` (or `Authorization: Bearer ...`), else 401. The key's
tenant goes into the request state: stores keep each tenant's plans (and clusters) apart.

Keys are given as `tenant=key` pairs (comma-separated); a bare key is its own tenant, named by a
hash prefix so the key itself never shows in logs or store keys. Tenant names follow the rule of every
name that reaches a store key (schemas.common.NAME_PATTERN: no `:`), checked at start-up, so no tenant
can address another's clusters or plans by its choice of name or id.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re

from starlette.types import ASGIApp, Receive, Scope, Send

from schemas.common import NAME_PATTERN, NAME_RULE

PUBLIC = ("/healthz", "/readyz", "/metrics", "/docs", "/redoc", "/openapi.json", "/static-offline-docs")
NO_TENANT = "public"


def parse_keys(spec: str | None) -> dict[str, str]:
    """key -> tenant."""
    keys: dict[str, str] = {}
    for item in (spec or "").split(","):
        item = item.strip()
        if not item:
            continue
        tenant, sep, key = item.partition("=")
        if not sep:
            key, tenant = tenant, "key-" + hashlib.sha256(tenant.encode()).hexdigest()[:12]
        key, tenant = key.strip(), tenant.strip()
        if not re.fullmatch(NAME_PATTERN, tenant):
            raise ValueError(f"HPCSCHED_API_KEYS: tenant {tenant!r} is not a valid name ({NAME_RULE})")
        if not key:
            raise ValueError(f"HPCSCHED_API_KEYS: tenant {tenant!r} has an empty key")
        if keys.get(key, tenant) != tenant:
            raise ValueError(f"HPCSCHED_API_KEYS: one key given to two tenants, {keys[key]!r} and {tenant!r}")
        keys[key] = tenant
    return keys


class ApiKeys:
    """Pure ASGI middleware; without keys it only marks every request as the `public` tenant."""

    def __init__(self, app: ASGIApp, keys: dict[str, str]) -> None:
        self.app, self.keys = app, keys

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        state = scope.setdefault("state", {})
        if not self.keys or scope["path"].startswith(PUBLIC):
            state["tenant"] = NO_TENANT
            await self.app(scope, receive, send)
            return
        tenant = self._tenant(dict(scope.get("headers", [])))
        if tenant is None:
            await _refuse(send)
            return
        state["tenant"] = tenant
        await self.app(scope, receive, send)

    def _tenant(self, headers: dict[bytes, bytes]) -> str | None:
        given = headers.get(b"x-api-key", b"").decode("latin-1")
        auth = headers.get(b"authorization", b"").decode("latin-1")
        if not given and auth.lower().startswith("bearer "):
            given = auth[7:].strip()
        for key, tenant in self.keys.items():  # compare every key in constant time
            if given and hmac.compare_digest(given.encode(), key.encode()):
                return tenant
        return None


async def _refuse(send: Send) -> None:
    msg = "a valid API key is required (X-API-Key or Authorization: Bearer)"
    body = json.dumps({"detail": [{"loc": ["header", "x-api-key"], "msg": msg, "type": "unauthorized"}]})
    await send({"type": "http.response.start", "status": 401, "headers": [
        (b"content-type", b"application/json"), (b"www-authenticate", b'Bearer realm="hpcsched"')]})
    await send({"type": "http.response.body", "body": body.encode()})

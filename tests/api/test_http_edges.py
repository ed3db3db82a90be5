"""The HTTP edges: JSON bodies only (415), OPTIONS and CORS preflights, PATCH parsed off the event
loop, and a 500 that keeps the keep-alive connection (over a real uvicorn)."""

from __future__ import annotations

import copy
import threading
from collections.abc import Iterator

import httpx
import pytest
from fastapi import FastAPI, Request

from app.api.routes import clusters as cluster_routes
from app.main import create_app
from app.settings import Settings
from schemas.clusters import EXAMPLE_PATCH, EXAMPLE_PUT
from schemas.schedule import EXAMPLE
from tests.app_server import served as serving
from tests.conftest import Client

PORTAL = "https://portal.example.org"


@pytest.mark.parametrize("headers", [{"content-type": "text/plain"}, {},
                                     {"content-type": "application/x-www-form-urlencoded"}],
                         ids=["text-plain", "no-type", "form"])
@pytest.mark.parametrize("method, url", [("POST", "/schedule"), ("POST", "/dag/plan"),
                                         ("POST", "/simulate"), ("PUT", "/clusters/c1"),
                                         ("PATCH", "/clusters/c1")])
def test_a_body_not_declared_json_is_415(client: Client, method: str, url: str, headers: dict) -> None:
    """A JSON body sent as text/plain, as a form or untyped is refused, naming the header."""
    extra = {"if-match": "1"} if method == "PATCH" else {}
    r = client.request(method, url, content=b'{"now": 0}', headers={**headers, **extra})
    assert r.status_code == 415, r.text
    assert r.json()["detail"][0]["loc"] == ["header", "content-type"]


@pytest.mark.parametrize("content_type", ["application/json", "application/json; charset=utf-8",
                                          "Application/JSON", "application/vnd.hpcsched+json"])
def test_json_types_are_accepted(client: Client, content_type: str) -> None:
    """application/json with parameters, any case, and +json types are JSON."""
    import json
    r = client.post("/schedule", content=json.dumps(EXAMPLE), headers={"content-type": content_type})
    assert r.status_code == 200, r.text


@pytest.mark.parametrize("url, allowed", [("/schedule", "OPTIONS, POST"),
                                          ("/clusters/c1", "DELETE, GET, OPTIONS, PATCH, PUT"),
                                          ("/dag/plan/abc", "GET, OPTIONS"), ("/healthz", "GET, OPTIONS")])
def test_options_lists_the_methods_of_the_path(client: Client, url: str, allowed: str) -> None:
    """OPTIONS answers 204 with the path's own methods in Allow, no key needed."""
    r = client.request("OPTIONS", url)
    assert r.status_code == 204 and r.headers["allow"] == allowed
    assert "access-control-allow-origin" not in r.headers


def test_options_on_an_unknown_path_is_404(client: Client) -> None:
    """No route, no methods: 404 like any other method."""
    assert client.request("OPTIONS", "/nowhere").status_code == 404


def _preflight(c: Client, origin: str) -> httpx.Response:
    return c.request("OPTIONS", "/dag/plan", headers={
        "origin": origin, "access-control-request-method": "POST",
        "access-control-request-headers": "content-type, x-api-key"})


def test_cors_preflight_from_an_allowed_origin() -> None:
    """With HPCSCHED_CORS_ORIGINS set (and API keys on), the portal's preflight is answered and its
    real request's answer names the origin; another site's preflight is refused."""
    c = Client(create_app(Settings(cors_origins=f"{PORTAL}/, https://other.example.org",
                                   api_keys="t=k")))
    r = _preflight(c, PORTAL)
    assert r.status_code == 200
    assert r.headers["access-control-allow-origin"] == PORTAL
    assert "POST" in r.headers["access-control-allow-methods"]
    assert "x-api-key" in r.headers["access-control-allow-headers"].lower()
    evil = _preflight(c, "https://evil.example.com")
    assert evil.status_code == 400 and "access-control-allow-origin" not in evil.headers
    real = c.post("/schedule", json=EXAMPLE, headers={"origin": PORTAL, "x-api-key": "k"})
    assert real.status_code == 200 and real.headers["access-control-allow-origin"] == PORTAL


def test_no_cors_by_default(client: Client) -> None:
    """Unset, no origin is allowed: a preflight gets no CORS headers, an answer names no origin."""
    r = _preflight(client, PORTAL)
    assert "access-control-allow-origin" not in r.headers
    assert "access-control-allow-origin" not in client.post(
        "/schedule", json=EXAMPLE, headers={"origin": PORTAL}).headers


def test_patch_body_is_parsed_off_the_event_loop(client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    """The PATCH body is parsed in a worker thread, as PUT's is (a big body would stall the loop)."""
    threads: list[str] = []
    parse = cluster_routes.parse

    def recording(model, body):  # noqa: ANN001, ANN202
        threads.append(threading.current_thread().name)
        return parse(model, body)

    monkeypatch.setattr(cluster_routes, "parse", recording)
    assert client.request("PUT", "/clusters/c1", json=EXAMPLE_PUT).status_code == 200
    r = client.request("PATCH", "/clusters/c1", json=copy.deepcopy(EXAMPLE_PATCH), headers={"if-match": "1"})
    assert r.status_code == 200, r.text
    assert len(threads) == 2 and threading.main_thread().name not in threads


@pytest.fixture
def served() -> Iterator[str]:
    """The app with two test-only routes, on a real uvicorn on a free loopback port."""
    app: FastAPI = create_app(Settings())

    @app.get("/test/boom")
    def boom() -> None:
        raise RuntimeError("a bug")

    @app.get("/test/peer")
    def peer(request: Request) -> dict:
        return {"port": request.client.port if request.client else None}

    with serving(app, log_level="critical") as base:
        yield base


def test_a_500_keeps_the_keep_alive_connection(served: str) -> None:
    """After an unexpected error the client's connection stays open: the next request on the same
    connection (same client port) is answered."""
    with httpx.Client(base_url=served, limits=httpx.Limits(max_connections=1)) as c:
        before = c.get("/test/peer").json()["port"]
        r = c.get("/test/boom")
        assert r.status_code == 500
        assert r.json() == {"detail": [{"loc": [], "msg": "internal error", "type": "internal"}]}
        assert r.headers.get("connection", "keep-alive") != "close"
        assert c.get("/test/peer").json()["port"] == before
        assert c.get("/healthz").status_code == 200

"""Optional API keys: 401 without a valid key; each key's tenant sees only its own plans."""

from __future__ import annotations

import pytest

from app.api.auth import parse_keys
from app.main import create_app
from app.settings import Settings
from schemas.dag import EXAMPLE as DAG_EXAMPLE
from schemas.schedule import EXAMPLE
from tests.conftest import Client


@pytest.fixture
def keyed() -> Client:
    return Client(create_app(Settings(api_keys="alice=a-secret, bob=b-secret")))


def test_no_key_or_a_wrong_key_is_401(keyed: Client) -> None:
    for headers in ({}, {"x-api-key": "nope"}, {"authorization": "Bearer nope"}):
        r = keyed.post("/schedule", json=EXAMPLE, headers=headers)
        assert r.status_code == 401 and r.headers["www-authenticate"].startswith("Bearer")
        assert r.json()["detail"][0]["loc"] == ["header", "x-api-key"]


def test_a_valid_key_in_either_header_works(keyed: Client) -> None:
    assert keyed.post("/schedule", json=EXAMPLE, headers={"x-api-key": "a-secret"}).status_code == 200
    bearer = {"authorization": "Bearer b-secret"}
    assert keyed.post("/schedule", json=EXAMPLE, headers=bearer).status_code == 200


def test_public_paths_need_no_key(keyed: Client) -> None:
    for path in ("/healthz", "/readyz", "/metrics", "/docs", "/openapi.json"):
        assert keyed.get(path).status_code == 200, path


def test_a_tenant_cannot_read_another_tenants_plan(keyed: Client) -> None:
    alice, bob = {"x-api-key": "a-secret"}, {"x-api-key": "b-secret"}
    plan_id = keyed.post("/dag/plan", json=DAG_EXAMPLE, headers=alice).json()["plan_id"]
    assert keyed.get(f"/dag/plan/{plan_id}", headers=alice).status_code == 200
    assert keyed.get(f"/dag/plan/{plan_id}", headers=bob).status_code == 404
    assert keyed.get(f"/dag/plan/{plan_id}").status_code == 401


def test_without_keys_everything_is_open(client: Client) -> None:
    assert client.post("/schedule", json=EXAMPLE).status_code == 200


def test_key_spec_parsing() -> None:
    keys = parse_keys("alice=k1, k2 ,")
    assert keys["k1"] == "alice" and keys["k2"].startswith("key-") and "k2" not in keys["k2"]

"""No tenant reaches another tenant's clusters or plans, whatever either is called.

The attack this guards against: store keys were `tenant:cluster_id`, so tenant `site` asking for
cluster `dev:c1` read, scheduled on and deleted tenant `site:dev`'s cluster `c1`. Names that reach a
store key now follow one rule (no `:`, no glob or `%`), tenants at start-up and ids with a 422, and
the key itself encodes both parts. Every path is tried here, on the in-process store and on a real
Redis, with names built to collide.
"""

from __future__ import annotations

from urllib.parse import quote

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.api.auth import parse_keys
from app.main import create_app
from app.service import _key
from app.settings import Settings
from schemas.dag import EXAMPLE as DAG_EXAMPLE
from schemas.schedule import EXAMPLE
from tests.conftest import Client

SNAPSHOT = {"nodes": EXAMPLE["nodes"], "running": EXAMPLE["running"]}
SITE, DEV = {"x-api-key": "key-site"}, {"x-api-key": "key-dev"}
# Names a tenant might try, to reach tenant `site.dev`'s cluster `c1` (or its plan) from `site`.
ADVERSARIAL = ["dev:c1", "site.dev:c1", ".dev:c1", ":c1", "c1:", "*", "c*", "c?", "[c]1", "*:*",
               "site.dev%3Ac1", "dev%3Ac1", "%2A", "c1 ", " c1", "c1\t", "-c1", ".c1", "c" * 129,
               "é1", "c1\u200b"]


@pytest.fixture(params=["memory", "redis"])
def keyed(request: pytest.FixtureRequest) -> Client:
    keys = "site=key-site,site.dev=key-dev"
    if request.param == "memory":
        return Client(create_app(Settings(api_keys=keys)))
    return Client(create_app(Settings(api_keys=keys, redis_url=request.getfixturevalue("redis_url"))))


def test_tenant_names_with_the_separator_are_refused_at_start_up() -> None:
    for spec in ("site=a,site:dev=b", "a:b=k", "*=k", "site =a, =b", "t%3A=k", "x=k,y=k"):
        with pytest.raises(ValueError, match="HPCSCHED_API_KEYS"):
            create_app(Settings(api_keys=spec))
    assert parse_keys("site=a,site.dev=b,site-dev_2=c") == {"a": "site", "b": "site.dev", "c": "site-dev_2"}


@pytest.mark.parametrize("name", ADVERSARIAL)
def test_adversarial_cluster_ids_are_422_on_every_path(keyed: Client, name: str) -> None:
    path = f"/clusters/{quote(name, safe='')}"
    assert keyed.request("PUT", path, json=SNAPSHOT, headers=SITE).status_code == 422
    assert keyed.get(path, headers=SITE).status_code == 422
    assert keyed.request("DELETE", path, headers=SITE).status_code == 422
    patch = keyed.request("PATCH", path, json={"changes": []}, headers=SITE | {"if-match": "1"})
    assert patch.status_code == 422
    body = {"now": EXAMPLE["now"], "cluster_id": name, "pending": EXAMPLE["pending"]}
    r = keyed.post("/schedule", json=body, headers=SITE)
    assert r.status_code == 422 and r.json()["detail"][0]["loc"][-1] == "cluster_id"
    assert keyed.get(f"/dag/plan/{quote(name, safe='')}", headers=SITE).status_code == 422


def test_no_path_reaches_another_tenants_cluster(keyed: Client) -> None:
    put = keyed.request("PUT", "/clusters/c1", json=SNAPSHOT, headers=DEV)
    assert put.status_code == 200
    pending = {"now": EXAMPLE["now"], "pending": EXAMPLE["pending"]}
    for name in ["c1", "site.dev.c1", "site.devc1", "dev.c1", "devc1"] + ADVERSARIAL:
        path = f"/clusters/{quote(name, safe='')}"
        assert keyed.get(path, headers=SITE).status_code in (404, 422), name
        assert keyed.request("DELETE", path, headers=SITE).status_code in (404, 422), name
        r = keyed.post("/schedule", json=pending | {"cluster_id": name}, headers=SITE)
        assert r.status_code in (404, 422), name
    # the owner's cluster is still there, untouched
    mine = keyed.get("/clusters/c1", headers=DEV)
    assert mine.status_code == 200 and mine.json()["version"] == put.json()["version"]
    assert keyed.post("/schedule", json=pending | {"cluster_id": "c1"}, headers=DEV).status_code == 200


def test_same_cluster_id_in_two_tenants_are_two_clusters(keyed: Client) -> None:
    keyed.request("PUT", "/clusters/c1", json=SNAPSHOT, headers=DEV)
    one_node = {"nodes": SNAPSHOT["nodes"][:1], "running": []}
    keyed.request("PUT", "/clusters/c1", json=one_node, headers=SITE)
    assert keyed.get("/clusters/c1", headers=DEV).json()["nodes"] == len(SNAPSHOT["nodes"])
    assert keyed.get("/clusters/c1", headers=SITE).json()["nodes"] == 1
    assert keyed.request("DELETE", "/clusters/c1", headers=SITE).status_code == 204
    assert keyed.get("/clusters/c1", headers=DEV).status_code == 200


def test_no_path_reaches_another_tenants_plan(keyed: Client) -> None:
    plan_id = keyed.post("/dag/plan", json=DAG_EXAMPLE, headers=DEV).json()["plan_id"]
    assert keyed.get(f"/dag/plan/{plan_id}", headers=DEV).status_code == 200
    for name in [plan_id, f"dev:{plan_id}", f"site.dev:{plan_id}", f"site.dev%3A{plan_id}", "*"]:
        assert keyed.get(f"/dag/plan/{quote(name, safe='')}", headers=SITE).status_code in (404, 422), name


@given(st.text(max_size=12), st.text(max_size=12), st.text(max_size=12), st.text(max_size=12))
def test_store_keys_never_collide(t1: str, n1: str, t2: str, n2: str) -> None:
    """Even for names the API would refuse, two different (tenant, name) pairs make two keys."""
    assert (_key(t1, n1) == _key(t2, n2)) == ((t1, n1) == (t2, n2))

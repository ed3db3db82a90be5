"""Bad input answers 4xx naming the field and the reason; nothing answers 500."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest

from schemas.schedule import EXAMPLE
from tests.conftest import Client, chunks

Body = dict[str, Any]


def body(change: Callable[[Body], None]) -> Body:
    b = copy.deepcopy(EXAMPLE)
    change(b)
    return b


def set_path(path: tuple, value: Any) -> Callable[[Body], None]:  # type: ignore[type-arg]
    def change(b: Body) -> None:
        target: Any = b
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return change


def append(key: str, item: Body) -> Callable[[Body], None]:
    return lambda b: b[key].append(item)


CASES = [
    ("negative cpu", set_path(("pending", 0, "cpu"), -1), ["body", "pending", 0, "cpu"],
     "greater than or equal to 1"),
    ("zero walltime", set_path(("pending", 1, "walltime_s"), 0),
     ["body", "pending", 1, "walltime_s"], "greater than 0"),
    ("zero node cpu", set_path(("nodes", 0, "capacity", "cpu"), 0),
     ["body", "nodes", 0, "capacity", "cpu"], "greater than or equal to 1"),
    ("negative memory", set_path(("nodes", 1, "capacity", "mem_mib"), -5),
     ["body", "nodes", 1, "capacity", "mem_mib"], "greater than or equal to 0"),
    ("duplicate node id", set_path(("nodes", 1, "id"), "n1"), ["body", "nodes", 1, "id"],
     "duplicate node id 'n1'"),
    ("duplicate pending id", set_path(("pending", 2, "id"), "qc"), ["body", "pending", 2, "id"],
     "duplicate pending job id 'qc'"),
    ("pending id also running", set_path(("pending", 0, "id"), "r1"),
     ["body", "pending", 0, "id"], "also listed as running"),
    ("running job on unknown node", set_path(("running", 0, "allocation", 0, "node"), "nx"),
     ["body", "running", 0, "allocation", 0, "node"], "unknown node 'nx'"),
    ("allocation above capacity",
     set_path(("nodes", 1, "allocated"), {"cpu": 64, "mem_mib": 0, "gpu": 0}),
     ["body", "nodes", 1, "allocated", "cpu"], "exceeds capacity 32"),
    ("running jobs above capacity",
     set_path(("running", 0, "allocation", 0, "cpu"), 40),
     ["body", "nodes", 0, "capacity", "cpu"], "running jobs hold 40"),
    ("allocated below running",
     set_path(("nodes", 0, "allocated"), {"cpu": 1, "mem_mib": 64_000, "gpu": 0}),
     ["body", "nodes", 0, "allocated", "cpu"], "less than its running jobs hold"),
    ("more nodes than exist", set_path(("pending", 0, "nodes"), 4),
     ["body", "pending", 0, "nodes"], "the cluster has 3"),
    ("unknown policy", set_path(("policy",), {"name": "magic"}), ["body", "policy"],
     "does not match any of the expected tags"),
    ("unknown policy parameter", set_path(("policy",), {"name": "easy", "params": {"bf": 1}}),
     ["body", "policy", "easy", "params", "bf"], "Extra inputs are not permitted"),
    ("bad parameter value",
     set_path(("policy",), {"name": "easy", "params": {"migration": {"threshold": 1.5}}}),
     ["body", "policy", "easy", "params", "migration", "threshold"], "less than 1"),
    ("unknown selector",
     set_path(("policy",), {"name": "easy", "params": {"selector": "random"}}),
     ["body", "policy", "easy", "params", "selector"], "Input should be"),
    ("unknown field on a job", set_path(("pending", 0, "colour"), "red"),
     ["body", "pending", 0, "colour"], "Extra inputs are not permitted"),
    ("missing now", lambda b: b.pop("now"), ["body", "now"], "Field required"),
    ("unknown field on an allocation", set_path(("running", 0, "allocation", 0, "colour"), "red"),
     ["body", "running", 0, "allocation", 0, "colour"], "Extra inputs are not permitted"),
    ("empty node id in an allocation", set_path(("running", 0, "allocation", 0, "node"), ""),
     ["body", "running", 0, "allocation", 0, "node"], "at least 1 character"),
    ("running job with no allocation", set_path(("running", 0, "allocation"), []),
     ["body", "running", 0, "allocation"], "at least 1 item"),
    ("running job not an object", set_path(("running", 0), "r1"), ["body", "running", 0],
     "Input should be"),
    ("running job's cpu as a string", set_path(("running", 0, "allocation", 0, "cpu"), "32"),
     ["body", "running", 0, "allocation", 0, "cpu"], "Input should be a valid integer"),
    ("running job's migrated as a number", set_path(("running", 0, "migrated"), 1),
     ["body", "running", 0, "migrated"], "Input should be a valid boolean"),
]


@pytest.mark.parametrize(("change", "loc", "msg"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_bad_field_is_named(client: Client, change, loc, msg) -> None:  # noqa: ANN001
    """Each bad field answers 422 with its exact location and a message saying what is wrong."""
    r = client.post("/schedule", json=body(change))
    assert r.status_code == 422, r.text
    details = r.json()["detail"]
    assert any(d["loc"] == loc and msg in d["msg"] for d in details), details


def test_every_problem_is_reported_not_only_the_first(client: Client) -> None:
    """Cross-field checks collect all problems in one answer."""
    def change(b: Body) -> None:
        b["nodes"][1]["id"] = "n1"
        b["pending"][0]["nodes"] = 9
        b["running"][0]["allocation"][0]["node"] = "ghost"

    r = client.post("/schedule", json=body(change))
    locs = [d["loc"] for d in r.json()["detail"]]
    assert ["body", "nodes", 1, "id"] in locs
    assert ["body", "pending", 0, "nodes"] in locs
    assert ["body", "running", 0, "allocation", 0, "node"] in locs


def _nodes(n: int, **extra: Any) -> list[Body]:
    return [{"id": f"x{i}", "queue": "batch", "capacity": {"cpu": 4}, **extra} for i in range(n)]


@pytest.mark.parametrize("wrong", [130, 100])
def test_a_422_lists_its_first_100_problems_and_counts_the_rest(client: Client, wrong: int) -> None:
    """One mistake repeated in many nodes (an unknown field: pydantic's check; a queue no node
    serves: the service's own) is listed up to 100 times; a last entry says how many more, and of
    which types. At 100 or fewer, every one is listed and nothing is added."""
    shape = client.post("/schedule", json=body(lambda b: b["nodes"].extend(_nodes(wrong, colour="red"))))
    own = client.post("/schedule", json=body(lambda b: b["nodes"].extend(
        [n | {"queues": ["batch"], "queue": "elsewhere"} for n in _nodes(wrong)])))
    for r, kind in ((shape, "extra_forbidden"), (own, "not_in_queues")):
        assert r.status_code == 422
        detail = r.json()["detail"]
        listed = [d for d in detail if d["type"] == kind]
        assert len(listed) == min(wrong, 100)
        assert [d["loc"][2] for d in listed] == list(range(3, 3 + len(listed)))  # the first ones, in order
        if wrong > 100:
            assert len(detail) == 101 and detail[-1]["type"] == "more_errors"
            assert detail[-1]["msg"].startswith(f"{wrong - 100} more problems") and f"{kind} {wrong - 100}" \
                in detail[-1]["msg"]
        else:
            assert len(detail) == wrong and all(d["type"] != "more_errors" for d in detail)


def test_a_dag_with_many_problems_says_how_many_it_did_not_list(client: Client) -> None:
    """The DAG's checks listed their first 100 problems and dropped the rest without a word."""
    from schemas.dag import EXAMPLE as DAG

    dag = copy.deepcopy(DAG)
    dag["edges"] += [{"from": "split", "to": f"ghost{i}"} for i in range(150)]
    r = client.post("/dag/plan", json=dag)
    assert r.status_code == 422
    detail = r.json()["detail"]
    assert len(detail) == 101 and detail[-1]["type"] == "more_errors"
    assert detail[-1]["msg"].startswith("50 more problems")


@pytest.mark.parametrize("raw", [b"{not json", b"", b"[]", b"null", b'{"now": "soon"}'],
                         ids=["malformed", "empty", "array", "null", "wrong type"])
def test_non_object_bodies_are_422(client: Client, raw: bytes) -> None:
    """Whatever the bytes, the answer is a 422 with the error body shape, never a 500."""
    r = client.post("/schedule", content=raw, headers={"content-type": "application/json"})
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["loc"][0] == "body"


def big_body() -> bytes:
    b = copy.deepcopy(EXAMPLE)
    b["pending"] = [dict(b["pending"][1], id=f"j{i}") for i in range(20_000)]
    return json.dumps(b).encode()


def test_oversized_body_with_length_is_413(client: Client) -> None:
    """A body announced larger than the limit is refused before it is read."""
    r = client.post("/schedule", content=big_body(), headers={"content-type": "application/json"})
    assert r.status_code == 413
    assert "1000000 bytes" in r.json()["detail"][0]["msg"]


def test_oversized_chunked_body_is_413(client: Client) -> None:
    """A chunked body with no length is counted as it arrives and refused past the limit."""
    r = client.post("/schedule", content=chunks(big_body()),
                    headers={"content-type": "application/json"})
    assert "content-length" not in r.request.headers
    assert r.status_code == 413


@pytest.mark.parametrize(("field", "value"), [("now", "NaN"), ("now", "Infinity"), ("now", "1e300")])
def test_non_finite_or_absurd_times_are_422(client: Client, field: str, value: str) -> None:
    raw = json.dumps(body(set_path((field,), "__X__"))).replace('"__X__"', value)
    r = client.post("/schedule", content=raw, headers={"content-type": "application/json"})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", field], r.text

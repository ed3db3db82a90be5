"""Every integer a client sends has a bound the service can hold: the schema states it, the app
enforces it, and a value past it (10**30, 2**63) is a 422 naming the field, never a 500."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from schemas.clusters import EXAMPLE_PATCH, EXAMPLE_PUT
from schemas.schedule import EXAMPLE
from tests.conftest import Client

ROOT = Path(__file__).resolve().parents[2]
INT64_MAX = 2**63 - 1
# Body schemas a client sends (the rest of components are answers)
ANSWERS = ("Out", "Response", "ErrorBody", "ErrorDetail", "HTTPValidationError", "ValidationError")


def _integers(schema: Any, path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    if isinstance(schema, dict):
        if schema.get("type") == "integer":
            yield path, schema
        for key, sub in schema.items():
            yield from _integers(sub, f"{path}.{key}")
    elif isinstance(schema, list):
        for i, sub in enumerate(schema):
            yield from _integers(sub, f"{path}[{i}]")


def test_every_integer_a_client_sends_has_a_bound_in_the_spec() -> None:
    """Each integer of each request model and parameter has a maximum well inside int64."""
    spec = json.loads((ROOT / "openapi" / "openapi.json").read_text())
    sent = {k: v for k, v in spec["components"]["schemas"].items() if not k.endswith(ANSWERS)}
    params = {f"{p} {m}": op.get("parameters", []) for p, ops in spec["paths"].items()
              for m, op in ops.items() if isinstance(op, dict)}
    found = list(_integers(sent, "schemas")) + list(_integers(params, "paths"))
    assert len(found) > 20
    unbounded = [path for path, s in found if not s.get("maximum", INT64_MAX + 1) <= 2**53]
    assert unbounded == []


def _schedule(**node_cap: int) -> dict[str, Any]:
    b = copy.deepcopy(EXAMPLE)
    b["nodes"][0]["capacity"].update(node_cap)
    return b


CASES = [
    ("POST", "/schedule", _schedule(cpu=10**30), ["body", "nodes", 0, "capacity", "cpu"]),
    ("POST", "/schedule", _schedule(mem_mib=2**63), ["body", "nodes", 0, "capacity", "mem_mib"]),
    ("POST", "/schedule", dict(EXAMPLE, pending=[dict(EXAMPLE["pending"][0], nodes=2**63)]),
     ["body", "pending", 0, "nodes"]),
    ("POST", "/schedule", dict(EXAMPLE, pending=[dict(EXAMPLE["pending"][0], gpu=10**30)]),
     ["body", "pending", 0, "gpu"]),
    ("POST", "/schedule", dict(EXAMPLE, policy={"name": "easy", "params": {"queue_depth": 2**63}}),
     ["body", "policy", "easy", "params", "queue_depth"]),
    ("PUT", "/clusters/c1", dict(EXAMPLE_PUT, nodes=[dict(EXAMPLE_PUT["nodes"][0],
                                                          capacity={"cpu": 10**30})]),
     ["body", "nodes", 0, "capacity", "cpu"]),
    ("PUT", "/clusters/c1", dict(EXAMPLE_PUT, running=[dict(EXAMPLE_PUT["running"][0], allocation=[
        {"node": "n1", "mem_mib": 2**63}])]), ["body", "running", 0, "allocation", 0, "mem_mib"]),
    ("POST", "/simulate", {"jobs": [{"id": "a", "submit": 0, "run": 1, "procs": 10**30}]},
     ["body", "jobs", 0, "procs"]),
    ("POST", "/simulate", {"jobs": [{"id": "a", "submit": 0, "run": 1, "procs": 1,
                                     "mem_kb_per_proc": 1e300}]}, ["body", "jobs", 0, "mem_kb_per_proc"]),
    ("POST", "/simulate", {"swf": "; MaxProcs: 1000000000000000000000000000000\n"
                                  "1 0 -1 10 3 -1 -1 3 10 -1 1 1 1 -1 0 -1 -1 -1\n"}, ["body", "swf"]),
]


@pytest.mark.parametrize("method, url, body, loc", CASES,
                         ids=["cpu-1e30", "mem-2**63", "job-nodes", "job-gpu", "queue-depth", "put-cpu",
                              "put-alloc-mem", "sim-procs", "sim-mem-float", "swf-maxprocs"])
def test_too_large_is_422_naming_the_field(client: Client, method: str, url: str, body: dict,
                                           loc: list) -> None:
    """The value past its bound is refused, and the answer says which field."""
    r = client.request(method, url, json=body)
    assert r.status_code == 422, r.text
    assert loc in [d["loc"] for d in r.json()["detail"]]


def test_patch_with_a_huge_allocation_is_422(client: Client) -> None:
    """A PATCH starting a job with an allocation past int64 changes nothing and names the field."""
    assert client.request("PUT", "/clusters/c1", json=EXAMPLE_PUT).status_code == 200
    patch = copy.deepcopy(EXAMPLE_PATCH)
    patch["changes"][0]["job"]["allocation"][0]["cpu"] = 10**30
    r = client.request("PATCH", "/clusters/c1", json=patch, headers={"If-Match": '"1"'})
    assert r.status_code == 422
    assert ["body", "changes", 0, "job_started", "job", "allocation", 0, "cpu"] in [
        d["loc"] for d in r.json()["detail"]]

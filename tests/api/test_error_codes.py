"""One error vocabulary: every error body's `type` is a documented snake_case code.

Three holds: the code (every literal code the service can raise is in ERROR_CODES), the answers
(a tour of bad requests, each answer's types documented), and the documents (the OpenAPI file and
docs/errors.md list every code).
"""

from __future__ import annotations

import ast
import copy
import json
import re
import typing
from pathlib import Path

import pytest
from pydantic_core.core_schema import ErrorType

from app import errors as app_errors
from app.errors import ERROR_CODES, SchedError
from app.main import create_app
from app.settings import Settings
from schemas.clusters import EXAMPLE_PATCH, EXAMPLE_PUT
from schemas.schedule import EXAMPLE
from tests.conftest import Client

ROOT = Path(__file__).resolve().parents[2]
PYDANTIC_TYPES = set(typing.get_args(ErrorType))
SNAKE = re.compile(r"^[a-z][a-z0-9_]*$")


def _codes_in(node: ast.AST | None) -> list[str]:
    """The string codes an expression can take (a literal, or either branch of `a if c else b`)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.IfExp):
        return _codes_in(node.body) + _codes_in(node.orelse)
    return []


def _raised_codes() -> dict[str, str]:
    """code -> where, for every literal error type in ErrorDetail(...), InputError.single(...) and
    the DAG checker's Problems.add(...) calls of app/."""
    found: dict[str, str] = {}
    for path in sorted((ROOT / "app").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name not in ("ErrorDetail", "single", "add"):
                continue
            arg = node.args[2] if len(node.args) >= 3 else None
            arg = next((k.value for k in node.keywords if k.arg in ("type", "type_")), arg)
            for code in _codes_in(arg):
                found.setdefault(code, f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def test_every_code_the_service_raises_is_documented() -> None:
    raised = _raised_codes()
    assert len(raised) > 15  # the scan finds the checkers' codes
    undocumented = {c: where for c, where in raised.items() if c not in ERROR_CODES}
    assert not undocumented


def test_every_error_class_has_a_documented_code() -> None:
    classes = [c for c in vars(app_errors).values() if isinstance(c, type) and issubclass(c, SchedError)]
    assert len(classes) >= 9
    for cls in classes:
        assert cls.type in ERROR_CODES, cls


def test_codes_are_snake_case_with_a_status_and_a_meaning() -> None:
    for code, (status, meaning) in ERROR_CODES.items():
        assert SNAKE.match(code) and 400 <= status < 600 and meaning, code


def test_the_openapi_file_and_the_docs_list_every_code() -> None:
    spec = json.loads((ROOT / "openapi" / "openapi.json").read_text())
    listed = spec["components"]["schemas"]["ErrorDetail"]["properties"]["type"]["description"]
    doc = (ROOT / "docs" / "errors.md").read_text()
    for code in ERROR_CODES:
        assert f"`{code}`" in listed, code
        assert f"`{code}`" in doc, code


def _tour(c: Client) -> list[tuple[str, int, dict]]:
    """(what, status, body) of a tour of wrong requests across every route."""
    cached = {"now": EXAMPLE["now"], "cluster_id": "c1", "pending": EXAMPLE["pending"]}
    bad_node = copy.deepcopy(EXAMPLE)
    bad_node["nodes"][0] |= {"queue": "nowhere", "queues": ["batch"]}
    dup = copy.deepcopy(EXAMPLE)
    dup["pending"].append(dup["pending"][0])
    big = copy.deepcopy(EXAMPLE)
    big["pending"][0]["nodes"] = 10_000
    c.request("PUT", "/clusters/c2", json=EXAMPLE_PUT)
    c.request("PATCH", "/clusters/c2", json=EXAMPLE_PATCH, headers={"if-match": "1"})
    change = {"changes": [{"op": "node_state", "node_id": "g1", "state": "down"}]}
    asks = [
        ("no route", c.get("/nowhere")),
        ("wrong method", c.request("DELETE", "/schedule")),
        ("not json", c.post("/schedule", content=b"{", headers={"content-type": "application/json"})),
        ("text body", c.post("/schedule", content=b"{}", headers={"content-type": "text/plain"})),
        ("empty body", c.post("/schedule", content=b"", headers={"content-type": "application/json"})),
        ("missing field", c.post("/schedule", json={"pending": []})),
        ("extra field", c.post("/schedule", json=EXAMPLE | {"colour": "red"})),
        ("node queue", c.post("/schedule", json=bad_node)),
        ("duplicate job", c.post("/schedule", json=dup)),
        ("too many nodes", c.post("/schedule", json=big)),
        ("unknown cluster", c.post("/schedule", json=cached)),
        ("bad cluster id", c.get("/clusters/a:b")),
        ("unknown plan", c.get("/dag/plan/nope")),
        ("stale if-match", c.request("PATCH", "/clusters/c2", json=change, headers={"if-match": "1"})),
        ("ahead if-match", c.request("PATCH", "/clusters/c2", json=change, headers={"if-match": "99"})),
        ("dag cycle", c.post("/dag/plan", json={
            "tasks": [{"id": "a", "costs": {"g": 1}}, {"id": "b", "costs": {"g": 1}}],
            "edges": [{"source": "a", "target": "b"}, {"source": "b", "target": "a"}],
            "groups": [{"id": "g"}]})),
        ("bad swf", c.post("/simulate", json={"swf": "1 2 x\n", "policy": {"name": "easy"}})),
    ]
    return [(what, r.status_code, r.json()) for what, r in asks]


def test_every_error_answer_carries_a_documented_code() -> None:
    c = Client(create_app(Settings(max_body_bytes=1_000_000)))
    seen = set()
    for what, status, body in _tour(c):
        assert 400 <= status < 600, what
        assert isinstance(body["detail"], list) and body["detail"], (what, body)
        for d in body["detail"]:
            assert d["type"] in ERROR_CODES or d["type"] in PYDANTIC_TYPES, (what, d)
            seen.add(d["type"])
    expected = {"not_found", "method_not_allowed", "json_invalid", "unsupported_media_type", "missing",
                "extra_forbidden", "not_in_queues", "duplicate", "too_many_nodes", "cluster_unknown",
                "string_pattern_mismatch", "version_conflict", "cluster_behind", "cycle", "swf_syntax"}
    assert expected <= seen, expected - seen


@pytest.mark.parametrize("path", ["/schedule", "/clusters/c1"])
def test_the_401_and_413_codes(path: str) -> None:
    c = Client(create_app(Settings(api_keys="t=k", max_body_bytes=1_000)))
    assert c.post(path, json=EXAMPLE).json()["detail"][0]["type"] == "unauthorized"
    r = c.request("PUT" if "clusters" in path else "POST", path, content=b"x" * 5_000,
                  headers={"x-api-key": "k", "content-type": "application/json"})
    assert r.status_code == 413 and r.json()["detail"][0]["type"] == "payload_too_large"

"""The committed OpenAPI file is the one the app generates, and it documents the schedule call."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _generate() -> str:
    spec = importlib.util.spec_from_file_location("gen", ROOT / "openapi" / "generate.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.spec_text()  # type: ignore[no-any-return]


def test_openapi_file_is_current() -> None:
    """Run `python openapi/generate.py` when this fails."""
    assert (ROOT / "openapi" / "openapi.json").read_text() == _generate()


def test_schedule_is_documented_with_a_working_example() -> None:
    """POST /schedule has its request schema, an example body, and its error answers."""
    spec = json.loads((ROOT / "openapi" / "openapi.json").read_text())
    op = spec["paths"]["/schedule"]["post"]
    assert op["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "/ScheduleRequest")
    assert spec["components"]["schemas"]["ScheduleRequest"]["examples"]
    assert {"200", "413", "422"} <= set(op["responses"])


def test_every_operation_is_summarised_with_examples_and_errors() -> None:
    """Postman and curl users start from a working body; every refusal the service makes is listed."""
    spec = json.loads((ROOT / "openapi" / "openapi.json").read_text())
    schemas = spec["components"]["schemas"]
    public = {"/healthz", "/readyz", "/metrics"}
    for path, ops in spec["paths"].items():
        for method, op in ops.items():
            assert op.get("summary"), f"{method} {path} has no summary"
            if path not in public:
                assert "401" in op["responses"], f"{method} {path} does not document 401"
            if method == "post":
                name = op["requestBody"]["content"]["application/json"]["schema"]["$ref"].split("/")[-1]
                assert schemas[name].get("examples"), f"{name} has no example"
                assert {"413", "422"} <= set(op["responses"]), f"{method} {path} errors"


def test_every_answer_is_documented_where_it_can_happen() -> None:
    """/schedule lists each status it can answer, with the error body; PATCH's If-Match is required."""
    spec = json.loads((ROOT / "openapi" / "openapi.json").read_text())
    schedule = spec["paths"]["/schedule"]["post"]["responses"]
    assert {"200", "401", "404", "409", "413", "415", "422", "503"} <= set(schedule)
    for status in ("404", "409", "413", "415", "422", "503"):
        assert schedule[status]["content"]["application/json"]["schema"]["$ref"].endswith("/ErrorBody")
    patch = spec["paths"]["/clusters/{cluster_id}"]["patch"]
    if_match = next(p for p in patch["parameters"] if p["name"] == "if-match")
    assert if_match["required"] is True and if_match["in"] == "header"
    assert {"404", "409", "415", "422", "503"} <= set(patch["responses"])

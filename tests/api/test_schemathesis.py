"""schemathesis over every endpoint of the OpenAPI file, with its default checks (no 500, every
status and body documented, schema-violating data refused, schema-valid data accepted or refused
with a 422 naming a cross-field rule: see schemathesis.toml)."""

from __future__ import annotations

from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.config import SchemathesisConfig

from app.main import create_app
from app.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
CONFIG = SchemathesisConfig.from_path(str(ROOT / "schemathesis.toml"))
schema = schemathesis.openapi.from_asgi("/openapi.json", create_app(Settings(max_body_bytes=1_000_000)),
                                        config=CONFIG)
SETTINGS = dict(deadline=None, derandomize=True, database=None,
                suppress_health_check=list(HealthCheck))


@schema.parametrize()
@settings(max_examples=10, **SETTINGS)  # type: ignore[arg-type]
def test_every_endpoint_passes_the_default_checks(case: schemathesis.Case) -> None:
    """A bounded run (10 cases per operation): quick enough for the default suite."""
    case.call_and_validate()


@pytest.mark.slow
@schema.parametrize()
@settings(max_examples=300, **SETTINGS)  # type: ignore[arg-type]
def test_every_endpoint_passes_the_default_checks_full(case: schemathesis.Case) -> None:
    """The full run, for .ci/run's slow suite."""
    case.call_and_validate()

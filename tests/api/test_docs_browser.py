"""The docs pages render their operations in a real headless browser (Debian's chromium), with the
network limited to the service itself: what renders came from the service, not from a CDN."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.app_server import served

pytestmark = pytest.mark.slow  # a real headless browser renders each page: ~20 s

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
OPERATIONS = ["/schedule", "/dag/plan", "/dag/plan/{plan_id}", "/simulate", "/healthz", "/readyz", "/metrics"]


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with served() as url:
        yield url


def chromium(url: str, *flags: str) -> str:
    assert CHROMIUM, "chromium is needed (.ci/run installs it: apt-get install -y chromium)"
    # every host but the service's resolves nowhere: a CDN reference would fail to load
    rules = "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"
    out = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", rules,
         "--virtual-time-budget=15000", *flags, url],
        capture_output=True, text=True, timeout=120, check=True,
    )
    return out.stdout


def test_swagger_ui_renders_every_operation(server: str, tmp_path: Path) -> None:
    dom = chromium(f"{server}/docs", "--dump-dom")
    for path in OPERATIONS:
        assert f'data-path="{path}"' in dom, path
    shot = tmp_path / "docs.png"
    chromium(f"{server}/docs", f"--screenshot={shot}", "--window-size=1200,1600")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000


def test_redoc_renders_the_operations(server: str) -> None:
    dom = chromium(f"{server}/redoc", "--dump-dom")
    assert "Plan a workflow (DAG) on resource service groups" in dom
    assert "Decide which pending jobs start where" in dom

"""What can be checked of the container set-up without a Docker engine: the compose file parses and
wires the service to a healthy Redis; the Dockerfile runs as non-root, has a health check, and starts
the command docs/operations.md documents."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from urllib.parse import urlparse

import pytest
import yaml

from app.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE = (ROOT / "docker" / "Dockerfile").read_text()
COMPOSE = yaml.safe_load((ROOT / "docker" / "compose.yaml").read_text())
OPERATIONS = (ROOT / "docs" / "operations.md").read_text()


def instruction(name: str) -> str:
    logical = re.sub(r"\\\n\s*", " ", DOCKERFILE)  # join continued lines
    lines = re.findall(rf"^{name}\s+(.*)$", logical, flags=re.MULTILINE)
    assert len(lines) == 1, f"one {name} in the Dockerfile"
    return lines[0].strip()


def test_compose_runs_the_service_after_a_healthy_redis() -> None:
    services = COMPOSE["services"]
    app, redis = services["hpcsched"], services["redis"]
    assert app["build"] == {"context": "..", "dockerfile": "docker/Dockerfile"}
    assert app["image"].startswith("hpcsched:")
    assert app["ports"] == ["${HPCSCHED_BIND:-127.0.0.1}:${HPCSCHED_PORT:-8000}:8000"]  # loopback unless told
    assert app["depends_on"] == {"redis": {"condition": "service_healthy"}}
    redis_url = urlparse(app["environment"]["REDIS_URL"])
    assert (redis_url.scheme, redis_url.hostname, redis_url.path) == ("redis", "redis", "/0")
    assert "readyz" in " ".join(app["healthcheck"]["test"])
    assert redis["image"].startswith("redis:")
    assert redis["healthcheck"]["test"] == ["CMD", "redis-cli", "ping"]


def test_dockerfile_is_slim_non_root_and_checked() -> None:
    assert instruction("FROM").startswith("python:") and "slim" in instruction("FROM")
    assert instruction("USER") not in ("root", "0")
    assert "/healthz" in instruction("HEALTHCHECK")
    assert instruction("EXPOSE") == "8000"


def test_dockerfile_starts_the_documented_command() -> None:
    cmd = json.loads(instruction("CMD"))
    assert cmd[:2] == ["sh", "-c"] and cmd[2].startswith("exec ")
    started = cmd[2].removeprefix("exec ")
    assert f"\n{started}\n" in OPERATIONS, "docs/operations.md shows the command the container runs"
    assert "docker compose -f docker/compose.yaml up" in OPERATIONS


def test_compose_redis_persists_and_settings_pass_through() -> None:
    """Redis keeps an append-only file on a named volume (a restart keeps the cached clusters), and
    the service's settings, API keys first, come from the environment."""
    redis, app = COMPOSE["services"]["redis"], COMPOSE["services"]["hpcsched"]
    cmd = redis["command"]
    assert cmd[cmd.index("--appendonly") + 1] == "yes"
    assert redis["volumes"] == ["redis-data:/data"] and "redis-data" in COMPOSE["volumes"]
    env = app["environment"]
    assert env["HPCSCHED_API_KEYS"] == "${HPCSCHED_API_KEYS:-}"
    for name, value in env.items():
        if name != "REDIS_URL":
            assert value.startswith("${" + name), f"{name} is not taken from the environment"


def test_the_image_compiles_every_module_of_compiled_loops_at_build() -> None:
    """Every module of the core that compiles loops with numba (it says `@njit`) has a `warm()`; the
    image's build calls each one, so no first request of a container compiles for seconds."""
    compiled = sorted(
        ".".join(path.relative_to(ROOT).with_suffix("").parts)
        for path in (ROOT / "app").rglob("*.py") if "@njit" in path.read_text()
    )
    assert compiled, "no module compiles loops: this test has nothing to hold"
    build = instruction("RUN")
    for module in compiled:
        name = module.rsplit(".", 1)[1]
        assert "def warm()" in (ROOT / Path(*module.split("."))).with_suffix(".py").read_text(), module
        assert re.search(rf"\b{name}\.warm\(\)", build), module


def test_compose_passes_every_setting_with_the_services_default(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each field of Settings is in the compose file's environment, taken from the environment of
    `docker compose`, and its default there is the service's own: compose drops no setting and
    changes no default. (REDIS_URL is compose's own wiring to its Redis.)"""
    env = COMPOSE["services"]["hpcsched"]["environment"]
    wanted = {f"HPCSCHED_{name.upper()}" for name in Settings.model_fields} - {"HPCSCHED_REDIS_URL"}
    assert wanted <= set(env), f"compose drops {sorted(wanted - set(env))}"
    for name in list(os.environ):
        if name.startswith("HPCSCHED_") or name == "REDIS_URL":
            monkeypatch.delenv(name)
    for name in wanted:
        default = re.fullmatch(r"\$\{" + name + r":-(.*)\}", env[name])
        assert default, f"{name}: {env[name]!r} is not ${{{name}:-default}}"
        monkeypatch.setenv(name, default.group(1))
    from_compose, own = Settings(), Settings.model_construct()
    for field in Settings.model_fields:
        if field == "redis_url":
            continue
        mine, theirs = getattr(own, field), getattr(from_compose, field)
        assert mine == theirs or (mine is None and theirs == ""), (field, mine, theirs)

"""The cached path: PUT once, PATCH what changed between reads, decide from the cluster's id."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace

import pytest

from app.bridges.slurm.cached import CachedCluster, Seen, changes_between
from app.bridges.slurm.cycle import Bridge
from app.bridges.slurm.read import SlurmText, read
from app.bridges.slurm.runner import RecordedRunner
from app.bridges.slurm.service import in_process, over_http
from app.bridges.slurm.state import BridgeState
from tests.app_server import served
from tests.bridges import recorded


def _later(text: SlurmText, window: bool = False) -> SlurmText:
    """The next read: one running job ended, one node drained (and one reservation more)."""
    jobs = json.loads(text.jobs)
    jobs["jobs"] = [j for j in jobs["jobs"] if str(j["job_id"]) != "19"]
    nodes = json.loads(text.nodes)
    for n in nodes["nodes"]:
        if n["name"] == "n8":
            n["state_flags"] = ["DRAIN"]
    resv = text.reservations
    if window:
        resv += text.reservations.replace("maint", "maint2").replace("n[1-2]", "n3")
    return replace(text, jobs=json.dumps(jobs), nodes=json.dumps(nodes), reservations=resv)


def _starts(bridge: Bridge) -> list[tuple[str, list[str]]]:
    rep = bridge.cycle()
    assert rep.ok, rep.errors
    return [(s.job_id, s.node_ids) for s in rep.response.starts] if rep.response else []


def _fresh(text: SlurmText) -> list[tuple[str, list[str]]]:
    """The starts from a cache that was PUT this read whole (what each PATCH must amount to)."""
    service = in_process()
    bridge = Bridge(RecordedRunner(text), service, BridgeState(None, recorded.started()), dry_run=True,
                    cache=CachedCluster(service, "fresh"))
    return _starts(bridge)


def test_patch_says_exactly_what_changed() -> None:
    """Between two reads: the ended job, the drained node and the new window, nothing else."""
    started = recorded.started()
    old = Seen.of(read(recorded.text(), started))
    new = Seen.of(read(_later(recorded.text(), window=True), started))
    changes = changes_between(old, new)
    assert changes is not None
    assert [(c["op"], c.get("job_id") or c.get("node_id") or c["window"]["id"]) for c in changes] == \
        [("node_state", "n8"), ("job_ended", "19"), ("window_added", "maint2")]
    assert changes_between(new, new) == []


def test_a_node_change_the_patch_cannot_say_means_a_put() -> None:
    """A node whose capacity changed cannot be patched: the bridge sends a whole PUT."""
    view = read(recorded.text(), recorded.started())
    bigger = replace(view, nodes=[{**n, "capacity": {**n["capacity"], "cpu": 16}} if n["id"] == "n1" else n
                                  for n in view.nodes])
    assert changes_between(Seen.of(view), Seen.of(bigger)) is None


def _inline(text: SlurmText) -> list[tuple[str, list[str]]]:
    """The starts of an inline request (no cache) on the same read."""
    return _starts(Bridge(RecordedRunner(text), in_process(), BridgeState(None, recorded.started()),
                          dry_run=True))


def test_patched_cache_decides_as_a_fresh_one_and_as_inline() -> None:
    """PUT then PATCH (a job ended, a node drained, a window added): each cycle's starts equal
    those of a cache PUT whole from the same read, and those of an inline request."""
    service = in_process()
    cache = CachedCluster(service, "slurm")
    runner = RecordedRunner(recorded.text())
    bridge = Bridge(runner, service, BridgeState(None, recorded.started()), dry_run=True, cache=cache)
    assert _starts(bridge) == _fresh(recorded.text()) == _inline(recorded.text())
    assert cache.last_write == "put"
    runner.text = _later(recorded.text(), window=True)
    assert _starts(bridge) == _fresh(runner.text) == _inline(runner.text)
    assert cache.last_write.startswith("patch (3")
    assert _starts(bridge) == _fresh(runner.text) and cache.last_write == "unchanged"


def test_a_stale_cache_is_put_again() -> None:
    """When someone else wrote the cached cluster (409 on PATCH), the bridge PUTs its read again."""
    service = in_process()
    cache = CachedCluster(service, "slurm")
    runner = RecordedRunner(recorded.text())
    bridge = Bridge(runner, service, BridgeState(None, recorded.started()), dry_run=True, cache=cache)
    _starts(bridge)
    other = CachedCluster(service, "slurm")
    other.sync(read(recorded.text(idle=True), {}))  # bumps the version behind the bridge's back
    runner.text = _later(recorded.text())
    assert _starts(bridge) == _fresh(runner.text) and cache.last_write == "put"


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with served() as base:
        yield base


def test_cached_path_over_http(url: str) -> None:
    """Through a real uvicorn: PUT, PATCH with If-Match, a stale PATCH answered by a PUT."""
    service = over_http(url)
    try:
        cache = CachedCluster(service, "slurm-http")
        runner = RecordedRunner(recorded.text())
        bridge = Bridge(runner, service, BridgeState(None, recorded.started()), dry_run=True, cache=cache)
        assert _starts(bridge) == _fresh(recorded.text()) and cache.last_write == "put"
        runner.text = _later(recorded.text())
        assert _starts(bridge) == _fresh(runner.text) and cache.last_write.startswith("patch")
        cache.version = (cache.version or 0) + 7  # what a lost write would leave
        runner.text = recorded.text()
        assert _starts(bridge) == _fresh(runner.text) and cache.last_write == "put"
    finally:
        service.close()



"""The bridge through a real slurmrestd (started here, on a unix socket in the test's temp dir,
against the test's own Slurm): one cycle reads over REST, pins with scontrol, releases and
comments over REST, and Slurm runs each released job where the service chose. Also: a REST read
equals a CLI read of the same moment, and a TCP slurmrestd takes the JWT `scontrol token` gives."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import pytest

from app.bridges.slurm.cycle import Bridge, CycleReport
from app.bridges.slurm.read import read
from app.bridges.slurm.rest import RestReader, RestRunner, connect
from app.bridges.slurm.runner import CommandRunner, SlurmError
from app.bridges.slurm.service import in_process
from app.bridges.slurm.state import BridgeState
from tests.bridges.slurm_cluster import LocalSlurm, free_ports, missing_binaries
from tests.bridges.workload import NODES, PARTITIONS, Ran, Submitted, records, submit_mix

MISSING = missing_binaries() + ([] if shutil.which("slurmrestd") else ["slurmrestd"])
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(bool(MISSING), reason=f"Slurm/munge/slurmrestd not installed: {MISSING} "
                                 "(.ci/run installs slurm-wlm munge slurmrestd)")]
JWT_USER = "nobody"
REPO = Path(__file__).resolve().parents[2]
LUA = REPO / "app" / "bridges" / "slurm" / "job_submit.lua"


@dataclass
class Outcome:
    slurm: LocalSlurm
    jobs: list[Submitted]
    cycle: CycleReport
    chosen: dict[str, set[str]]
    final: dict[str, Ran]
    rest_url: str
    tcp_url: str


@pytest.fixture(scope="module")
def outcome(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Outcome]:
    root = tmp_path_factory.mktemp("slurmrest")
    work = root / "work"
    work.mkdir()
    slurm = LocalSlurm(root, NODES, PARTITIONS, job_submit_lua=LUA, jwt=True)
    try:
        slurm.start()
        rest_url, tcp_url = f"unix:{root / 'rest.sock'}", f"http://127.0.0.1:{free_ports(1)[0]}"
        slurm.start_rest(rest_url)
        slurm.start_rest(tcp_url.removeprefix("http://"), auth="rest_auth/jwt")
        yield _one_cycle(slurm, work, rest_url, tcp_url)
    finally:
        slurm.stop()


def _one_cycle(slurm: LocalSlurm, work: Path, rest_url: str, tcp_url: str) -> Outcome:
    jobs = submit_mix(slurm, work)
    with connect(rest_url) as http:
        runner = RestRunner(RestReader(http), CommandRunner(str(slurm.conf)))
        bridge = Bridge(runner, in_process(), BridgeState(work / "state.json"), events=work / "events.jsonl")
        rep = bridge.cycle()
    chosen = {s.job_id: set(s.node_ids) for s in (rep.response.starts if rep.response else [])}
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        final = records(slurm)
        if all(final[j].state == "COMPLETED" for j in rep.started):
            break
        time.sleep(1)
    return Outcome(slurm, jobs, rep, chosen, records(slurm), rest_url, tcp_url)


def test_one_cycle_through_slurmrestd_started_jobs(outcome: Outcome) -> None:
    """The cycle read over REST, decided, and released jobs with no command failing."""
    rep = outcome.cycle
    assert rep.ok and not rep.errors
    assert len(rep.started) >= 5
    assert set(rep.started) == set(outcome.chosen)


def test_released_jobs_ran_where_the_service_chose(outcome: Outcome) -> None:
    """Slurm ran every job released through REST on exactly the nodes the scontrol pin named."""
    for jid in outcome.cycle.started:
        ran = outcome.final[jid]
        assert ran.state == "COMPLETED", jid
        assert set(ran.nodes) == outcome.chosen[jid], jid


def test_pending_jobs_got_their_comment_through_rest(outcome: Outcome) -> None:
    """Each job the service left pending carries its reason and estimate (set over REST)."""
    resp = outcome.cycle.response
    assert resp is not None and resp.pending
    for p in resp.pending:
        assert outcome.final[p.job_id].comment.startswith("hpcsched: "), p.job_id


def test_rest_read_equals_cli_read_of_the_same_moment(outcome: Outcome) -> None:
    """A REST read taken between two identical CLI reads gives the CLI's view."""
    cli = CommandRunner(str(outcome.slurm.conf))
    with connect(outcome.rest_url) as http:
        _same_moment(cli, RestReader(http))


def _same_moment(cli: CommandRunner, rest: RestReader) -> None:
    for _ in range(20):
        before, by_rest, after = cli.read(), rest.read(), cli.read()
        views = [asdict(read(t.__class__(t.nodes, t.jobs, t.reservations, before.now), {}))
                 for t in (before, by_rest, after)]
        if views[0] == views[2]:
            assert views[1] == views[0]
            assert views[1]["nodes"]
            return
        time.sleep(0.5)
    pytest.fail("Slurm never held still for two CLI reads")


def test_tcp_slurmrestd_takes_scontrols_jwt(outcome: Outcome) -> None:
    """Over TCP the reader authenticates with `scontrol token`'s JWT (of an ordinary user: Slurm
    refuses root's); a wrong token is refused (slurmctld rejects it: HTTP 500 from slurmrestd)."""
    token = outcome.slurm.token(JWT_USER)
    with connect(outcome.tcp_url, token=token, user=JWT_USER) as http:
        view = read(RestReader(http).read(), {})
    assert [n["id"] for n in view.nodes] == [n.name for n in NODES]
    assert set(view.comments) >= {j.job_id for j in outcome.jobs}
    with connect(outcome.tcp_url, token="not-a-token", user=JWT_USER) as http, \
            pytest.raises(SlurmError, match="GET /nodes: HTTP [45]"):
        RestReader(http).read()


def test_cli_once_through_slurmrestd(outcome: Outcome) -> None:
    """`hpcsched slurm once --dry-run --slurmrestd unix:...` reads through the socket and plans."""
    out = subprocess.run([sys.executable, "-m", "app.cli", "slurm", "once", "--dry-run", "--slurmrestd",
                          outcome.rest_url, "--conf", str(outcome.slurm.conf), "--state",
                          str(outcome.slurm.root / "shadow.json")], cwd=REPO, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "cycle:" in out.stdout and "errors" in out.stdout

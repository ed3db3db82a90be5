"""The slurmrestd path, on one recorded read of a real Slurm made twice (client programs, then
slurmrestd; tests/data/slurm/rest): the REST reader yields the state the CLI reader does, and
the bridge's commands go through REST where 22.05 can say them (scontrol for the pin)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict
from pathlib import Path

import httpx
import pytest

from app.bridges.slurm.apply import comment, reserved
from app.bridges.slurm.cycle import Bridge
from app.bridges.slurm.read import SlurmText, read, windows
from app.bridges.slurm.rest import API, RestReader, RestRunner, connect, rest_updates
from app.bridges.slurm.runner import RecordedRunner, SlurmError
from app.bridges.slurm.service import in_process
from app.bridges.slurm.state import BridgeState

DATA = Path(__file__).resolve().parents[1] / "data" / "slurm" / "rest"
NOW = 1_795_517_802.0  # a few seconds after the recording
REST_FILES = {f"{API}/nodes": "nodes.json", f"{API}/jobs": "jobs.json",
              f"{API}/reservations": "reservations.json"}


@pytest.fixture(autouse=True)
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """scontrol's reservation times are local time; the recording host ran in UTC."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def idle(doc: dict) -> None:
    """As if every running job had ended (room for the cycle to start some)."""
    doc["jobs"] = [j for j in doc["jobs"] if j["job_state"] != "RUNNING"]


def uncommented(doc: dict) -> None:
    """As if the bridge had not yet commented any job."""
    for j in doc["jobs"]:
        j["comment"] = ""


def cli_text() -> SlurmText:
    return SlurmText((DATA / "sinfo.json").read_text(), (DATA / "squeue.json").read_text(),
                     (DATA / "reservations.txt").read_text(), NOW)


def started() -> dict[str, float]:
    return {k: float(v) for k, v in json.loads((DATA / "started.json").read_text()).items()}


class FakeRestd:
    """slurmrestd's recorded answers for the reads; job updates recorded (and refused on request)."""

    def __init__(self, refuse: frozenset[str] = frozenset(),
                 edit: Callable[[dict], None] | None = None) -> None:
        self.updates: list[tuple[str, dict]] = []
        self.refuse, self.edit = refuse, edit
        self.headers: list[httpx.Headers] = []

    def __call__(self, req: httpx.Request) -> httpx.Response:
        self.headers.append(req.headers)
        if req.method == "GET" and req.url.path in REST_FILES:
            text = (DATA / REST_FILES[req.url.path]).read_text()
            if self.edit is not None and req.url.path.endswith("/jobs"):
                doc = json.loads(text)
                self.edit(doc)
                text = json.dumps(doc)
            return httpx.Response(200, text=text)
        if req.method == "GET" and req.url.path == f"{API}/diag":
            return httpx.Response(200, json={"errors": [], "statistics": {"jobs_submitted": 42,
                                                                          "jobs_started": 17}})
        if req.method == "POST" and req.url.path.startswith(f"{API}/job/"):
            job = req.url.path.rsplit("/", 1)[1]
            if job in self.refuse:
                return httpx.Response(500, json={"errors": [{"description": f"job {job} refused",
                                                             "error_number": 2017}]})
            self.updates.append((job, json.loads(req.content)))
            return httpx.Response(200, json={"errors": []})
        return httpx.Response(404, json={"errors": [{"description": "no such path"}]})


def rest_reader(fake: FakeRestd) -> RestReader:
    return RestReader(httpx.Client(transport=httpx.MockTransport(fake), base_url="http://slurmrestd"))


def test_rest_reader_yields_the_cli_readers_state() -> None:
    """On the same cluster at the same moment, both readers give the same wire view (nodes,
    running, released, pending, windows, skipped, comments, partitions)."""
    text = rest_reader(FakeRestd()).read()
    by_rest = read(SlurmText(text.nodes, text.jobs, text.reservations, NOW), started())
    by_cli = read(cli_text(), started())
    assert asdict(by_rest) == asdict(by_cli)
    assert by_cli.running and by_cli.pending and by_cli.windows and by_cli.skipped


def test_reservations_json_and_text_give_the_same_windows() -> None:
    """slurmrestd's reservation JSON and `scontrol show -o reservation` name the same window."""
    by_json = windows((DATA / "reservations.json").read_text())
    assert by_json == windows((DATA / "reservations.txt").read_text())
    assert [w["nodes"] for w in by_json] == [["n1", "n2"]]


def test_commands_rest_can_say_become_job_updates() -> None:
    """Release, partition and comment are per-job REST updates; the pin is not (None)."""
    assert rest_updates(["scontrol", "release", "7,8"]) == [("7", {"hold": False}), ("8", {"hold": False})]
    assert rest_updates(["scontrol", "update", "JobId=5", "Partition=short"]) == \
        [("5", {"partition": "short"})]
    assert rest_updates(["scontrol", "update", "JobId=5,6", "Comment=hpcsched: a=b c"]) == \
        [("5", {"comment": "hpcsched: a=b c"}), ("6", {"comment": "hpcsched: a=b c"})]
    pin = ["scontrol", "update", "JobId=5", "Partition=short", "ReqNodeList=n1,n2", "NumNodes=2-2",
           "Comment=hpcsched: started on n1,n2"]
    assert rest_updates(pin) is None
    assert rest_updates(["scontrol", "update", "NodeName=n1", "State=DRAIN"]) is None


def test_a_cycle_through_rest_pins_with_scontrol_and_releases_through_rest(tmp_path: Path) -> None:
    """One cycle: every started job was pinned by scontrol and released by REST (hold false), and
    nothing else went to scontrol."""
    fake, cli = FakeRestd(edit=idle), RecordedRunner(cli_text())
    bridge = Bridge(RestRunner(rest_reader(fake), cli), in_process(), BridgeState(tmp_path / "s.json",
                                                                                   started()))
    rep = bridge.cycle()
    assert rep.ok and rep.started and not rep.errors
    pinned = [c[2].removeprefix("JobId=") for c in cli.commands]
    assert all(c[:2] == ["scontrol", "update"] and any(a.startswith("ReqNodeList=") for a in c)
               for c in cli.commands)
    released = [job for job, body in fake.updates if body == {"hold": False}]
    assert sorted(pinned) == sorted(released) == sorted(rep.started)
    assert not [job for job, body in fake.updates if set(body) - {"hold", "comment"}]


def test_comments_and_nothing_else_through_rest_on_a_full_cluster(tmp_path: Path) -> None:
    """On the full cluster nothing starts; each pending or reserved job whose comment changes (all,
    here) gets it through REST, and scontrol is not called."""
    fake, cli = FakeRestd(edit=uncommented), RecordedRunner(cli_text())
    state = BridgeState(tmp_path / "s.json", started())
    rep = Bridge(RestRunner(rest_reader(fake), cli), in_process(), state).cycle()
    assert rep.ok and not rep.started and not cli.commands
    assert rep.response is not None and rep.view is not None
    texts = {p.job_id: comment(p) for p in rep.response.pending}
    texts.update({r.job_id: reserved(r) for r in rep.response.reservations})
    stale = {j for j, text in texts.items() if rep.view.comments[j] != text}
    assert {job for job, body in fake.updates if set(body) == {"comment"}} == stale
    assert stale and len(fake.updates) == len(stale)


def test_a_release_rest_refuses_is_taken_back(tmp_path: Path) -> None:
    """A job whose REST release fails is not recorded as started; the others are."""
    runner = RestRunner(rest_reader(FakeRestd(edit=idle)), RecordedRunner(cli_text()))
    first = Bridge(runner, in_process(), BridgeState(tmp_path / "a.json", started())).cycle().started
    victim = first[0]
    fake = FakeRestd(refuse=frozenset({victim}), edit=idle)
    state = BridgeState(tmp_path / "b.json", started())
    rep = Bridge(RestRunner(rest_reader(fake), RecordedRunner(cli_text())), in_process(), state).cycle()
    assert victim not in rep.started and victim not in state.started
    assert set(rep.started) == set(first) - {victim}
    assert any(f"job {victim} refused" in e for e in rep.errors)


def test_a_rest_error_is_a_slurm_error() -> None:
    """An answer carrying `errors` (22.05's refusal of required_nodes, say) raises SlurmError with
    slurmrestd's description; a failed read makes the cycle skip, changing nothing."""
    def refusing(req: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"errors": [{"description": 'Disabled key: "required_nodes"'}]})

    reader = RestReader(httpx.Client(transport=httpx.MockTransport(refusing), base_url="http://x"))
    with pytest.raises(SlurmError, match="Disabled key"):
        reader.read()
    cli = RecordedRunner(cli_text())
    rep = Bridge(RestRunner(reader, cli), in_process(), BridgeState(None)).cycle()
    assert not rep.ok and not cli.commands


def test_job_counters_come_from_rest_diag() -> None:
    assert RestRunner(rest_reader(FakeRestd()), RecordedRunner(cli_text())).changes() == "42/17/?/?/?"


def test_tcp_urls_send_the_jwt_and_need_one(tmp_path: Path) -> None:
    client = connect("http://127.0.0.1:6820", token="tok", user="alice")
    assert client.headers["X-SLURM-USER-NAME"] == "alice" and client.headers["X-SLURM-USER-TOKEN"] == "tok"
    with pytest.raises(ValueError, match="JWT"):
        connect("http://127.0.0.1:6820", token=None)
    with pytest.raises(ValueError, match="unix:/path"):
        connect("/run/slurmrestd.sock")
    local = connect(f"unix:{tmp_path / 'rest.sock'}")
    assert "X-SLURM-USER-TOKEN" not in local.headers


def test_cli_needs_a_token_for_tcp(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """--slurmrestd http://... with neither SLURM_JWT nor --token-file is a usage error naming
    the option, before any cycle."""
    from typer.testing import CliRunner

    from app.bridges.slurm.cli import slurm_cli

    monkeypatch.delenv("SLURM_JWT", raising=False)
    res = CliRunner().invoke(slurm_cli, ["once", "--slurmrestd", "http://127.0.0.1:9", "--state",
                                         str(tmp_path / "s.json")])
    assert res.exit_code == 2 and "--slurmrestd" in res.output and "JWT" in res.output
    token = tmp_path / "jwt"
    token.write_text("tok\n")
    res = CliRunner().invoke(slurm_cli, ["once", "--slurmrestd", "http://127.0.0.1:9", "--token-file",
                                         str(token), "--state", str(tmp_path / "s.json")])
    assert res.exit_code == 1 and "cycle skipped" in res.output and "slurmrestd" in res.output

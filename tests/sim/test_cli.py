"""The `hpcsched` command line: simulate and compare write what they say, bad parameters are refused."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from app.cli import cli
from tests.sim.test_replay import EXPECTED, HAND

runner = CliRunner(env={"COLUMNS": "200"})


def write(tmp_path: Path, name: str, data: bytes) -> Path:
    """The trace `data` as a file the command line can read."""
    trace = tmp_path / name
    trace.write_bytes(data)
    return trace


def test_simulate_writes_the_metrics(tmp_path: Path) -> None:
    trace = write(tmp_path, "hand.swf", HAND)
    out = tmp_path / "m.json"
    r = runner.invoke(cli, ["simulate", str(trace), "--policy", "easy", "--nodes", "4", "--json", str(out)])
    assert r.exit_code == 0, r.output
    m = json.loads(out.read_text())["policies"]["easy"]["metrics"]
    starts = EXPECTED["easy"]
    submits = {"1": 0, "2": 1, "3": 2, "4": 3, "5": 4}
    assert m["jobs"] == 5 and m["backfills"] == 2
    assert m["wait_mean"] == sum(starts[j] - submits[j] for j in starts) / 5


def test_simulate_without_reservations_reports_no_reserved_count(tmp_path: Path) -> None:
    """--no-reservations keeps the metrics of the schedule and leaves the reserved count out, rather
    than a count of 0 that was never taken."""
    trace = write(tmp_path, "hand.swf", HAND)
    got = {}
    for flag in ("--reservations", "--no-reservations"):
        out = tmp_path / f"{flag}.json"
        r = runner.invoke(cli, ["simulate", str(trace), "--nodes", "4", "--json", str(out), flag])
        assert r.exit_code == 0, r.output
        got[flag] = json.loads(out.read_text())["policies"]["easy"]["metrics"]
    with_count = got["--reservations"]
    assert with_count.pop("reserved") >= 1  # job 2 waits behind job 1 under a reservation
    assert with_count.keys() == got["--no-reservations"].keys()
    assert all(got["--no-reservations"][k] == v for k, v in with_count.items() if k != "jobs_per_s")


def test_compare_writes_a_table_json_and_plots(tmp_path: Path) -> None:
    trace = write(tmp_path, "hand.swf", HAND)
    r = runner.invoke(cli, ["compare", str(trace), "--policies", "fcfs,easy,conservative", "--nodes", "4",
                            "--plots", str(tmp_path / "p"), "--json", str(tmp_path / "c.json")])
    assert r.exit_code == 0, r.output
    assert set(json.loads((tmp_path / "c.json").read_text())["policies"]) == {"fcfs", "easy", "conservative"}
    for png in ("wait_cdf.png", "utilisation.png"):
        assert (tmp_path / "p" / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bad_parameter_is_named(tmp_path: Path) -> None:
    trace = write(tmp_path, "hand.swf", HAND)
    r = runner.invoke(cli, ["simulate", str(trace), "--param", "reservation_depth=-1"])
    assert r.exit_code == 2 and "reservation_depth" in r.output
    r = runner.invoke(cli, ["simulate", str(trace), "--policy", "magic"])
    assert r.exit_code == 2 and "magic" in r.output


def test_malformed_trace_names_the_line(tmp_path: Path) -> None:
    trace = write(tmp_path, "bad.swf", HAND + b"oops\n")
    r = runner.invoke(cli, ["simulate", str(trace)])
    assert r.exit_code == 2 and "line 7" in r.output


def test_compare_on_a_machine_split_among_queues(tmp_path: Path) -> None:
    from tests.sim.test_queues import HAND as QUEUED

    trace = write(tmp_path, "queued.swf", QUEUED)
    r = runner.invoke(cli, ["compare", str(trace), "--queue-nodes", "q1=2,q2=2",
                            "--plots", str(tmp_path / "p"),
                            "--policies", 'easy,easy:migration={"mode":"static","threshold":0.85}',
                            "--json", str(tmp_path / "c.json")])
    assert r.exit_code == 0, r.output
    out = json.loads((tmp_path / "c.json").read_text())
    assert out["machine"]["queue_nodes"] == {"q1": 2, "q2": 2}
    runs = out["policies"]
    assert runs["easy"]["metrics"]["migrated"] == 0
    assert runs['easy:migration={"mode":"static","threshold":0.85}']["metrics"]["migrated"] == 1


def test_bad_split_is_named(tmp_path: Path) -> None:
    from tests.sim.test_queues import HAND as QUEUED

    trace = write(tmp_path, "queued.swf", QUEUED)
    r = runner.invoke(cli, ["simulate", str(trace), "--queue-nodes", "q1=2"])
    assert r.exit_code == 2 and "q2" in r.output
    r = runner.invoke(cli, ["simulate", str(trace), "--queue-nodes", "q1=two"])
    assert r.exit_code == 2 and "queue=nodes" in r.output
    r = runner.invoke(cli, ["simulate", str(trace), "--queue-nodes", "q1=2,q2=1,q1=3"])
    assert r.exit_code == 2 and "given twice" in r.output


def test_the_reading_options_reach_the_replay(tmp_path: Path) -> None:
    """--kill-at-request ends a job that overran at its request, and the default runs it out."""
    trace = write(tmp_path, "over.swf", b"; MaxProcs: 1\n1 0 -1 100 1 -1 -1 1 30 -1 1 1 1 -1 0 -1 -1 -1\n")
    makespans = []
    for extra in ([], ["--kill-at-request"]):
        out = tmp_path / "m.json"
        r = runner.invoke(cli, ["simulate", str(trace), "--json", str(out), *extra])
        assert r.exit_code == 0, r.output
        makespans.append(json.loads(out.read_text())["policies"]["easy"]["metrics"]["makespan"])
    assert makespans == [100, 30]


def test_an_unknown_reading_value_is_refused(tmp_path: Path) -> None:
    """A misspelt --size is an error naming the option, not a silent default."""
    trace = write(tmp_path, "hand.swf", HAND)
    r = runner.invoke(cli, ["simulate", str(trace), "--size", "alloc"])
    assert r.exit_code != 0 and "size is one of larger, allocated" in r.output


def test_tune_reads_a_log_with_the_same_options_as_simulate() -> None:
    """Every option that chooses how a log is read (size, kill at request, unknown and zero run
    times) is taken by simulate, compare and tune alike."""
    from typer.main import get_command

    commands = get_command(cli).commands  # type: ignore[attr-defined]
    reading = {"--size", "--kill-at-request", "--raise-to-run", "--unknown-runtime", "--zero-runtime"}
    for name in ("simulate", "compare", "tune"):
        options = {o for p in commands[name].params for o in getattr(p, "opts", [])}
        assert reading <= options, (name, reading - options)


def test_tables_never_cut_a_value() -> None:
    """A table wider than the terminal folds its values onto more lines; no digit is replaced by an
    ellipsis."""
    from rich.console import Console

    from app.cli import table

    row = {c: 63_025_412_345.0 for c in ("wait_mean", "wait_p50", "wait_p99", "bsld_mean", "makespan")}
    narrow = Console(width=60, record=True)
    narrow.print(table("t", {"a-long-policy-name": row}, "policy", width=60))
    text = narrow.export_text()
    assert "…" not in text and max(map(len, text.splitlines())) <= 60
    assert text.count("63,025,412,345") == len(row) and text.count("a-long-policy-name") >= 2


def test_the_stepwise_correction_reaches_the_replay(tmp_path: Path) -> None:
    """--correction stepwise with predicted run times: the hand trace of tests/sim/test_predicted
    (J4 backfills when J2's overrun is corrected to its request, waits when stepwise); an unknown
    correction is refused naming the option."""
    from tests.sim.test_predicted import swf

    trace = write(tmp_path, "p.swf", swf((0, 10, 1, 1000, 1), (20, 500, 1, 1000, 1), (25, 100, 2, 100, 2),
                                          (40, 200, 1, 200, 3)))
    waits = {}
    for correction in ("request", "stepwise"):
        out = tmp_path / f"{correction}.json"
        r = runner.invoke(cli, ["simulate", str(trace), "--nodes", "2", "--param", "time_grain_s=1",
                                "--predict-runtimes", "--correction", correction, "--json", str(out)])
        assert r.exit_code == 0, r.output
        waits[correction] = json.loads(out.read_text())["policies"]["easy"]["metrics"]["wait_mean"]
    assert waits == {"request": (0 + 0 + 495 + 0) / 4, "stepwise": (0 + 0 + 495 + 580) / 4}
    r = runner.invoke(cli, ["compare", str(trace), "--nodes", "2", "--correction", "gradual"])
    assert r.exit_code == 2 and "--correction" in r.output

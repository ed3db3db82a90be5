"""Tuning: the search space, the objectives and the choice, by hand; the sweep on a real local Dask
cluster (two worker processes): honest (the held-out part cannot change the choice) and resumable."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from app.cli import cli
from app.sim import tune as t
from app.sim.sweep import Task, dask_client, run_sweep
from app.sim.swf import read_swf
from app.sim.workload import Workload, default_machine, workload
from app.tune_cli import run_tuning

SDSC = Path(__file__).parent.parent / "data" / "SDSC-SP2-1998-4.2-cln.first1500.swf"
SMALL_SPACE = "order=fcfs,sjf;reservation_depth=1;time_grain_s=1;predicted=false"


def m(bsld: float, wait: float, wait_max: float = 0.0, unstarted: float = 0.0) -> dict[str, float]:
    return {"bsld": bsld, "wait": wait, "utilisation": 0.5, "bsld_worst1": bsld, "wait_worst1": wait,
            "wait_max": wait_max, "unstarted": unstarted}


TRAIN = {"easy": m(10, 100, 1000), "a": m(8, 120, 5000), "b": m(9, 60, 900), "c": m(1, 1, 1, unstarted=1)}


@pytest.mark.parametrize(("objective", "best"), [
    ("bsld", "a"), ("wait", "b"),
    ("mix:bsld=1,wait=1", "b"),  # a: 0.8 + 1.2 = 2.0; b: 0.9 + 0.6 = 1.5; easy: 2
    ("mix:bsld=1,wait=0.1", "a"),  # a: 0.8 + 0.12; b: 0.9 + 0.06
    ("maxwait-cap:2000", "b"),  # a waits 5,000 s at worst: over the cap
    ("maxwait-cap:100", "b"),  # nobody under the cap: the shortest longest wait
], ids=["bsld", "wait", "mix-even", "mix-bsld", "cap", "cap-none-under"])
def test_the_objective_chooses_on_hand_numbers(objective: str, best: str) -> None:
    """Each objective picks the setting it says; a replay leaving jobs unstarted (c) never wins."""
    assert t.choose(t.parse_objective(objective), TRAIN, "easy") == best


@pytest.mark.parametrize("bad", ["slowdown", "mix:bsld", "mix:speed=1", "maxwait-cap:soon", "bsld:2"])
def test_a_bad_objective_is_refused(bad: str) -> None:
    """An objective that does not parse is an error, not a default."""
    with pytest.raises(ValueError):
        t.parse_objective(bad)


def test_the_space_is_every_combination_and_bounded() -> None:
    """The product of the dimensions, deduplicated; an unbounded reservation depth is refused."""
    settings = t.settings(t.parse_space("order=fcfs,f1;reservation_depth=1,2;predicted=false,true"))
    assert len(settings) == 2 * 2 * 2 * 2 * 2  # order, depth, predicted; backfill_order, grain (default)
    assert len({s.key for s in settings}) == len(settings)
    assert {s.policy["params"]["order"] for s in settings} == {"fcfs", "f1"}
    with pytest.raises(ValueError, match="reservation_depth 1000000"):
        t.settings(t.parse_space("reservation_depth=1,1000000"))
    with pytest.raises(ValueError, match="expected key=v1,v2"):
        t.parse_space("order")


def test_the_split_keeps_the_order_and_refuses_empty_parts() -> None:
    """Train is the first jobs, held-out the rest; a split leaving a part empty is refused."""
    w = sdsc(200)
    train, held = t.split(w, 0.25)
    assert train.jobs == w.jobs[:50] and held.jobs == w.jobs[50:]
    for bad in (0.0, 1.0, 0.001):
        with pytest.raises(ValueError):
            t.split(w, bad)


def test_the_worst_one_percent_is_the_mean_of_the_largest() -> None:
    """200 values: the worst 1 % is the mean of the two largest."""
    import numpy as np

    assert t._worst(np.arange(200.0)) == 198.5 and math.isinf(t._worst(np.array([])))


def sdsc(jobs: int) -> Workload:
    trace = read_swf(SDSC, limit=jobs)
    return workload(trace, default_machine(trace))


@pytest.fixture(scope="module")
def scheduler() -> Any:
    """A real dask.distributed LocalCluster of two worker processes on loopback, for this module."""
    from distributed import LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0",
                      host="127.0.0.1") as cluster:
        yield cluster.scheduler_address


def test_the_held_out_part_cannot_change_the_choice(scheduler: str, tmp_path: Path) -> None:
    """Honest by construction: the same train part with a very different held-out part gives the
    same choice and the same train results, while the held-out figures do change."""
    w = sdsc(240)
    train, held = t.split(w, 0.5)
    space = t.settings(t.parse_space(SMALL_SPACE))
    goal = t.parse_objective("bsld")
    first = run_tuning(train, held, goal, space, tmp_path / "a.jsonl", scheduler)
    slower = Workload(held.machine, [replace(j, run=j.run * 3, estimate=j.estimate * 3) for j in held.jobs])
    second = run_tuning(train, slower, goal, space, tmp_path / "b.jsonl", scheduler)
    timeless = [[{k: v for k, v in row.items() if k != "seconds"} for row in r["train"]]
                for r in (first, second)]
    assert first["chosen"] == second["chosen"] and timeless[0] == timeless[1]
    assert first["held_out"] != second["held_out"]
    assert set(first["held_out"]) == {"chosen", "easy", "firstfit"}


def test_an_interrupted_sweep_resumes_without_redoing_finished_runs(scheduler: str, tmp_path: Path) -> None:
    """Stopped after two results, a rerun reuses those two, runs the rest, and answers as a run that
    was never stopped; results made on another workload are not reused."""
    w = sdsc(300)
    space = t.parse_space(SMALL_SPACE + ";backfill_order=priority,sjf")
    tasks = [Task("train", s) for s in t.settings(space)]
    stamps = {"train": t.fingerprint(w, {})}
    results = tmp_path / "r.jsonl"
    seen: list[bool] = []

    def stop_after_two(task: Task, rec: dict[str, Any], reused: bool) -> None:
        seen.append(reused)
        if len(seen) == 2:
            raise KeyboardInterrupt

    with dask_client(scheduler) as client:
        with pytest.raises(KeyboardInterrupt):
            run_sweep(client, tasks, {"train": w}, stamps, results, stop_after_two)
        assert len(results.read_text().splitlines()) == 2
        seen.clear()
        resumed = run_sweep(client, tasks, {"train": w}, stamps, results, lambda *a: seen.append(a[2]))
        assert sorted(seen) == [False, False, True, True] and len(tasks) == 4
        fresh = run_sweep(client, tasks, {"train": w}, stamps, tmp_path / "fresh.jsonl")
        other = {"train": t.fingerprint(sdsc(299), {})}
        seen.clear()
        run_sweep(client, tasks[:1], {"train": sdsc(299)}, other, results, lambda *a: seen.append(a[2]))
    assert seen == [False]  # another workload: computed again
    assert {k: v["measures"] for k, v in resumed.items()} == {k: v["measures"] for k, v in fresh.items()}
    assert len(results.read_text().splitlines()) == 5


@pytest.mark.slow
def test_the_command_writes_the_report_plots_and_policy_block(scheduler: str, tmp_path: Path) -> None:
    """`hpcsched tune` against an existing scheduler: the JSON report, three plots, and a policy block
    that POST /schedule's model accepts."""
    r = CliRunner(env={"COLUMNS": "200"}).invoke(cli, [
        "tune", str(SDSC), "--jobs", "300", "--scheduler", scheduler, "--space", SMALL_SPACE,
        "--objective", "wait", "--results", str(tmp_path / "r.jsonl"), "--json", str(tmp_path / "t.json"),
        "--plots", str(tmp_path / "p")])
    assert r.exit_code == 0, r.output
    report = json.loads((tmp_path / "t.json").read_text())
    assert report["settings"] == 4 + 2 and report["objective"] == "lowest mean wait"
    assert report["train"][0]["wait"] == min(row["wait"] for row in report["train"])
    assert t.params_of(report["policy"])  # validates as POST /schedule's policy block
    assert '"policy"' in r.output and "held-out part" in r.output
    assert sorted(p.name for p in (tmp_path / "p").iterdir()) == [
        "held_out_vs_easy.png", "held_out_wait_cdf.png", "train_scores.png"]


def test_a_bad_space_is_refused_naming_the_option(tmp_path: Path) -> None:
    """A parameter the policy does not have is refused before any cluster starts."""
    r = CliRunner().invoke(cli, ["tune", str(SDSC), "--space", "speed=1,2"])
    assert r.exit_code != 0 and "--space" in r.output

"""Tuning: the search space, the objectives and the choice, by hand; the guard against starvation on a
hand-made trace; the rolling windows; the verdict against EASY; the sweep on a real local Dask cluster
(two worker processes): honest (a held-out window cannot change the choice) and resumable."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from app.cli import cli
from app.sim import tune as t
from app.sim.sweep import Task, dask_client, run_sweep
from app.sim.swf import read_swf
from app.sim.workload import Machine, Workload, default_machine, workload
from app.tune_cli import run_tuning

SDSC = Path(__file__).parent.parent / "data" / "SDSC-SP2-1998-4.2-cln.first1500.swf"
SMALL_SPACE = "order=fcfs,sjf;reservation_depth=1;time_grain_s=1;predicted=false;wait_cap_s=null"


def m(bsld: float, wait: float, wait_max: float = 0.0, unstarted: float = 0.0) -> dict[str, float]:
    """Measures by hand; the p99 wait is taken equal to the mean wait."""
    return {"bsld": bsld, "wait": wait, "utilisation": 0.5, "bsld_worst1": bsld, "wait_worst1": wait,
            "wait_p99": wait, "wait_max": wait_max, "unstarted": unstarted}


TRAIN = {"easy": m(10, 100, 1000), "a": m(8, 120, 5000), "b": m(9, 60, 900), "c": m(1, 1, 1, unstarted=1)}


@pytest.mark.parametrize(("objective", "best"), [
    ("bsld", "a"), ("wait", "b"),
    ("mix:bsld=1,wait=1", "b"),  # a: 0.8 + 1.2 = 2.0; b: 0.9 + 0.6 = 1.5; easy: 2
    ("mix:bsld=1,wait=0.1", "a"),  # a: 0.8 + 0.12; b: 0.9 + 0.06
    ("maxwait-cap:2000", "b"),  # a waits 5,000 s at worst: over the cap
    ("maxwait-cap:100", "b"),  # nobody under the cap: the shortest longest wait
    ("guarded", "b"),  # a: longest wait 5,000 > 2 x 1,000 and p99 120 > 100: outside the guard
    ("guarded:max=10,p99=2", "a"),  # a wider guard lets a in
], ids=["bsld", "wait", "mix-even", "mix-bsld", "cap", "cap-none-under", "guarded", "guarded-wide"])
def test_the_objective_chooses_on_hand_numbers(objective: str, best: str) -> None:
    """Each objective picks the setting it says; a replay leaving jobs unstarted (c) never wins."""
    assert t.choose(t.parse_objective(objective), TRAIN, "easy") == best


@pytest.mark.parametrize("bad", ["slowdown", "mix:bsld", "mix:speed=1", "maxwait-cap:soon", "bsld:2",
                                 "guarded:max=0", "guarded:p99=-1", "guarded:p99=nan", "guarded:mean=2",
                                 "guarded:max=inf", "guarded:p99"])
def test_a_bad_objective_is_refused(bad: str) -> None:
    """An objective that does not parse is an error, not a default."""
    with pytest.raises(ValueError):
        t.parse_objective(bad)


def test_a_guard_factor_under_one_asks_the_train_window_for_a_shorter_tail() -> None:
    """p99=0.9 refuses a setting whose p99 wait is 95 % of EASY's, which the default guard lets in;
    with factors no setting meets, EASY itself is chosen (never the unguarded best)."""
    train = {**TRAIN, "d": m(8.5, 95, 900)}  # p99 95: within 1x EASY's 100, not within 0.9x
    assert t.choose(t.parse_objective("guarded"), train, "easy") == "d"
    strict = t.parse_objective("guarded:p99=0.9")
    assert (strict.max_factor, strict.p99_factor) == (2.0, 0.9)
    assert t.choose(strict, train, "easy") == "b"  # p99 60 <= 90
    assert t.choose(t.parse_objective("guarded:max=0.5,p99=0.5"), train, "easy") == "easy"


def test_a_guard_factor_under_one_is_judged_held_out_against_easy_itself() -> None:
    """Held out, a factor under 1 counts as 1: a choice with p99 95 % of EASY's beats EASY under
    guarded:p99=0.9 (the margin was the train window's), one with 105 % does not; factors over 1 are
    the bar as given."""
    easy = m(10, 100, 1000)
    strict, wide = t.parse_objective("guarded:max=1.5,p99=0.9"), t.parse_objective("guarded:max=3,p99=1.2")
    assert (t.judged(strict).max_factor, t.judged(strict).p99_factor) == (1.5, 1.0)
    assert t.judged(wide) == wide
    assert t.beats_easy(strict, m(8, 95, 1400), easy)
    assert not t.beats_easy(strict, m(8, 105, 1400), easy) and not t.beats_easy(strict, m(8, 95, 1600), easy)
    keep, why = t.verdict(strict, [(m(8, 95, 1400), easy)] * 2)
    assert keep and "p99 wait <= 1x" in why and "longest wait <= 1.5x" in why


def test_the_space_is_every_combination_and_bounded() -> None:
    """The product of the dimensions, deduplicated; an unbounded reservation depth is refused."""
    settings = t.settings(t.parse_space("order=fcfs,f1;reservation_depth=1,2;predicted=false,true"))
    # depth, predicted; backfill_order, grain (default); for f1 the wait caps too (none and six),
    # for fcfs none (aging changes nothing there)
    assert len(settings) == 2 * 2 * 2 * 2 * (1 + 7)
    assert len({s.key for s in settings}) == len(settings)
    assert {s.policy["params"]["order"] for s in settings} == {"fcfs", "f1"}
    caps = {s.policy["params"].get("wait_cap_s") for s in settings if s.policy["params"]["order"] == "f1"}
    assert caps == {None, 3_600, 14_400, 43_200, 86_400, 172_800, 345_600}
    fcfs = [s for s in settings if s.policy["params"]["order"] == "fcfs"]
    assert all("wait_cap_s" not in s.policy["params"] for s in fcfs)
    with pytest.raises(ValueError, match="reservation_depth 1000000"):
        t.settings(t.parse_space("reservation_depth=1,1000000"))
    with pytest.raises(ValueError, match="expected key=v1,v2"):
        t.parse_space("order")


@pytest.mark.parametrize("folds", [1, 2, 3, 5])
def test_the_rolling_windows_cover_the_trace_in_order_without_overlap(folds: int) -> None:
    """Fold i trains on window i and is judged on window i + 1: train and held-out windows never share
    a job, each held-out window follows its train window, and the windows, in order, are the trace."""
    w = sdsc(203)
    parts = t.rolling(w, folds)
    assert len(parts) == folds
    windows = [parts[0][0].jobs] + [held.jobs for _, held in parts]
    assert [j for window in windows for j in window] == w.jobs  # every job once, in submit order
    for i, (train, held) in enumerate(parts):
        assert not {j.id for j in train.jobs} & {j.id for j in held.jobs}
        assert train.jobs[-1].submit <= held.jobs[0].submit
        assert train.jobs == windows[i] and held.jobs == windows[i + 1]
    assert max(map(len, windows)) - min(map(len, windows)) <= 1
    with pytest.raises(ValueError):
        t.rolling(sdsc(5), 3)  # windows of fewer than 2 jobs
    with pytest.raises(ValueError):
        t.rolling(w, 0)


# One node. Job 1 runs 10 s from t0; L (t1) runs 100 s; then 40 jobs of 10 s arrive every 10 s from
# t2: they alone keep the node busy. Shortest first starts each short job before L, which waits for
# the whole stream; first come, first served starts L at 10 and the short jobs queue behind it.
def starving_trace() -> Workload:
    lines = ["1 0 -1 10 1 -1 -1 1 10 -1 1 1 1 -1 0 -1 -1 -1",
             "2 1 -1 100 1 -1 -1 1 100 -1 1 2 1 -1 0 -1 -1 -1"]
    lines += [f"{k} {2 + 10 * (k - 3)} -1 10 1 -1 -1 1 10 -1 1 3 1 -1 0 -1 -1 -1" for k in range(3, 43)]
    return workload(read_swf(("; MaxProcs: 1\n" + "\n".join(lines) + "\n").encode()), Machine(1))


def test_the_guard_refuses_a_setting_that_starves_a_job() -> None:
    """Unguarded mean bsld picks shortest-first, whose longest wait is far over EASY's; the guarded
    default picks a setting whose longest and p99 waits stay within 2x and 1x EASY's."""
    w = starving_trace()
    pool = [t.Setting(t.EASY), *t.settings(t.parse_space("order=fcfs,sjf;reservation_depth=1;"
                                                         "time_grain_s=1;backfill_order=priority"))]
    train = {s.key: t.evaluate(w, s)["measures"] for s in pool}
    easy = train[pool[0].key]
    label = {s.key: s for s in pool}
    unguarded = t.choose(t.parse_objective("bsld"), train, pool[0].key)
    guarded = t.choose(t.parse_objective("guarded"), train, pool[0].key)
    assert label[unguarded].policy["params"]["order"] == "sjf"
    assert train[unguarded]["bsld"] < easy["bsld"] and train[unguarded]["wait_max"] > 2 * easy["wait_max"]
    assert guarded != unguarded
    assert train[guarded]["wait_max"] <= 2 * easy["wait_max"]
    assert train[guarded]["wait_p99"] <= easy["wait_p99"]
    goal = t.parse_objective("guarded")
    assert not t.guard_holds(goal, train[unguarded], easy)  # flagged, were it judged on this window
    assert not t.beats_easy(goal, train[unguarded], easy)


def test_the_verdict_keeps_easy_unless_every_held_out_window_is_won() -> None:
    """Recommend only when every fold's choice has a lower mean bsld than EASY and keeps the guard on
    its held-out window; a loss in bsld, or a starving tail, on any one window means keep EASY."""
    goal = t.parse_objective("guarded")
    easy = m(10, 100, 1000)
    better = m(8, 90, 1500)  # lower bsld, p99 90 <= 100, longest 1,500 <= 2,000
    worse_bsld = m(11, 90, 900)
    starving = m(5, 150, 900)  # lower bsld, but p99 150 > EASY's 100
    assert t.verdict(goal, [(better, easy), (better, easy)])[0]
    for bad in (worse_bsld, starving):
        keep, why = t.verdict(goal, [(better, easy), (bad, easy), (better, easy)])
        assert not keep and why.startswith("keep EASY") and "window(s) 2 of 3" in why


def test_the_margin_keeps_easy_when_a_train_window_is_won_by_too_little() -> None:
    """A choice that beats EASY on every held-out window is recommended only when it also beat EASY
    on every train window by the margin; the reason names the train window that fell short."""
    goal = t.parse_objective("guarded")
    easy, better = m(10, 100, 1000), m(8, 90, 1500)
    held = [(better, easy)] * 3
    assert t.verdict(goal, held, [0.2, 0.05, 0.3], margin=0.05)[0]
    keep, why = t.verdict(goal, held, [0.2, 0.049, 0.3], margin=0.05)
    assert not keep and "train window(s) 2 of 3" in why and "5%" in why and "held-out" not in why


def test_the_fitting_search_starts_and_moves_within_its_bounds() -> None:
    """The random starts are the same in every run and within the bounds; each neighbour moves one
    weight by one step and stays within the bounds; a fitted setting's weights are the point's,
    rounded, and read back as the point."""
    points = t.first_points()
    assert points == t.first_points() and len(points) == t.FIT_START
    assert points[0] == {"fit_n": 0.0, "fit_rn": 0.0, "log_fit_s": -2.0}
    for p in points:
        assert all(lo <= p[k] <= hi for k, (lo, hi) in t.FIT_BOUNDS.items())
    edge = {"fit_n": 3.0, "fit_rn": 0.0, "log_fit_s": -4.0}
    moved = t.neighbours(edge, t.FIT_STEP)
    assert len(moved) == 4  # nothing above fit_n's upper bound, nothing below log_fit_s's lower one
    for q in moved:
        assert sum(q[k] != edge[k] for k in edge) == 1
        assert all(lo <= q[k] <= hi for k, (lo, hi) in t.FIT_BOUNDS.items())
    base = t.Setting({"name": "priority", "params": {"reservation_depth": 2, "time_grain_s": 60}}, True)
    s = t.fitted(base, {"fit_n": 0.123456, "fit_rn": -0.5, "log_fit_s": -1.0})
    assert s.policy["params"] == {"reservation_depth": 2, "time_grain_s": 60, "order": "fitted",
                                  "fit_r": 1.0, "fit_n": 0.123, "fit_rn": -0.5, "fit_s": 0.1}
    assert s.predicted and t.params_of(s.policy)[1].order == "fitted"
    assert t.point_of(s) == pytest.approx({"fit_n": 0.123, "fit_rn": -0.5, "log_fit_s": -1.0})


def test_the_fitted_order_is_fitted_into_the_best_priority_setting() -> None:
    """The base keeps the best priority setting's depth, grain and predictions, without its order or
    wait cap; EASY (not a priority setting) is never the base even when it scores best."""
    pool = [t.Setting(t.EASY), *t.settings(t.parse_space("order=sjf,fcfs;reservation_depth=1,2;"
                                                         "time_grain_s=60;backfill_order=priority;"
                                                         "predicted=false;wait_cap_s=3600"))]
    train = {s.key: m(20, 100, 1000) for s in pool}
    best = next(s for s in pool if s.policy["params"].get("order") == "sjf"
                and s.policy["params"]["reservation_depth"] == 2)
    train[best.key] = m(12, 90, 900)
    train[pool[0].key] = m(5, 50, 500)  # EASY
    base = t.fit_base(t.parse_objective("guarded"), pool, train, pool[0].key)
    assert base.policy["params"] == {"reservation_depth": 2, "time_grain_s": 60, "backfill_order": "priority",
                                     "selector": "first_fit"}


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
    """Honest by construction: the same train window with a very different held-out window gives the
    same choice and the same train results, while the held-out figures do change."""
    w = sdsc(240)
    ((train, held),) = t.rolling(w, 1)
    space = t.settings(t.parse_space(SMALL_SPACE))
    goal = t.parse_objective("bsld")
    first = run_tuning([(train, held)], goal, space, tmp_path / "a.jsonl", scheduler)
    slower = Workload(held.machine, [replace(j, run=j.run * 3, estimate=j.estimate * 3) for j in held.jobs])
    second = run_tuning([(train, slower)], goal, space, tmp_path / "b.jsonl", scheduler)
    timeless = [[{k: v for k, v in row.items() if k != "seconds"} for row in r["folds"][0]["train"]]
                for r in (first, second)]
    assert first["folds"][0]["chosen"] == second["folds"][0]["chosen"] and timeless[0] == timeless[1]
    assert first["folds"][0]["held_out"] != second["folds"][0]["held_out"]
    assert set(first["folds"][0]["held_out"]) == {"chosen", "easy", "firstfit"}


def test_the_report_falls_back_to_easy_when_a_fold_is_lost(scheduler: str, tmp_path: Path) -> None:
    """Three rolling folds on a real slice: the policy block is the latest fold's choice exactly when
    every fold's choice beat EASY on its held-out window (bsld and guard), else EASY's; a fold whose
    choice broke the guard on its held-out window is flagged."""
    parts = t.rolling(sdsc(600), 3)
    goal = t.parse_objective("guarded")
    report = run_tuning(parts, goal, t.settings(t.parse_space(SMALL_SPACE)), tmp_path / "r.jsonl", scheduler)
    folds = report["folds"]
    assert [f["fold"] for f in folds] == [1, 2, 3]
    for f in folds:
        chosen, easy = f["held_out"]["chosen"], f["held_out"]["easy"]
        assert f["guard_broken"] == (chosen["wait_max"] > 2 * easy["wait_max"]
                                     or chosen["wait_p99"] > easy["wait_p99"])
        assert f["beats_easy"] == (chosen["bsld"] < easy["bsld"] and not f["guard_broken"])
    won = all(f["beats_easy"] and f["gain_vs_easy"]["train"] >= t.MARGIN for f in folds)
    assert report["recommendation"]["recommend"] == won
    assert report["policy"] == (folds[-1]["chosen"]["policy"] if won else t.EASY)
    assert report["guard"] == report["held_out_guard"] == {"max_wait_factor": 2.0, "p99_wait_factor": 1.0}


def test_a_guard_under_one_chooses_on_the_train_tail_and_judges_against_easy(scheduler: str,
                                                                            tmp_path: Path) -> None:
    """guarded:max=1.5,p99=0.9 on a real slice: each fold's choice is EASY or has a train p99 wait
    at most 0.9x and a longest wait at most 1.5x EASY's; held out, it is judged with p99 <= 1x."""
    goal = t.parse_objective("guarded:max=1.5,p99=0.9")
    space = SMALL_SPACE.replace("wait_cap_s=null", "wait_cap_s=null,3600")
    report = run_tuning(t.rolling(sdsc(600), 3), goal, t.settings(t.parse_space(space)),
                        tmp_path / "r.jsonl", scheduler, fit_budget=4)
    assert report["guard"] == {"max_wait_factor": 1.5, "p99_wait_factor": 0.9}
    assert report["held_out_guard"] == {"max_wait_factor": 1.5, "p99_wait_factor": 1.0}
    for f in report["folds"]:
        rows = {r["key"]: r for r in f["train"]}
        easy, chosen = rows[t.Setting(t.EASY).key], rows[t.Setting(f["chosen"]["policy"],
                                                                     f["chosen"]["predicted"]).key]
        assert chosen is easy or (chosen["wait_p99"] <= 0.9 * easy["wait_p99"]
                                  and chosen["wait_max"] <= 1.5 * easy["wait_max"])
        held, held_easy = f["held_out"]["chosen"], f["held_out"]["easy"]
        assert f["guard_broken"] == (held["wait_max"] > 1.5 * held_easy["wait_max"]
                                     or held["wait_p99"] > held_easy["wait_p99"])


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
        "--fit-budget", "0",
        "--objective", "wait", "--results", str(tmp_path / "r.jsonl"), "--json", str(tmp_path / "t.json"),
        "--plots", str(tmp_path / "p")])
    assert r.exit_code == 0, r.output
    report = json.loads((tmp_path / "t.json").read_text())
    assert report["settings"] == 4 + 2 and report["objective"] == "lowest mean wait"
    for fold in report["folds"]:
        assert fold["train"][0]["wait"] == min(row["wait"] for row in fold["train"])
        assert {"wait_p99", "wait_max"} <= set(fold["held_out"]["chosen"])
    assert t.params_of(report["policy"])  # validates as POST /schedule's policy block
    assert '"policy"' in r.output and "held-out windows" in r.output and "wait_p99" in r.output
    assert sorted(p.name for p in (tmp_path / "p").iterdir()) == [
        "held_out_vs_easy.png", "held_out_wait_cdf.png", "train_scores.png"]


def test_a_bad_space_is_refused_naming_the_option(tmp_path: Path) -> None:
    """A parameter the policy does not have is refused before any cluster starts."""
    r = CliRunner().invoke(cli, ["tune", str(SDSC), "--space", "speed=1,2"])
    assert r.exit_code != 0 and "--space" in r.output


@pytest.mark.parametrize("bad", ["guarded:p99=0", "guarded:max=-0.5"])
def test_a_guard_factor_not_above_zero_is_refused_naming_the_option(bad: str) -> None:
    """A factor of 0 or below is refused before any cluster starts, naming --objective and the rule."""
    r = CliRunner(env={"COLUMNS": "200"}).invoke(cli, ["tune", str(SDSC), "--objective", bad])
    assert r.exit_code == 2 and "--objective" in r.output and "F > 0" in r.output


def test_tune_fits_the_weights_on_each_train_window_and_chooses_them(scheduler: str, tmp_path: Path) -> None:
    """With first come, first served as the only order of the space, the fitting step adds fitted
    settings to each fold's train results (within its budget, each a replay like the others: the same
    measures as replaying it alone) and the choice, made by the objective over all of them, is a
    fitted one: the fitted orders put short jobs first, which lowers the mean bsld."""
    parts = t.rolling(sdsc(900), 2)
    space = t.settings(t.parse_space("order=fcfs;reservation_depth=1;time_grain_s=1;predicted=false;"
                                     "backfill_order=priority"))
    report = run_tuning(parts, t.parse_objective("bsld"), space, tmp_path / "r.jsonl", scheduler,
                        fit_budget=24)
    for f, (train, _) in zip(report["folds"], parts, strict=True):
        fitted = [row for row in f["train"] if '"fitted"' in row["key"]]
        assert 16 < len(fitted) <= 24
        assert f["train"][0]["bsld"] == min(row["bsld"] for row in f["train"])
        assert f["chosen"]["policy"]["params"]["order"] == "fitted"
        one = t.Setting(f["chosen"]["policy"], f["chosen"]["predicted"])
        assert t.evaluate(train, one)["measures"]["bsld"] == f["train"][0]["bsld"]
    assert report["settings"] == len(space) + 2 + len(fitted)


def test_under_guard_windows_all_a_setting_that_broke_its_guard_before_is_not_chosen() -> None:
    """By hand: a is best on the latest window and within its guard there, but its longest wait broke
    the guard on an earlier train window: the `all` rule chooses b; a setting whose earlier result is
    missing is not eligible either (and is what `missing_before` asks to replay); EASY always is."""
    goal = t.parse_objective("guarded")
    train = {"easy": m(10, 100, 1000), "a": m(5, 90, 1500), "b": m(8, 80, 900), "new": m(4, 50, 500)}
    before = {"easy": m(10, 100, 1000), "a": m(6, 90, 2500), "b": m(9, 95, 1900)}
    assert t.choose(goal, train, "easy") == "new"
    assert t.choose(goal, train, "easy", [before]) == "b"
    assert t.missing_before(goal, train, "easy", [before], limit=4) == ["new"]  # a broke: not worth a replay
    assert t.missing_before(goal, train, "easy", [before | {"new": m(3, 50, 500)}], limit=4) == []
    assert t.choose(goal, train, "easy", [before | {"new": m(3, 50, 500)}]) == "new"
    worse = {k: m(10, 100, 1000) if k == "easy" else m(1, 500, 9000) for k in ("easy", "a", "b", "new")}
    assert t.choose(goal, train, "easy", [before | {"new": m(3, 50, 500)}, worse]) == "easy"
    assert t.held_on(goal, "b", [before], "easy") and not t.held_on(goal, "a", [before], "easy")
    # an objective without a guard asks the earlier windows only to start every job (a cap: its cap)
    unguarded = t.parse_objective("bsld")
    assert t.choose(unguarded, train, "easy", [before | {"new": m(3, 50, 500, unstarted=1)}]) == "a"
    capped = t.parse_objective("maxwait-cap:2000")
    assert t.choose(capped, train, "easy", [before | {"new": m(3, 5, 2100)}]) == "b"


def test_guard_windows_all_changes_the_choice_on_a_real_slice(scheduler: str, tmp_path: Path) -> None:
    """Three rolling folds on 600 SDSC-SP2 jobs: fold 3 chooses otherwise under `all` than under
    `latest`, whose fold-3 choice broke the guard on an earlier train window. With fitting, every
    fold's choice under `all` kept the guard on every earlier train window (checked by replaying it
    there afresh), and fitted settings of later folds were replayed on earlier windows to know it."""
    parts = t.rolling(sdsc(600), 3)
    goal = t.parse_objective("guarded")
    space = t.settings(t.parse_space(SMALL_SPACE.replace("wait_cap_s=null", "wait_cap_s=null,3600")))
    results = tmp_path / "r.jsonl"
    latest = run_tuning(parts, goal, space, results, scheduler, fit_budget=0, guard_windows="latest")
    every = run_tuning(parts, goal, space, results, scheduler, fit_budget=0)  # (the default)
    fitted = run_tuning(parts, goal, space, results, scheduler, fit_budget=6, guard_windows="all")
    assert (latest["guard_windows"], every["guard_windows"]) == ("latest", "all")
    easy = t.Setting(t.EASY)

    def held_before(fold: dict[str, Any]) -> bool:
        chosen = t.Setting(fold["chosen"]["policy"], fold["chosen"]["predicted"])
        return all(t.held_on(goal, chosen.key, [{chosen.key: t.evaluate(train, chosen)["measures"],
                                                  easy.key: t.evaluate(train, easy)["measures"]}], easy.key)
                   for train, _ in parts[: fold["fold"] - 1])

    assert every["folds"][0]["chosen"] == latest["folds"][0]["chosen"]  # nothing earlier to hold on
    assert every["folds"][2]["chosen"] != latest["folds"][2]["chosen"]
    assert not held_before(latest["folds"][2])
    assert all(held_before(f) for f in every["folds"] + fitted["folds"])
    lines = [json.loads(line) for line in results.read_text().splitlines()]
    fold3_fits = {r["key"] for r in lines if r["part"] == "train3" and '"fitted"' in r["key"]}
    assert any(r["part"] == "train1" and r["key"] in fold3_fits for r in lines)


def test_a_bad_guard_windows_is_refused_naming_the_option() -> None:
    r = CliRunner(env={"COLUMNS": "200"}).invoke(cli, ["tune", str(SDSC), "--guard-windows", "some"])
    assert r.exit_code == 2 and "--guard-windows" in r.output


def test_the_space_can_try_the_stepwise_correction_where_run_times_are_predicted() -> None:
    """correction=request,stepwise doubles the predicted settings only (unpredicted ones read no
    correction); the default correction keeps the key it had before corrections existed, so earlier
    results files resume; a stepwise setting replays with it (SDSC-SP2's jobs overrun predictions:
    another schedule); an unknown correction is refused."""
    space = "order=fcfs;reservation_depth=1;time_grain_s=1;backfill_order=priority;wait_cap_s=null"
    both = t.settings(t.parse_space(space + ";predicted=false,true;correction=request,stepwise"))
    assert sorted((s.predicted, s.correction) for s in both) == [(False, "request"), (True, "request"),
                                                                   (True, "stepwise")]
    plain = next(s for s in both if s.predicted and s.correction == "request")
    step = next(s for s in both if s.correction == "stepwise")
    assert plain.key == json.dumps({"policy": plain.policy, "predicted": True}, sort_keys=True)
    assert step.key != plain.key and step.label().endswith("predicted stepwise")
    w = sdsc(400)
    assert t.evaluate(w, step)["measures"] != t.evaluate(w, plain)["measures"]
    with pytest.raises(ValueError, match="correction"):
        t.settings(t.parse_space(space + ";predicted=true;correction=gradual"))


def test_an_unknown_correction_is_refused_naming_the_space() -> None:
    r = CliRunner(env={"COLUMNS": "200"}).invoke(cli, ["tune", str(SDSC), "--space", "correction=gradual"])
    assert r.exit_code == 2 and "--space" in r.output


def test_the_space_can_try_selective_reservation() -> None:
    """reserve_xfactor=null,2 adds the selective settings beside the plain ones, whose keys are those
    they had before the parameter existed; each validates as a POST /schedule policy block."""
    space = "order=sjf;reservation_depth=1;time_grain_s=1;backfill_order=priority;predicted=false"
    space += ";wait_cap_s=null"
    plain, = t.settings(t.parse_space(space))
    both = t.settings(t.parse_space(space + ";reserve_xfactor=null,2"))
    assert plain.key in {s.key for s in both} and len(both) == 2
    selective = next(s for s in both if s.key != plain.key)
    assert selective.policy["params"]["reserve_xfactor"] == 2 and "xf=2" in selective.label()
    assert t.params_of(selective.policy)[1].reserve_xfactor == 2


POOL = [t.Setting(t.EASY)] + [t.Setting({"name": "priority", "params": {"reservation_depth": n}})
                              for n in range(1, 6)]
EASY_KEY = POOL[0].key


def window_strategy() -> Any:
    """One train window's measures by hand: EASY's, and five settings each within or outside the guard
    (bsld 1-30; longest and p99 waits around EASY's 100 and 50)."""
    def one(bsld: float, wait_max: float, p99: float) -> dict[str, float]:
        return {**m(bsld, p99, wait_max), "wait_p99": p99}

    measures = st.builds(one, st.integers(1, 30).map(float), st.sampled_from([50.0, 150.0, 250.0]),
                         st.sampled_from([30.0, 50.0, 70.0]))
    return st.fixed_dictionaries({EASY_KEY: st.just(one(10.0, 100.0, 50.0)),
                                  **{s.key: measures for s in POOL[1:]}})


OBJECTIVES = ["guarded", "guarded:max=3,p99=1.5", "maxwait-cap:120", "bsld"]


@settings(max_examples=300, deadline=None)
@given(st.lists(window_strategy(), min_size=2, max_size=4), st.sampled_from(OBJECTIVES))
def test_settings_closed_on_an_earlier_window_change_no_choice(windows: list[dict[str, Any]],
                                                                objective: str) -> None:
    """The pruning of `_grid` by hand: window after window, only the settings `still_open` after the
    earlier windows keep their results. Every fold's choice under `all`, what `missing_before` asks,
    and the fitted order's base (the best open setting) are those read from every result."""
    goal = t.parse_objective(objective)
    kept: list[dict[str, Any]] = []
    for i, window in enumerate(windows):
        open_keys = t.still_open(goal, [s.key for s in POOL], kept, EASY_KEY)
        assert EASY_KEY in open_keys  # (EASY's longest wait, 100, is under the cap of 120)
        kept.append({k: window[k] for k in open_keys})
        assert t.choose(goal, kept[i], EASY_KEY, kept[:i]) == t.choose(goal, window, EASY_KEY, windows[:i])
        assert t.missing_before(goal, kept[i], EASY_KEY, kept[:i], 4) == []
        full = [s for s in POOL[1:] if t.held_on(goal, s.key, windows[:i], EASY_KEY)]
        if full:
            pruned = [s for s in POOL[1:] if s.key in kept[i]]
            assert t.fit_base(goal, pruned, kept[i], EASY_KEY) == t.fit_base(goal, full, window, EASY_KEY)


def test_pruning_keeps_every_choice_of_the_full_grid(scheduler: str, tmp_path: Path) -> None:
    """Under `all`, a setting whose guard broke on a train window is not replayed on the later ones:
    on 1,500 SDSC-SP2 jobs some are skipped, yet every fold's choice, the fitted settings tried, the
    held-out measures and the verdict are those of the full grid, and each train result kept is the
    full grid's. (On window 3 the best priority setting broke the guard on window 2: the fitted
    order is fitted into the best open one, with or without pruning.)"""
    parts = t.rolling(sdsc(1500), 3)
    goal = t.parse_objective("guarded")
    space = t.settings(t.parse_space("order=fcfs,sjf,f1;reservation_depth=1,2;time_grain_s=1;"
                                     "backfill_order=priority;predicted=false,true;wait_cap_s=null,3600"))
    full = run_tuning(parts, goal, space, tmp_path / "full.jsonl", scheduler, fit_budget=6, prune=False)
    pruned = run_tuning(parts, goal, space, tmp_path / "pruned.jsonl", scheduler, fit_budget=6)
    assert pruned["pruned"] and not full["pruned"]
    assert [f["skipped"] for f in full["folds"]] == [0, 0, 0]
    assert pruned["folds"][0]["skipped"] == 0 and pruned["folds"][2]["skipped"] > 0
    for a, b in zip(full["folds"], pruned["folds"], strict=True):
        assert a["chosen"] == b["chosen"] and a["held_out"] == b["held_out"]
        rows = {r["key"]: {k: v for k, v in r.items() if k != "seconds"} for r in a["train"]}
        kept = {r["key"]: {k: v for k, v in r.items() if k != "seconds"} for r in b["train"]}
        assert kept.items() <= rows.items() and len(rows) - len(kept) == b["skipped"]
    assert full["recommendation"] == pruned["recommendation"] and full["policy"] == pruned["policy"]


PYTHON_REPLAY = {"name": "memory_backfill", "params": {"time_grain_s": 1}}  # (no compiled twin)
LEAN_CASES = [t.EASY, t.FIRSTFIT, PYTHON_REPLAY,
              {"name": "priority", "params": {"order": "sjf", "reservation_depth": 4, "time_grain_s": 60,
                                              "wait_cap_s": 14_400, "backfill_order": "sjf"}},
              {"name": "priority", "params": {"order": "fitted", "fit_n": 0.5, "fit_rn": -0.2, "fit_s": 0.1}},
              {"name": "priority", "params": {"order": "f1", "reservation_depth": 2}}]


@pytest.mark.parametrize("predicted", [False, True])
@pytest.mark.parametrize("policy", LEAN_CASES, ids=lambda p: f"{p['name']}-{p['params'].get('order', '')}")
def test_a_sweep_replay_measures_what_the_records_measure(policy: dict[str, Any], predicted: bool) -> None:
    """`evaluate` reads a replay's starts and ends (`replay_times`), not its records: the measures are
    those of `measures` on `replay`'s records to the last bit, and the waits are the records' waits,
    on the compiled replay and on the Python one (memory_backfill), stepwise correction too."""
    from app.sim import compiled
    from app.sim.replay import replay, replay_times

    w = sdsc(1200)
    name, params = t.params_of(policy)
    assert compiled.applies(w, name, params) == (policy != PYTHON_REPLAY)
    for correction in ("request", "stepwise") if predicted else ("request",):
        records = replay(w, name, params, predict=predicted, reservations=False, correction=correction)
        times = replay_times(w, name, params, predict=predicted, correction=correction)
        assert t.times_measures(times, w) == t.measures(records, w)
        rec = t.evaluate(w, t.setting(policy, predicted, correction), detail=True)
        assert rec["waits"] == [r.start - r.job.submit for r in records.records]


def test_lean_measures_count_a_job_that_never_started() -> None:
    """A job asking more nodes than the machine has never starts: counted as unstarted, as in `measures`."""
    from app.sim.replay import replay, replay_times
    from app.sim.workload import SimJob

    jobs = [SimJob("1", 0.0, 10.0, 20.0, 1, 1, 1, 0), SimJob("2", 1.0, 10.0, 20.0, 3, 3, 1, 0),
            SimJob("3", 2.0, 30.0, 40.0, 2, 2, 1, 0)]
    w = Workload(Machine(2), jobs)
    lean = t.times_measures(replay_times(w, "easy"), w)
    assert lean == t.measures(replay(w, "easy", reservations=False), w)
    assert lean["unstarted"] == 1.0 and lean["jobs"] == 2.0
    alone = Workload(Machine(2), jobs[1:2])
    assert t.times_measures(replay_times(alone, "easy"), alone) == t.measures(replay(alone, "easy"), alone)

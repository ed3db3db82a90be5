"""A held-out-style side by side: a slice of the SDSC SP2 trace (80 jobs, one trace-hour in 3 s)
replayed into Slurm alone and into a bridge-run Slurm, one after the other, on the same 8 nodes
(tests/bridges/side_by_side.py). Asserted from Slurm's records, on both sides: every job ran
exactly once and completed, no node over-committed, the exclusive jobs alone, the dependency
respected, nothing on the maintenance node in its window; on the bridge side every job ran where
the service chose. The waits and bounded slowdown of both sides are printed (`pytest -s`) and
written beside the clusters, not asserted: one run is too noisy to judge a second's difference
(bench/bench_side_by_side.py repeats it)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.bridges.side_by_side import (
    Side,
    Slice,
    dependency_broken,
    figures,
    into_window,
    markdown,
    not_alone,
    not_once,
    not_where_chosen,
    over_committed,
    run_side,
)
from tests.bridges.slurm_cluster import NEEDS_SLURM

pytestmark = NEEDS_SLURM
SLICE = Slice()


@pytest.fixture(scope="module")
def sides(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Side]]:
    root = tmp_path_factory.mktemp("side-by-side")
    yield {"alone": run_side("Slurm alone (sched/backfill)", False, SLICE, root / "alone"),
           "bridge": run_side("bridge (hpcsched slurm run, easy)", True, SLICE, root / "bridge")}


@pytest.fixture(params=["alone", "bridge"])
def side(request: pytest.FixtureRequest, sides: dict[str, Side]) -> Side:
    return sides[request.param]


def test_the_slice_is_ordinary_submissions() -> None:
    """60-100 jobs, mostly `-n P` with no layout hint; some `-N k`; memory per node and per CPU;
    two exclusive, one array, one dependent."""
    from tests.bridges.side_by_side import jobs_of

    jobs = jobs_of(SLICE)
    plain = [j for j in jobs if "-N" not in j.args and j.kind == "plain"]
    assert 60 <= len(jobs) <= 100 and len(plain) > len(jobs) / 2
    assert any("-N" in j.args for j in jobs)
    assert any(a.startswith("--mem=") for j in jobs for a in j.args)
    assert any(a.startswith("--mem-per-cpu=") for j in jobs for a in j.args)
    assert [j.kind for j in jobs if j.kind != "plain"].count("exclusive") == 2
    assert sum(j.kind == "array" for j in jobs) == sum(j.kind == "dependent" for j in jobs) == 1


def test_drained(side: Side) -> None:
    assert side.drained, f"{side.label}: jobs left after the wait"


def test_every_job_ran_exactly_once(side: Side) -> None:
    """Every job (each array task, the warm-up job) completed, wrote its one run, was never requeued."""
    assert len(side.trace_records()) == SLICE.count + 3  # the array's four tasks
    assert not not_once(side)


def test_no_node_over_committed(side: Side) -> None:
    assert not over_committed(side)


def test_exclusive_jobs_ran_alone(side: Side) -> None:
    assert not not_alone(side)


def test_dependency_respected(side: Side) -> None:
    assert not dependency_broken(side)


def test_nothing_on_the_maintenance_node_in_its_window(side: Side) -> None:
    assert side.window[1] > side.window[0] and not into_window(side)


def test_bridge_side_ran_where_the_service_chose(sides: dict[str, Side]) -> None:
    """Every job of the bridge side ran on exactly the nodes the bridge pinned it to, and the
    service planned each of those starts."""
    b = sides["bridge"]
    assert not not_where_chosen(b)
    planned = {e["job"] for e in b.events if e["event"] == "plan_start"}
    assert {e["job"] for e in b.events if e["event"] == "start"} <= planned


def test_figures_of_both_sides(sides: dict[str, Side], tmp_path_factory: pytest.TempPathFactory) -> None:
    """Mean / median / p90 wait and mean bounded slowdown of both sides, printed and written to
    side_by_side.md beside the clusters (the quality targets are recorded, not asserted)."""
    rows = [figures(sides[k], SLICE) for k in ("alone", "bridge")]
    assert all(r["jobs"] == SLICE.count + 3 for r in rows)
    table = markdown(rows)
    out = tmp_path_factory.getbasetemp() / "side_by_side.md"
    out.write_text(table + "\n")
    alone, bridge = rows
    print(f"\n{table}\n(written to {out}); median wait <= Slurm's: "
          f"{bridge['median_wait_s'] <= alone['median_wait_s']}, mean wait <= Slurm's: "
          f"{bridge['mean_wait_s'] <= alone['mean_wait_s']}")

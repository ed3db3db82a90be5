"""Jobs left out of a decision (app.sim.shortlist) change nothing: a replay that hands `decide` only
the shortlist equals one that hands it the whole queue, job for job (start, end, nodes, backfill or
not, first reservation), on a real trace slice and on random workloads; and the rule is used only
where it is proven."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.cli import policy_params, policy_spec
from app.sim import replay as replay_module
from app.sim.replay import replay
from app.sim.shortlist import standing_key
from app.sim.swf import read_swf
from app.sim.workload import Machine, SimJob, Workload, default_machine, workload

SDSC = Path(__file__).parent.parent / "data" / "SDSC-SP2-1998-4.2-cln.first1500.swf"
F1 = 'priority:order=f1;reservation_depth=1;selector="first_fit"'
PROVEN = ["easy", "fcfs", F1, 'priority:order=sjf;reservation_depth=2;backfill_order="sjf"',
          'priority:order=fcfs;reservation_depth=3;selector="least_load";time_grain_s=60',
          'priority:order="fitted";fit_n=0.5;fit_rn=-0.2;fit_s=0.1;reservation_depth=1;selector="first_fit"']


def same_replays(w: Workload, label: str, predict: bool = False) -> None:
    name, pairs = policy_spec(label)
    params = policy_params(name, pairs)[1]
    whole = replay(w, name, params, predict=predict, shortlist=False)
    short = replay(w, name, params, predict=predict)
    assert short.records == whole.records
    assert short.unstarted == whole.unstarted


@pytest.fixture(scope="module")
def sdsc() -> Workload:
    trace = read_swf(SDSC, limit=700)
    return workload(trace, default_machine(trace))


@pytest.mark.parametrize("label", PROVEN)
def test_the_shortlist_keeps_every_schedule_of_a_real_trace(sdsc: Workload, label: str) -> None:
    same_replays(sdsc, label)


def test_the_shortlist_keeps_predicted_schedules(sdsc: Workload) -> None:
    same_replays(sdsc, F1, predict=True)


def test_the_shortlist_leaves_jobs_out(sdsc: Workload, monkeypatch: pytest.MonkeyPatch) -> None:
    """The check can fail: the decisions really are asked on fewer jobs than the queue holds."""
    seen: list[tuple[int, int]] = []
    real = replay_module.decide

    def counting(snapshot, jobs, *args):  # type: ignore[no-untyped-def]
        seen.append((len(jobs), len(r.pending)))
        return real(snapshot, jobs, *args)

    r = replay_module._Replay(sdsc, "easy", None, False)
    monkeypatch.setattr(replay_module, "decide", counting)
    replay_module._run(r, sdsc, None, False)
    assert sum(given for given, _ in seen) < 0.8 * sum(queue for _, queue in seen)


@st.composite
def workloads(draw: st.DrawFn) -> Workload:
    """Up to 60 jobs on 2-8 nodes of 1-4 cores, memory modelled or not, in submit order; some told less
    than they run (a log's job that ran past its request)."""
    nodes, cores = draw(st.integers(2, 8)), draw(st.integers(1, 4))
    mem = draw(st.sampled_from([0, 1000]))
    jobs, t = [], 0.0
    for i in range(draw(st.integers(1, 60))):
        t += draw(st.sampled_from([0, 0, 1, 5, 30, 200]))
        run = draw(st.integers(1, 400))
        n = draw(st.integers(1, nodes + 1))  # one node too many: a job that never fits
        cpu = draw(st.integers(1, cores))
        told = max(1, run + draw(st.integers(-150, 300)))  # below the run: a job that overruns it
        jobs.append(SimJob(str(i + 1), t, float(run), float(told), n * cpu, n,
                           cpu, draw(st.integers(0, mem)) if mem else 0, user=f"u{i % 3}"))
    return Workload(Machine(nodes, cores, mem), jobs)


@settings(max_examples=60, deadline=None)
@given(w=workloads(), label=st.sampled_from(PROVEN + ["easy:reservation_depth=2;time_grain_s=1"]))
def test_the_shortlist_keeps_every_schedule_of_random_workloads(w: Workload, label: str) -> None:
    same_replays(w, label)


@pytest.mark.parametrize(("label", "split", "expected"), [
    ("easy", False, True),
    ("fcfs", False, True),
    (F1, False, True),
    ('priority:order="sjf"', False, True),
    ("priority", False, False),  # the weighted order moves with time
    ('priority:order="sjf";wait_cap_s=3600', False, False),  # so does an aged order
    ('priority:order="fitted";fit_s=1', False, True),  # every term is fixed at arrival
    ("conservative", False, False),  # promised slots are held for every job
    ("firstfit", False, False),  # only starving jobs reserve
    ("memory_backfill", False, False),  # a blocked job may find no node to book
    ("easy", True, False),  # jobs may migrate between queues
], ids=str)
def test_the_shortlist_is_used_only_where_it_is_proven(sdsc: Workload, label: str, split: bool,
                                                        expected: bool) -> None:
    name, pairs = policy_spec(label)
    w = sdsc if not split else Workload(Machine(128, queues=(("a", 64), ("b", 64))), sdsc.jobs)
    assert (standing_key(w, name, policy_params(name, pairs)[1]) is not None) is expected

"""The compiled replay (app.sim.compiled) makes the Python replay's decisions: the same records (start,
end, nodes, backfilled or not, first reservation), the same jobs left unstarted and the same count of
decisions, on a real trace slice and on random workloads; and it is used only where that is proven."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.cli import policy_params, policy_spec
from app.sched.params import EasyParams
from app.sim import compiled
from app.sim.metrics import run_metrics
from app.sim.replay import replay
from app.sim.swf import read_swf
from app.sim.workload import Machine, SimJob, Workload, default_machine, workload
from tests.sim.test_shortlist import workloads

DATA = Path(__file__).parent.parent / "data"
F1 = 'priority:order=f1;reservation_depth=1;selector="first_fit"'
SJF_SJBF = 'priority:order=sjf;reservation_depth=2;backfill_order="sjf";selector="first_fit"'
COMPILED = ["easy", "fcfs", F1, SJF_SJBF,
            'priority:order=fcfs;reservation_depth=3;selector="first_fit";time_grain_s=1',
            "easy:reservation_depth=4;time_grain_s=300", "fcfs:reservation_depth=2;time_grain_s=1",
            'priority:order=sjf;reservation_depth=1;selector="first_fit";queue_depth=3',
            'priority:order=f1;selector="first_fit"',  # (an unlimited reservation depth)
            "conservative", "conservative:time_grain_s=1", "firstfit:starvation_s=300;time_grain_s=1",
            'priority:reserve_after_wait_s=600;max_priority=3;selector="first_fit";time_grain_s=1',
            'easy:selector="least_load"']
# the aging term: a job's rank jumps ahead once it has waited the cap (each pass reorders)
AGED = ['priority:order=sjf;reservation_depth=1;selector="first_fit";wait_cap_s=300;time_grain_s=1',
        'priority:order=f1;reservation_depth=2;backfill_order="sjf";selector="first_fit";wait_cap_s=60',
        'priority:order=sjf;reservation_depth=2;selector="first_fit";wait_cap_s=0;queue_depth=3',
        'priority:order=sjf;selector="first_fit";wait_cap_s=200;time_grain_s=1',
        'priority:order=fcfs;selector="first_fit";wait_cap_s=30;reservation_depth=1']
# where no memory is modelled (the evaluation selector reads free memory): `priority` at its defaults
# (the weighted order, every blocked job reserving once it starves, the evaluation selector)
WITHOUT_MEMORY = ["priority", 'priority:age_weight=0.5;resource_evaluation=2;time_grain_s=1',
                  'priority:reserve_after_wait_s=100;max_priority=1e9;backfill_order="sjf";reservation_depth=2',
                  'conservative:selector="evaluation"']


# told the requests, predictions corrected to the request when up, or corrected stepwise
PREDICTIONS = [False, True, "stepwise"]
PREDICTION_IDS = ["told the requests", "told predictions", "told predictions corrected stepwise"]


def told_as(predict: bool | str) -> dict[str, Any]:
    return {"predict": bool(predict), "correction": "stepwise" if predict == "stepwise" else "request"}


def same_replays(w: Workload, label: str, predict: bool | str = False) -> None:
    """`predict`: False, True, or "stepwise" (predicted, with the stepwise correction)."""
    name, pairs = policy_spec(label)
    params = policy_params(name, pairs)[1]
    assert compiled.applies(w, name, params)
    told = told_as(predict)
    python = replay(w, name, params, compiled=False, **told)
    fast = replay(w, name, params, **told)
    assert fast.records == python.records
    assert fast.unstarted == python.unstarted
    assert (fast.decisions, fast.notes) == (python.decisions, python.notes)


@pytest.fixture(scope="module")
def sdsc4() -> Workload:
    """SDSC-SP2's 128 processors as 32 nodes of 4 cores: jobs share nodes, so a node has several
    steps ahead of it."""
    trace = read_swf(DATA / "SDSC-SP2-1998-4.2-cln.first1500.swf", limit=700)
    return workload(trace, default_machine(trace, cores_per_node=4))


@pytest.mark.parametrize("predict", PREDICTIONS, ids=PREDICTION_IDS)
@pytest.mark.parametrize("label", [*COMPILED[:4], "conservative", "firstfit:starvation_s=3600", "priority"])
def test_the_compiled_replay_keeps_the_schedules_of_a_real_trace(sdsc4: Workload, label: str,
                                                                 predict: bool | str) -> None:
    same_replays(sdsc4, label, predict)


@settings(max_examples=200, deadline=None)
@given(w=workloads(), label=st.sampled_from(COMPILED), predict=st.sampled_from(PREDICTIONS))
def test_the_compiled_replay_keeps_the_schedules_of_random_workloads(w: Workload, label: str,
                                                                    predict: bool | str) -> None:
    same_replays(w, label, predict)


@settings(max_examples=150, deadline=None)
@given(w=workloads(), label=st.sampled_from(AGED), predict=st.sampled_from(PREDICTIONS))
def test_the_compiled_replay_keeps_the_schedules_of_aged_orders(w: Workload, label: str,
                                                                predict: bool | str) -> None:
    same_replays(w, label, predict)


@pytest.mark.parametrize("label", AGED[:2])
def test_the_compiled_replay_keeps_the_aged_schedules_of_a_real_trace(sdsc4: Workload, label: str) -> None:
    same_replays(sdsc4, label.replace("wait_cap_s=300", "wait_cap_s=7200"))


# selective reservation: a blocked job reserves only once (wait + told) / told reaches the threshold
SELECTIVE = ['priority:order=fcfs;reservation_depth=1;selector="first_fit";reserve_xfactor=2;time_grain_s=1',
             'priority:order=sjf;reservation_depth=2;selector="first_fit";reserve_xfactor=1.5',
             'priority:order=f1;selector="first_fit";reserve_xfactor=3;wait_cap_s=300;time_grain_s=1',
             'priority:order=sjf;reservation_depth=1;backfill_order="sjf";selector="first_fit";reserve_xfactor=1',
             'priority:reserve_after_wait_s=600;max_priority=3;selector="first_fit";reserve_xfactor=2']


@settings(max_examples=200, deadline=None)
@given(w=workloads(), label=st.sampled_from(SELECTIVE), predict=st.sampled_from(PREDICTIONS))
def test_the_compiled_replay_keeps_the_schedules_of_selective_reservations(w: Workload, label: str,
                                                                          predict: bool | str) -> None:
    same_replays(w, label, predict)
    without_reservations(w, label, predict)


@pytest.mark.parametrize("predict", PREDICTIONS, ids=PREDICTION_IDS)
@pytest.mark.parametrize("label", SELECTIVE[:4])
def test_the_compiled_replay_keeps_selective_schedules_of_a_real_trace(sdsc4: Workload, label: str,
                                                                       predict: bool | str) -> None:
    same_replays(sdsc4, label.replace("wait_cap_s=300", "wait_cap_s=7200"), predict)


FITTED = 'priority:order="fitted";selector="first_fit";fit_n=0.7;fit_rn=0.3;fit_s=0.5;reservation_depth=1'


@st.composite
def fitted_labels(draw: st.DrawFn) -> str:
    """A fitted order with weights of either sign (the submit term large enough to reorder jobs
    submitted minutes apart), at any depth, backfill order, grain, with or without a wait cap."""
    weight = st.sampled_from([0.0, 1.0, -1.0, 0.37, 2.5, -0.8])
    label = (f'priority:order="fitted";selector="first_fit";fit_r={draw(weight)};fit_n={draw(weight)};'
             f'fit_rn={draw(weight)};fit_s={draw(st.sampled_from([0.0, 0.5, 30.0, -4.0, 300.0]))};'
             f'reservation_depth={draw(st.sampled_from([0, 1, 2, 1_000_000]))};'
             f'backfill_order="{draw(st.sampled_from(["priority", "sjf"]))}";'
             f'time_grain_s={draw(st.sampled_from([1, 60]))}')
    cap = draw(st.sampled_from([None, 0, 200]))
    return label if cap is None else f"{label};wait_cap_s={cap}"


@settings(max_examples=150, deadline=None)
@given(w=workloads(), label=fitted_labels(), predict=st.sampled_from(PREDICTIONS))
def test_the_compiled_replay_keeps_the_schedules_of_fitted_orders(w: Workload, label: str,
                                                                  predict: bool | str) -> None:
    same_replays(w, label, predict)


@pytest.mark.parametrize("predict", PREDICTIONS, ids=PREDICTION_IDS)
def test_the_compiled_replay_keeps_a_fitted_schedule_of_a_real_trace(sdsc4: Workload,
                                                                     predict: bool | str) -> None:
    same_replays(sdsc4, FITTED, predict)
    same_replays(sdsc4, FITTED.replace("fit_s=0.5", "fit_s=0.01;wait_cap_s=7200"), predict)


@settings(max_examples=100, deadline=None)
@given(w=workloads(), label=st.sampled_from(WITHOUT_MEMORY), predict=st.sampled_from(PREDICTIONS))
def test_the_compiled_replay_keeps_the_weighted_order_and_evaluation_schedules(w: Workload, label: str,
                                                                              predict: bool | str) -> None:
    """The weighted order of jobs without priorities is first come, first served (its starving rule
    moves with time), and with no memory modelled every node has the same evaluation E."""
    machine = replace(w.machine, mem_mib_per_node=0)
    same_replays(Workload(machine, [replace(j, mem_mib=0) for j in w.jobs]), label, predict)


@pytest.mark.parametrize(("label", "split", "expected"), [
    ("easy", False, True),
    (F1, False, True),
    ("fcfs", False, True),
    ("easy", True, False),  # jobs may migrate between queues
    ('priority:order="sjf"', False, False),  # the evaluation selector reads free memory
    ("priority:order=f1;reservation_depth=1", False, False),
    ("easy:selector=\"fragment\"", False, False),
    ('priority:order=f1;selector="first_fit"', False, True),  # every blocked job reserves
    ("priority", False, False),
    ('priority:selector="first_fit"', False, True),  # the weighted order: first come, first served
    ('priority:selector="first_fit";resource_evaluation=null', False, False),  # E read off the nodes
    ('priority:selector="first_fit";age_weight=-1', False, False),  # older jobs fall behind
    ("conservative", False, True),  # promised slots, booked first
    ('conservative:selector="least_load"', False, True),  # every node's load is 0 in a replay
    ("firstfit", False, True),  # only starving jobs reserve, from now on
    ("memory_backfill", False, False),
    ('priority:order=sjf;selector="first_fit";wait_cap_s=3600', False, True),  # each pass reorders
    ('priority:order="fitted";selector="first_fit";fit_n=2', False, True),  # fixed at arrival
    ('priority:order="fitted";fit_n=2', False, False),  # the evaluation selector reads free memory
], ids=str)
def test_the_compiled_replay_is_used_only_where_it_is_proven(label: str, split: bool, expected: bool) -> None:
    name, pairs = policy_spec(label)
    machine = Machine(128, queues=(("a", 64), ("b", 64))) if split else Machine(128, mem_mib_per_node=4096)
    w = Workload(machine, [])
    assert compiled.applies(w, name, policy_params(name, pairs)[1]) is expected


def test_nodes_of_more_cores_than_the_loop_counts_take_the_python_replay() -> None:
    """The loop keeps a count per number of free cores: a node of 2**20 cores (the API's limit) would
    make every start a million steps; such a machine replays in Python, and replays right."""
    cores = compiled.MAX_CORES + 1
    w = Workload(Machine(2, cores), [SimJob("1", 0.0, 10.0, 10.0, 2 * cores, 2, cores, 0),
                                     SimJob("2", 1.0, 5.0, 5.0, cores, 1, cores, 0)])
    assert not compiled.applies(w, "easy", EasyParams())
    starts = {r.job.id: r.start for r in replay(w, "easy", EasyParams(time_grain_s=1)).records}
    assert starts == {"1": 0.0, "2": 10.0}


@pytest.mark.parametrize("threshold", ["max_priority=3", "reserve_after_wait_s=180"])
def test_a_job_starving_at_the_instant_asked_reserves(threshold: str) -> None:
    """At 180 s job 2 has waited exactly 180 s: P = 1·3 min·1 reaches P_max = 3 (or the wait reaches
    the threshold), so it reserves both nodes from 300 s, and job 3, which would end after that, may
    not take the free node until job 2 has run."""
    label = 'priority:selector="first_fit";time_grain_s=1;max_priority=1e9;reserve_after_wait_s=1e9;'
    label += threshold
    w = Workload(Machine(2), [SimJob("1", 0.0, 300.0, 300.0, 1, 1, 1, 0),
                              SimJob("2", 0.0, 10.0, 10.0, 2, 2, 1, 0),
                              SimJob("3", 180.0, 1000.0, 1000.0, 1, 1, 1, 0)])
    same_replays(w, label)
    name, pairs = policy_spec(label)
    starts = {r.job.id: r.start for r in replay(w, name, policy_params(name, pairs)[1]).records}
    assert starts == {"1": 0.0, "2": 300.0, "3": 310.0}


def without_reservations(w: Workload, label: str, predict: bool | str) -> None:
    """The replay told that nobody reads first reservations (a tuning sweep) keeps the schedule:
    compiled, where its deep passes may then stop after the last job that may start, and in Python,
    which only leaves them out; each against the Python replay that records them."""
    name, pairs = policy_spec(label)
    params = policy_params(name, pairs)[1]
    told = told_as(predict)
    recorded = replay(w, name, params, compiled=False, **told)
    expected = [replace(r, reserved_start=None) for r in recorded.records]
    for on in (True, False):
        got = replay(w, name, params, compiled=on, reservations=False, **told)
        assert got.records == expected
        assert (got.unstarted, got.decisions, got.notes) == (recorded.unstarted, recorded.decisions,
                                                             recorded.notes)
        assert not got.reservations and "reserved" not in run_metrics(got, w.machine)


@pytest.mark.parametrize("label", ["firstfit:starvation_s=3600", "priority", "conservative", "easy",
                                   'priority:order=f1;selector="first_fit"'])
def test_a_real_trace_replayed_without_reservations_keeps_its_schedule(sdsc4: Workload, label: str) -> None:
    without_reservations(sdsc4, label, False)


@settings(max_examples=150, deadline=None)
@given(w=workloads(), label=st.sampled_from(COMPILED + WITHOUT_MEMORY),
       predict=st.sampled_from(PREDICTIONS))
def test_random_workloads_replayed_without_reservations_keep_their_schedules(w: Workload, label: str,
                                                                             predict: bool | str) -> None:
    if label in WITHOUT_MEMORY:  # (the evaluation selector ranks nodes alike only without memory)
        w = Workload(replace(w.machine, mem_mib_per_node=0), [replace(j, mem_mib=0) for j in w.jobs])
    without_reservations(w, label, predict)


@pytest.mark.parametrize("compiled_on", [True, False], ids=["compiled", "python"])
def test_progress_is_told_as_the_jobs_start(sdsc4: Workload, compiled_on: bool) -> None:
    """A long replay tells its progress as it goes (the command line's bar moves), not only at its
    end: the counts told add up to the jobs started, in many steps, each at most what had started."""
    told: list[int] = []
    result = replay(sdsc4, "conservative", policy_params("conservative", None)[1], progress=told.append,
                    compiled=compiled_on)
    assert sum(told) == len(result.records)
    assert len(told) >= 50 and all(n > 0 for n in told)

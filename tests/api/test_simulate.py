"""POST /simulate: the same replay over HTTP, its limits and its errors."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from app.main import create_app
from app.settings import Settings
from schemas.simulate import EXAMPLE
from tests.conftest import Client
from tests.sim.test_replay import EXPECTED, HAND

CLIENT = Client(create_app(Settings()))


def test_example_replays(client: Client) -> None:
    r = client.post("/simulate", json=EXAMPLE)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["jobs"] == 4 and body["machine"]["nodes"] == 4
    # the hand trace's first four jobs under easy: J1 0, J2 10, J3 23, J4 3 (see tests/sim/test_replay.py)
    assert body["metrics"]["wait_mean"] == (0 + 9 + 21 + 0) / 4
    assert body["metrics"]["backfills"] == 1


def test_job_list_gives_the_same_starts_as_swf(client: Client) -> None:
    jobs = [{"id": str(i), "submit": s, "run": r, "procs": p, "estimate": e}
            for i, (s, r, p, e) in enumerate([(0, 10, 3, 10), (1, 5, 2, 5), (2, 5, 4, 5), (3, 20, 1, 20),
                                              (4, 4, 1, 4)], start=1)]
    policy = {"name": "conservative", "params": {"time_grain_s": 1}}
    a = client.post("/simulate", json={"jobs": jobs, "policy": policy, "machine": {"nodes": 4}}).json()
    b = client.post("/simulate", json={"swf": HAND.decode(), "policy": policy}).json()
    assert a["metrics"] == b["metrics"]
    starts = EXPECTED["conservative"]
    assert a["metrics"]["wait_mean"] == sum(starts[j["id"]] - j["submit"] for j in jobs) / 5


def test_long_trace_is_refused_naming_the_limit() -> None:
    small = Client(create_app(Settings(sim_max_jobs=3)))
    r = small.post("/simulate", json={"swf": HAND.decode()})
    assert r.status_code == 422
    d = r.json()["detail"][0]
    assert d["loc"] == ["body", "swf"] and "at most 3" in d["msg"] and "HPCSCHED_SIM_MAX_JOBS" in d["msg"]


def test_bad_traces_are_422(client: Client) -> None:
    r = client.post("/simulate", json={"swf": "1 2 3\n"})
    assert r.status_code == 422 and "line 1" in r.json()["detail"][0]["msg"]
    r = client.post("/simulate", json={})
    assert r.status_code == 422 and "exactly one" in r.json()["detail"][0]["msg"]
    jobs = [{"id": "a", "submit": 0, "run": 1, "procs": 1}] * 2
    r = client.post("/simulate", json={"jobs": jobs})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "jobs", 1, "id"]
    r = client.post("/simulate", json={"jobs": [{"id": "a", "submit": 0, "run": 1, "procs": 0}]})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "jobs", 0, "procs"]


def test_machine_split_among_queues_with_balancing(client: Client) -> None:
    from tests.sim.test_queues import HAND as QUEUED

    static = {"name": "easy", "params": {"time_grain_s": 1, "migration": {"mode": "static"}}}
    body = {"swf": QUEUED.decode(), "policy": static, "machine": {"queue_nodes": {"q1": 2, "q2": 2}}}
    r = client.post("/simulate", json=body)
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["machine"]["queue_nodes"] == {"q1": 2, "q2": 2} and out["machine"]["split_queues"]
    assert out["metrics"]["migrated"] == 1 and set(out["per_queue"]) == {"q1", "q2"}
    # J2 ran at once in q2 (wait 0) instead of waiting for J1 in q1: waits 0, 0, 9
    assert out["metrics"]["wait_mean"] == 3


def test_predicted_runtimes_over_http(client: Client) -> None:
    from tests.sim.test_predicted import hand

    easy = {"name": "easy", "params": {"time_grain_s": 1}}
    told = [client.post("/simulate", json={"swf": hand(10).decode(), "policy": easy, "predict_runtimes": p})
            .json() for p in (False, True)]
    # J4 waits for J3 (starts 130) when told its request, backfills at 22 when told 10 s
    assert told[0]["metrics"]["wait_mean"] == (0 + 0 + 99 + 108) / 4
    assert told[1]["metrics"]["wait_mean"] == (0 + 0 + 99 + 0) / 4
    assert any("last two" in n for n in told[1]["notes"])


def test_the_stepwise_correction_over_http(client: Client) -> None:
    """`correction` reaches the replay: the hand trace of tests/sim/test_cli's stepwise test, J4
    backfills when J2's overrun is corrected to its request, waits when stepwise; an unknown
    correction is a 422 naming the field."""
    from tests.sim.test_predicted import swf

    trace = swf((0, 10, 1, 1000, 1), (20, 500, 1, 1000, 1), (25, 100, 2, 100, 2), (40, 200, 1, 200, 3))
    easy = {"name": "easy", "params": {"time_grain_s": 1}}
    body = {"swf": trace.decode(), "machine": {"nodes": 2}, "policy": easy, "predict_runtimes": True}
    waits = {c: client.post("/simulate", json={**body, "correction": c}).json()["metrics"]["wait_mean"]
             for c in ("request", "stepwise")}
    assert waits == {"request": (0 + 0 + 495 + 0) / 4, "stepwise": (0 + 0 + 495 + 580) / 4}
    r = client.post("/simulate", json={**body, "correction": "gradual"})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"][-1] == "correction", r.text


def test_bad_splits_are_422(client: Client) -> None:
    from tests.sim.test_queues import HAND as QUEUED

    cases = [({"queue_nodes": {"q1": 4}}, "queue_nodes", "q2"),
             ({"queue_nodes": {"q1": 2, "q2": 2}, "nodes": 5}, "queue_nodes", "add up to 4"),
             ({"split_queues": True}, "split_queues", "nothing to split")]
    for machine, field, words in cases:
        swf = QUEUED.decode() if field == "queue_nodes" else HAND.decode()
        r = client.post("/simulate", json={"swf": swf, "machine": machine})
        assert r.status_code == 422, r.text
        d = r.json()["detail"][0]
        assert d["loc"] == ["body", "machine", field] and words in d["msg"], d
    for bad in ({"q1": 0, "q2": 4}, {}):  # a zero partition; an empty split (never silently ignored)
        r = client.post("/simulate", json={"swf": QUEUED.decode(), "machine": {"queue_nodes": bad}})
        assert r.status_code == 422 and r.json()["detail"][0]["loc"][:3] == ["body", "machine", "queue_nodes"]


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 100), st.integers(0, 50), st.integers(1, 6), st.integers(0, 60)),
                min_size=1, max_size=12),
       st.sampled_from(["fcfs", "firstfit", "easy", "conservative", "memory_backfill", "priority"]))
def test_random_small_traces_replay_over_http(jobs: list[tuple[int, int, int, int]], policy: str) -> None:
    """Every job that fits the 4-node machine runs once, after it arrives; the others are noted."""
    body = {"jobs": [{"id": str(i), "submit": s, "run": r, "procs": p, **({"estimate": e} if e else {})}
                     for i, (s, r, p, e) in enumerate(jobs)],
            "policy": {"name": policy, "params": {"time_grain_s": 1}}, "machine": {"nodes": 4}}
    r = CLIENT.post("/simulate", json=body)
    assert r.status_code == 200, r.text
    out = r.json()
    fitting = sum(p <= 4 and r > 0 for _, r, p, _ in jobs)  # run time 0 s: left out, as in the logs' reading
    assert out["jobs"] == fitting and out["metrics"]["jobs"] == fitting
    if any(p > 4 and r > 0 for _, r, p, _ in jobs):
        assert any("more processors than the machine" in n for n in out["notes"])
    if any(r == 0 for _, r, _, _ in jobs):
        assert any("run time 0 s: left out" in n for n in out["notes"])
    if fitting:
        assert out["metrics"]["wait_mean"] >= 0 and 0 <= out["metrics"]["utilisation"] <= 1


def test_the_reading_options_reach_the_replay_over_http() -> None:
    """reading.kill_at_request ends the overrunning job at its request; the default runs it out."""
    swf = "; MaxProcs: 1\n1 0 -1 100 1 -1 -1 1 30 -1 1 1 1 -1 0 -1 -1 -1\n"
    spans = []
    for reading in ({}, {"kill_at_request": True}):
        r = CLIENT.post("/simulate", json={"swf": swf, "reading": reading})
        assert r.status_code == 200, r.text
        spans.append(r.json()["metrics"]["makespan"])
        assert any("ran past their requested time" in n for n in r.json()["notes"])
    assert spans == [100, 30]


def test_a_bad_reading_option_is_named() -> None:
    """An unknown reading value answers 422 naming body.reading.size."""
    r = CLIENT.post("/simulate", json={"swf": "; MaxProcs: 1\n", "reading": {"size": "alloc"}})
    assert r.status_code == 422
    assert ["body", "reading", "size"] in [d["loc"] for d in r.json()["detail"]]


def test_killing_and_raising_at_the_request_together_are_refused() -> None:
    """reading.kill_at_request with reading.raise_to_run: a 422 on body.reading saying why."""
    r = CLIENT.post("/simulate", json={"swf": "; MaxProcs: 1\n",
                                       "reading": {"kill_at_request": True, "raise_to_run": True}})
    assert r.status_code == 422
    (detail,) = r.json()["detail"]
    assert detail["loc"][:2] == ["body", "reading"] and "exclude each other" in detail["msg"]


def test_the_default_reading_tells_the_request_of_a_job_that_overran() -> None:
    """2 processors: A asks 30 s and runs 100; B (2 processors) waits for it; C (1, 50 s) would end
    past A's told end. Told the request, C waits (it would delay B); told the run time, C backfills."""
    swf = ("; MaxProcs: 2\n1 0 -1 100 1 -1 -1 1 30 -1 1 1 1 -1 0 -1 -1 -1\n"
           "2 1 -1 10 2 -1 -1 2 10 -1 1 1 1 -1 0 -1 -1 -1\n3 2 -1 50 1 -1 -1 1 50 -1 1 1 1 -1 0 -1 -1 -1\n")
    waits = []
    for reading in ({}, {"raise_to_run": True}):
        r = CLIENT.post("/simulate", json={"swf": swf, "reading": reading,
                                           "policy": {"name": "easy", "params": {"time_grain_s": 1}}})
        assert r.status_code == 200, r.text
        waits.append(r.json()["metrics"]["wait_mean"])
    assert waits[0] > waits[1]

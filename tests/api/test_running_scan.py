"""POST /schedule's running jobs scanned from the body into columns (app.running_scan): the same
snapshot as pydantic's parse and the ordinary checks, and every input it cannot vouch for handed to
them, so a bad one is still named by field and reason."""

from __future__ import annotations

import copy
import json
import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from app.api.routes.schedule import parse_scanned
from app.convert import check_snapshot, snapshot_from_wire
from app.errors import InputError
from app.running_scan import _POW10, Fallback, _number, split
from app.sched.cluster import NodeColumns, _held
from app.sched.running import RunningColumns
from bench.workload import cluster, pending, production, request_body
from schemas.schedule import EXAMPLE, ScheduleRequest
from tests.conftest import Client


def ordinary(raw: bytes) -> tuple[Any, Any]:
    req = ScheduleRequest.model_validate_json(raw, strict=True)
    return snapshot_from_wire(req, check_snapshot(req))


def scanned(raw: bytes) -> tuple[Any, Any]:
    req, cols, _ = parse_scanned(raw)
    assert cols is not None and req.running == []
    return snapshot_from_wire(req, check_snapshot(req, cols))


@pytest.mark.parametrize("which", ["bench", "production"])
def test_scanned_snapshot_is_the_parsed_one(which: str) -> None:
    """Nodes, running jobs (as records and as the pass's holdings), windows and pending jobs alike."""
    snap, jobs = (cluster(150), pending(100)) if which == "bench" else production(150, 100)
    raw = json.dumps(request_body(snap, jobs, "easy")).encode()
    want, want_jobs = ordinary(raw)
    got, got_jobs = scanned(raw)
    assert isinstance(got.running, RunningColumns)
    assert got.nodes == want.nodes and got.windows == want.windows and got_jobs == want_jobs
    pos = NodeColumns.of(want.nodes, want.running).pos
    for a, b in zip(_held(want.running, pos), _held(got.running, pos), strict=True):
        assert a.dtype == b.dtype and a.strides == b.strides and np.array_equal(a, b)
    assert tuple(got.running) == want.running == tuple(snap.running)


def test_holdings_leave_out_nodes_the_snapshot_lacks() -> None:
    raw = json.dumps(request_body(cluster(40), pending(5), "easy")).encode()
    want, _ = ordinary(raw)
    got, _ = scanned(raw)
    pos = {n.id: i for i, n in enumerate(want.nodes[::2])}
    for a, b in zip(_held(want.running, pos), _held(got.running, pos), strict=True):
        assert np.array_equal(a, b)


def text(body: dict[str, Any]) -> bytes:
    return json.dumps(body).encode()


def example(**job: Any) -> dict[str, Any]:
    b = copy.deepcopy(EXAMPLE)
    b["running"][0].update(job)
    return b


# Valid bodies written in ways the scan reads (spacing, key order, defaults, exponents, long
# decimals read from their text): same snapshot as pydantic's.
READ = {
    "compact": json.dumps(EXAMPLE, separators=(",", ":")).encode(),
    "spaced": json.dumps(EXAMPLE, indent=3).encode().replace(b"\n", b"\r\n\t"),
    "keys reordered": text(example() | {"running": [dict(reversed(EXAMPLE["running"][0].items()))]}),
    "defaults": text(example(allocation=[{"node": "n1"}], queue=None) | {}).replace(b'"queue": null, ', b""),
    "exponent times": text(example()).replace(b"1699996400", b"1.6999964E9").replace(b"7200", b"72e2"),
    "long decimals": text(example(start_time=1699996400.1234567891234, walltime_s=0.1 + 0.2)),
    "tiny": text(example(walltime_s=5e-324)),
    "migrated": text(example(migrated=True)),
    "negative zero start": text(example(start_time=-0.0)),
}


@pytest.mark.parametrize("raw", list(READ.values()), ids=list(READ))
def test_valid_bodies_read_as_parsed(raw: bytes) -> None:
    want, want_jobs = ordinary(raw)
    got, got_jobs = scanned(raw)
    assert tuple(got.running) == want.running and got.nodes == want.nodes and got_jobs == want_jobs
    for a, b in zip(got.running, want.running, strict=True):  # -0.0 and 0.0 compare equal
        assert math.copysign(1, a.start_time) == math.copysign(1, b.start_time)


# Valid bodies the scan does not vouch for: the ordinary path decides them.
HANDED_ON = {
    "escaped id": text(example(id="r\u00e9\n")),
    "escaped key": text(example()).replace(b'"walltime_s"', b'"walltime\\u005fs"'),
    "non-ascii node": json.dumps(example(allocation=[{"node": "n\u00e9"}]) | {"nodes": [
        {"id": "n\u00e9", "capacity": {"cpu": 1}}], "pending": []}, ensure_ascii=False).encode(),
}


@pytest.mark.parametrize("raw", list(HANDED_ON.values()), ids=list(HANDED_ON))
def test_what_the_scan_cannot_read_is_handed_on(raw: bytes, client: Client) -> None:
    with pytest.raises(Fallback):
        scanned(raw)
    ordinary(raw)  # valid all the same
    r = client.post("/schedule", content=raw, headers={"content-type": "application/json"})
    assert r.status_code == 200, r.text


def with_text(old: bytes, new: bytes) -> bytes:
    raw = text(EXAMPLE)
    assert raw.count(old) == 1
    return raw.replace(old, new)


# Bad running jobs: each answers 422 naming the field and why, as the ordinary parse and checks do.
ALLOC = ("body", "running", 0, "allocation", 0)
BAD = [
    ("unknown node", text(example(allocation=[{"node": "nx", "cpu": 1}])), (*ALLOC, "node"),
     "unknown node 'nx'"),
    ("node listed twice", text(example(allocation=[{"node": "n1"}, {"node": "n1"}])),
     ("body", "running", 0, "allocation", 1, "node"), "listed twice"),
    ("negative cpu", text(example(allocation=[{"node": "n1", "cpu": -1}])), (*ALLOC, "cpu"),
     "greater than or equal to 0"),
    ("negative memory", text(example(allocation=[{"node": "n1", "mem_mib": -5}])), (*ALLOC, "mem_mib"),
     "greater than or equal to 0"),
    ("gpu over its bound", text(example(allocation=[{"node": "n1", "gpu": 2**16 + 1}])), (*ALLOC, "gpu"),
     "less than or equal to"),
    ("huge integer", text(example(allocation=[{"node": "n1", "mem_mib": 10**30}])), (*ALLOC, "mem_mib"),
     "less than or equal to"),
    ("cpu as a float", text(example(allocation=[{"node": "n1", "cpu": 2.0}])), (*ALLOC, "cpu"),
     "valid integer"),
    ("cpu as a string", text(example(allocation=[{"node": "n1", "cpu": "2"}])), (*ALLOC, "cpu"),
     "valid integer"),
    ("cpu null", text(example(allocation=[{"node": "n1", "cpu": None}])), (*ALLOC, "cpu"), "valid integer"),
    ("infinite start", with_text(b"1699996400", b"1e400"), ("body", "running", 0, "start_time"), "finite"),
    ("NaN walltime", with_text(b"7200", b"NaN"), ("body", "running", 0, "walltime_s"), ""),
    ("start beyond its bound", text(example(start_time=2e12)), ("body", "running", 0, "start_time"),
     "less than or equal to"),
    ("zero walltime", text(example(walltime_s=0)), ("body", "running", 0, "walltime_s"), "greater than 0"),
    ("negative walltime", text(example(walltime_s=-3.5)), ("body", "running", 0, "walltime_s"),
     "greater than 0"),
    ("walltime as a string", text(example(walltime_s="60")), ("body", "running", 0, "walltime_s"),
     "valid number"),
    ("id as a number", text(example(id=7)), ("body", "running", 0, "id"), "valid string"),
    ("empty id", text(example(id="")), ("body", "running", 0, "id"), "at least 1 character"),
    ("queue null", text(example(queue=None)), ("body", "running", 0, "queue"), "valid string"),
    ("migrated as a number", text(example(migrated=1)), ("body", "running", 0, "migrated"), "valid boolean"),
    ("unknown field", text(example(colour="red")), ("body", "running", 0, "colour"), "Extra inputs"),
    ("missing walltime", text(copy.deepcopy(EXAMPLE) | {"running": [
        {k: v for k, v in EXAMPLE["running"][0].items() if k != "walltime_s"}]}),
     ("body", "running", 0, "walltime_s"), "required"),
    ("empty allocation", text(example(allocation=[])), ("body", "running", 0, "allocation"), "at least 1"),
    ("allocation not a list", text(example(allocation={"node": "n1"})), ("body", "running", 0, "allocation"),
     "valid array"),
    ("duplicate running id", text(copy.deepcopy(EXAMPLE) | {"running": [EXAMPLE["running"][0]] * 2}),
     ("body", "running", 1, "id"), "duplicate running job id"),
    ("pending id also running", text(example(id="qc")), ("body", "pending", 1, "id"),
     "also listed as running"),
    ("above capacity", text(example(allocation=[{"node": "n1", "cpu": 33}])),
     ("body", "nodes", 0, "capacity", "cpu"), "running jobs hold 33"),
    ("running beside a cluster_id", text({k: v for k, v in EXAMPLE.items() if k != "nodes"}
                                         | {"cluster_id": "c1"}), ("body",), "send none"),
    ("bad json after the running jobs", text(EXAMPLE)[:-1] + b",}", ("body",), "JSON"),
]


@pytest.mark.parametrize(("raw", "loc", "msg"), [c[1:] for c in BAD], ids=[c[0] for c in BAD])
def test_bad_running_jobs_are_named(raw: bytes, loc: tuple, msg: str, client: Client) -> None:  # type: ignore[type-arg]
    r = client.post("/schedule", content=raw, headers={"content-type": "application/json"})
    assert r.status_code == 422, r.text
    details = r.json()["detail"]
    assert any(tuple(d["loc"][:len(loc)]) == loc and msg in d["msg"] for d in details), details
    assert details == _ordinary_details(raw)


def _ordinary_details(raw: bytes) -> list[dict[str, Any]]:
    """The 422's details the ordinary parse and checks give (what the route answered before)."""
    from app.api.errors import validation_details
    try:
        ordinary(raw)
    except ValidationError as exc:
        return validation_details(exc)
    except InputError as exc:
        return [{"loc": list(e.loc), "msg": e.msg, "type": e.type} for e in exc.errors]
    raise AssertionError("the ordinary path accepted it")


def test_no_running_jobs_is_not_scanned() -> None:
    assert split(text(example() | {"running": []})) is None


@pytest.mark.parametrize("raw", [b"[]", b"{}", b'{"running": 1}', b'{"running": [], "running": []}',
                                 b'{"running": [{"id": "a"}]', b'{"a": "\\"running\\"", "running": [1]}'])
def test_bodies_the_scan_refuses(raw: bytes) -> None:
    with pytest.raises(Fallback):
        split(raw)


NUMBERS = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.integers(-10**20, 10**20).map(str),
    st.builds(lambda m, f, e: f"{m}.{f}e{e}", st.integers(-10**9, 10**9), st.integers(0, 10**12),
              st.integers(-30, 30)),
    st.builds(lambda m, e: f"{m}E+{e}", st.integers(0, 10**16), st.integers(0, 25)),
)


@given(NUMBERS)
def test_numbers_read_exactly_or_from_their_text(s: str) -> None:
    """A number the scan reads itself is the float Python (and pydantic) read from its text."""
    buf = np.frombuffer(s.encode() + b",", dtype=np.uint8)
    end, integral, value, f, exact = _number(buf, 0, _POW10)
    assert end == len(s)
    if exact:
        assert f == float(s) and math.copysign(1, f) == math.copysign(1, float(s))
    if integral:
        assert value == int(s)


JOB = st.fixed_dictionaries(
    {"id": st.text("abcxyz019-_.", min_size=1, max_size=6),
     "start_time": st.floats(-1e12, 1e12), "walltime_s": st.floats(1e-3, 1e12),
     "allocation": st.lists(st.fixed_dictionaries(
         {"node": st.sampled_from(["n1", "n2", "n3"])},
         optional={"cpu": st.integers(0, 16), "mem_mib": st.integers(0, 128_000),
                   "gpu": st.integers(0, 4)}), min_size=1, max_size=3)},
    optional={"queue": st.sampled_from(["batch", "q-2"]), "migrated": st.booleans()})


@given(st.lists(JOB, max_size=6), st.sampled_from([None, 0, 2]))
def test_any_running_jobs_scan_or_hand_on_as_parsed(jobs: list[dict[str, Any]], indent: int | None) -> None:
    """Whatever running jobs a body holds, the scan gives pydantic's snapshot, or hands the body on
    and the ordinary path decides (accepting or naming the problem) as it did before."""
    raw = json.dumps(copy.deepcopy(EXAMPLE) | {"running": jobs}, indent=indent).encode()
    try:
        want = ordinary(raw)
    except InputError:
        want = None
    try:
        got = scanned(raw) if jobs else ordinary(raw)
    except Fallback:
        assert want is None or len(jobs) == 0
        return
    assert want is not None
    assert tuple(got[0].running) == tuple(want[0].running) and got[0].nodes == want[0].nodes


SMALL = text(copy.deepcopy(EXAMPLE) | {"running": [
    {"id": "r1", "queue": "batch", "start_time": 1_699_996_400.25, "walltime_s": 7200, "migrated": False,
     "allocation": [{"node": "n1", "cpu": 8, "mem_mib": 64_000}, {"node": "n2", "cpu": 2, "gpu": 0}]},
    {"id": "r2", "start_time": -1.5e3, "walltime_s": 6e1, "allocation": [{"node": "n3", "gpu": 1}]}]})


def _outcome(read: Any, raw: bytes) -> Any:
    try:
        snap, jobs = read(raw)
    except InputError as exc:
        return ("refused", [(e.loc, e.msg) for e in exc.errors])
    except ValidationError as exc:
        return ("refused", exc.errors())
    return ("read", snap.nodes, tuple(snap.running), jobs)


@given(st.integers(0, 10**6), st.sampled_from(list('0123456789-+.eE", {}[]:xn\\tf')),
       st.sampled_from(["replace", "insert", "delete"]))
def test_a_changed_byte_is_read_as_pydantic_reads_it(at: int, char: str, how: str) -> None:
    """One byte of the running jobs changed, added or dropped: the scan reads the body as pydantic
    and the ordinary checks do, or hands it on to them."""
    start = SMALL.index(b'"running"')
    end = SMALL.index(b'"pending"')
    k = start + at % (end - start)
    c = char.encode()
    raw = {"replace": SMALL[:k] + c + SMALL[k + 1:], "insert": SMALL[:k] + c + SMALL[k:],
           "delete": SMALL[:k] + SMALL[k + 1:]}[how]
    want = _outcome(ordinary, raw)
    try:
        got = _outcome(scanned, raw)
    except (Fallback, AssertionError):  # handed on (or nothing scanned): the ordinary path answers
        return
    assert got == want


@pytest.mark.parametrize("which", ["bench", "production"])
def test_dynamic_migration_reads_the_columns_as_the_records(which: str) -> None:
    """The one core caller that walked every running job (dynamic migration's remaining work) gets
    the same floats from the columns, and the decision is the same, without a record per job."""
    from app.sched.cluster import ClusterIndex
    from app.sched.migration import QueueFacts, _remaining_work
    from app.sched.params import EasyParams, MigrationParams
    from app.sched.registry import decide

    snap, jobs = (cluster(200), pending(300)) if which == "bench" else production(200, 300)
    raw = text(request_body(snap, jobs, "easy"))
    want, want_jobs = ordinary(raw)
    got, got_jobs = scanned(raw)
    for now in (want.now, want.now + 7_200.0):
        facts = QueueFacts(ClusterIndex(want))
        assert _remaining_work(QueueFacts(ClusterIndex(got)), got.running, now, 60) == \
            _remaining_work(facts, want.running, now, 60)
    params = EasyParams(migration=MigrationParams(mode="dynamic", weight=0.1))
    decided = decide(got, got_jobs, "easy", params)
    assert got.running._records is None  # no record made
    assert decided == decide(want, want_jobs, "easy", params)
    assert decided.migrations  # the workload has queues to balance

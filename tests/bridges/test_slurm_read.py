"""Slurm's JSON, recorded from a real cluster, read into the wire snapshot."""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import replace

import pytest

from app.bridges.slurm.hostlist import expand
from app.bridges.slurm.read import MARK, gres_gpus, pending_in, read, waits_on, walltime_s
from tests.bridges import recorded


def test_nodes_carry_capacity_labels_partitions_and_state() -> None:
    """Every node is read with its CPUs, memory, features, partitions and drain state."""
    view = read(recorded.text(), recorded.started())
    nodes = {n["id"]: n for n in view.nodes}
    assert set(nodes) == {f"n{i}" for i in range(1, 9)}
    assert all(n["capacity"] == {"cpu": 8, "mem_mib": 16_000, "gpu": 0} for n in nodes.values())
    assert nodes["n6"]["state"] == "drain" and nodes["n1"]["state"] == "up"
    assert nodes["n7"]["labels"] == ["gpu"] and nodes["n1"]["labels"] == []
    assert sorted(view.partitions["short"]) == ["n4", "n5", "n6", "n7", "n8"]
    assert sorted(view.partitions["batch"]) == ["n1", "n2", "n3", "n4", "n5", "n6"]


def test_running_allocations_sum_to_what_slurm_says_is_allocated() -> None:
    """Per node, the running jobs' CPUs and memory add up to sinfo's alloc_cpus/alloc_memory."""
    view = read(recorded.text(), recorded.started())
    cpu: dict[str, int] = defaultdict(int)
    mem: dict[str, int] = defaultdict(int)
    for r in view.running:
        for a in r["allocation"]:
            cpu[a["node"]] += a["cpu"]
            mem[a["node"]] += a["mem_mib"]
    for name, n in recorded.raw_nodes().items():
        assert (cpu[name], mem[name]) == (n["alloc_cpus"], n["alloc_memory"]), name


def test_only_the_services_jobs_are_sent_pending() -> None:
    """Held-and-marked jobs go; the user-held job, the unmet dependency and running ones do not."""
    view = read(recorded.text(), recorded.started())
    sent = {p["id"] for p in view.pending}
    raw = recorded.raw_jobs()
    marked_held = {j for j, r in raw.items() if r["job_state"] == "PENDING" and r["admin_comment"] == MARK}
    assert sent == marked_held - {"41"}
    assert "held by its user" in view.skipped["42"]
    assert "dependency" in view.skipped["41"]
    assert not sent & {r["id"] for r in view.running}


def test_request_is_a_valid_schedule_request() -> None:
    """The view converts to a ScheduleRequest the service accepts (pydantic and cross-checks)."""
    from app import service

    resp = service.schedule(read(recorded.text(), recorded.started()).request())
    assert resp.starts or resp.reservations
    assert {s.job_id for s in resp.starts} <= {p.job_id for p in resp.priorities}


def test_a_released_job_still_pending_holds_its_nodes() -> None:
    """A job the bridge released that Slurm has not started is sent as running on its pinned nodes."""
    jobs = json.loads(recorded.text().jobs)
    job = next(j for j in jobs["jobs"] if str(j["job_id"]) == "20")
    job["required_nodes"] = "n7,n8"
    text = replace(recorded.text(), jobs=json.dumps(jobs))
    view = read(text, {**recorded.started(), "20": recorded.NOW - 3})
    (run,) = [r for r in view.running if r["id"] == "20"]
    assert [a["node"] for a in run["allocation"]] == ["n7", "n8"]
    assert all(a["cpu"] == 4 and a["mem_mib"] == 4000 for a in run["allocation"])
    assert "20" not in {p["id"] for p in view.pending}


def test_unheld_jobs_only_in_shadow_mode() -> None:
    """A pending job with a priority (not held by the recipe) is sent only when asked (shadow mode)."""
    jobs = json.loads(recorded.text().jobs)
    for j in jobs["jobs"]:
        if str(j["job_id"]) == "5":
            j["priority"], j["admin_comment"], j["state_reason"] = 1000, "", "Priority"
    text = replace(recorded.text(), jobs=json.dumps(jobs))
    assert "Slurm may start it" in read(text, {}).skipped["5"]
    assert "5" in {p["id"] for p in read(text, {}, take_unheld=True).pending}


@pytest.mark.parametrize("job_id, want", [
    ("17", {"nodes": 6, "cpu": 8, "mem_mib": 8000, "labels": [], "queue": "batch", "walltime_s": 60.0}),
    ("21", {"nodes": 3, "cpu": 4, "mem_mib": 4000}),
    ("31", {"nodes": 1, "cpu": 2, "mem_mib": 2000, "labels": ["gpu"], "queue": "short"}),
    ("40", {"queue": "batch"}),
], ids=["wide", "multi-node", "gpu-feature", "two-partitions-first"])
def test_pending_job_mapping(job_id: str, want: dict) -> None:
    """Nodes, CPUs per node, memory per node, features and partition are read as Slurm holds them."""
    got = pending_in(recorded.raw_jobs()[job_id])
    assert {k: got[k] for k in want} == want


def test_or_constraints_are_refused_not_dropped() -> None:
    """A constraint the wire cannot say (`a|b`) skips the job with a reason instead of dropping it."""
    job = {**recorded.raw_jobs()["31"], "features": "gpu|bigmem"}
    with pytest.raises(ValueError, match="not mapped"):
        pending_in(job)


def test_maintenance_reservation_is_read_as_a_window() -> None:
    """`scontrol show -o reservation` becomes a window on its nodes, 10 minutes long."""
    (w,) = read(recorded.text(), {}).windows
    assert w["id"] == "maint" and w["nodes"] == ["n1", "n2"] and w["end"] - w["start"] == 600


@pytest.mark.parametrize("text, names", [
    ("n[1-3,07],gpu1", ["n1", "n2", "n3", "n07", "gpu1"]),
    ("n[01-02]x", ["n01x", "n02x"]),
    ("n1", ["n1"]), ("", []), ("(null)", []),
], ids=["ranges", "suffix", "one", "empty", "null"])
def test_hostlist(text: str, names: list[str]) -> None:
    """Slurm host lists expand to node names in order, zero padding kept."""
    assert expand(text) == names


@pytest.mark.parametrize("dep, waits", [
    ("afterok:17(unfulfilled)", True), ("afterok:1", False), ("afterany:2", True), ("after:2", False),
    ("afterok:1,afterany:2", True), ("afterany:2?afterok:1", False), ("afterok:999", False),
    ("singleton", True), ("", False),
], ids=["afterok-pending", "afterok-done", "afterany-running", "after-running", "and", "or", "gone",
        "singleton", "none"])
def test_dependencies(dep: str, waits: bool) -> None:
    """Dependencies are judged from the same read (1 completed, 2 running, 17 pending)."""
    states = {"1": ("COMPLETED", 0), "2": ("RUNNING", 0), "17": ("PENDING", 0)}
    assert bool(waits_on(dep, states)) is waits


@pytest.mark.parametrize("gres, gpus", [("gpu:4", 4), ("gpu:a100:2(S:0-1)", 2), ("gres/gpu:2", 2),
                                        ("", 0), ("mps:100", 0), ("gpu:1,gpu:v100:2", 3)])
def test_gres_gpus(gres: str, gpus: int) -> None:
    """GPU counts are read from every GRES spelling Slurm uses."""
    assert gres_gpus(gres) == gpus


def test_unlimited_walltime_is_bounded() -> None:
    """Slurm's INFINITE/NO_VAL time limits become a year, inside the wire's bound."""
    assert walltime_s(4294967295) == walltime_s(None) == 365 * 86400.0 and walltime_s(2) == 120.0


@pytest.mark.parametrize("key, value", [
    ("het_job_id", 7), ("required_nodes", "n3"),
    ("excluded_nodes", "n1"), ("resv_name", "root_1"),
], ids=["heterogeneous", "nodelist", "exclude", "reservation"])
def test_unmappable_requests_stay_held(key: str, value: object) -> None:
    """A job asking what the wire cannot say is skipped with a reason, never sent half-read."""
    jobs = json.loads(recorded.text().jobs)
    for j in jobs["jobs"]:
        if str(j["job_id"]) == "5":
            j[key] = value
    view = read(replace(recorded.text(), jobs=json.dumps(jobs)), recorded.started())
    assert "5" not in {p["id"] for p in view.pending}
    assert "not mapped" in view.skipped["5"]


def test_a_licensed_job_is_sent_its_licences_left_to_slurm() -> None:
    """Licences are Slurm's to count: a job asking one is decided like any other (were it left
    held it would never run); a release that waits on a licence is held again after
    --start-bound (tests/bridges/test_slurm_outages.py)."""
    jobs = json.loads(recorded.text().jobs)
    for j in jobs["jobs"]:
        if str(j["job_id"]) == "5":
            j["licenses"] = "matlab:1"
    view = read(replace(recorded.text(), jobs=json.dumps(jobs)), recorded.started())
    assert "5" in {p["id"] for p in view.pending} and "5" not in view.skipped


def test_an_array_is_one_pending_job_per_task() -> None:
    """A held array's pending record (`0-6:2,9%2`) is one job per task, named ARRAY_TASK as scontrol
    takes them; a task Slurm split off (its own job id) keeps that name."""
    jobs = json.loads(recorded.text().jobs)
    for j in jobs["jobs"]:
        if str(j["job_id"]) == "5":
            j.update(array_job_id=5, array_task_string="0-6:2,9%2", array_task_id=None)
        if str(j["job_id"]) == "6":
            j.update(array_job_id=5, array_task_id=1)
    view = read(replace(recorded.text(), jobs=json.dumps(jobs)), recorded.started())
    ids = {p["id"] for p in view.pending}
    assert {"5_0", "5_2", "5_4", "5_6", "5_9", "5_1"} <= ids and not {"5", "6"} & ids


def test_overlapping_partitions_weights_and_windows_reach_the_request() -> None:
    """A node in two partitions keeps both; weights and the maint window are in the request."""
    req = read(recorded.text(), recorded.started()).request()
    nodes = {n.id: n for n in req.nodes or []}
    assert nodes["n4"].queues == ["batch", "short"] and nodes["n1"].queues == ["batch"]
    assert all(n.weight == 1 for n in nodes.values())
    assert [(w.id, w.nodes) for w in req.windows] == [("maint", ["n1", "n2"])]


@pytest.mark.parametrize("change, want", [
    ({"shared": "none"}, {"exclusive": True, "mem_mib": 2500}),
    ({"memory_per_node": None, "memory_per_cpu": 500}, {"exclusive": False, "mem_mib_per_cpu": 500}),
    ({"memory_per_node": None, "memory_per_cpu": None}, {"exclusive": True}),
    ({}, {"exclusive": False, "mem_mib": 2500}),
], ids=["exclusive", "mem-per-cpu", "no-memory-means-whole-node", "plain"])
def test_whole_node_and_per_cpu_memory(change: dict, want: dict) -> None:
    """--exclusive, --mem-per-cpu and a job asking no memory are said as Slurm will allocate them."""
    got = pending_in({**recorded.raw_jobs()["4"], **change})
    assert {k: got.get(k) for k in want} == want


def test_a_released_exclusive_job_holds_whole_nodes() -> None:
    """Released but not yet started, an exclusive job is sent holding each pinned node entirely."""
    jobs = json.loads(recorded.text().jobs)
    for j in jobs["jobs"]:
        if str(j["job_id"]) == "20":
            j.update(required_nodes="n7,n8", shared="none")
    view = read(replace(recorded.text(), jobs=json.dumps(jobs)), {**recorded.started(), "20": recorded.NOW})
    (run,) = [r for r in view.running if r["id"] == "20"]
    held = [(a["node"], a["cpu"], a["mem_mib"]) for a in run["allocation"]]
    assert held == [("n7", 8, 16_000), ("n8", 8, 16_000)]

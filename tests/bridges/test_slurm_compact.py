"""The compact read's parsers (squeue's text and scontrol's lines to `squeue --json`'s records).
That both reads give the same wire state on a real cluster is tested in test_slurm_latency.py."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from app.bridges.slurm import compact
from app.bridges.slurm.read import array_tasks, node_in, node_state


def line(**values: str) -> str:
    """One squeue line of the compact format, every field '(null)' unless given."""
    by_field = {field: values.get(key, "(null)") for key, field, _ in compact.FIELDS}
    return "".join(v + compact.SEP for v in by_field.values())


BASE = dict(job_id="7", array_job_id="7", array_task_id="N/A", job_state="PENDING", exit_code="0",
            priority="0", state_reason="JobHeldUser", eligible_time="N/A", start_time="N/A",
            submit_time="1795703000", het_job_id="N/A", node_count="2", max_nodes="2",
            minimum_cpus_per_node="1", cpus="20", user_name="ann", partition="batch", time_limit="1-02:03:00",
            nice="5", min_memory="1500M", shared="NO", tasks="20", tasks_per_node="0", required_nodes="")


def test_a_line_reads_as_the_json_record() -> None:
    """Times, limits, memory, exclusivity and the empty markers come out as squeue --json says them."""
    (r,) = compact.jobs(f"{compact.HEADER}\n{line(**BASE)}\n{compact.DETAILS}\n"
                        "JobId=7 ExcNodeList=n[3-4] MinMemoryCPU=1500M\n")
    assert r["job_id"] == 7 and r["array_job_id"] == 0 and r["array_task_id"] is None
    assert r["time_limit"] == 1563 and r["nice"] == 5 and r["eligible_time"] == 0
    assert r["memory_per_cpu"] == 1500 and r["memory_per_node"] is None
    assert r["shared"] == "none" and r["excluded_nodes"] == "n[3-4]" and r["comment"] == ""
    assert r["dependency"] == "" and r["submit_time"] == 1795703000


def test_without_details_memory_is_per_node_and_nothing_is_excluded() -> None:
    (r,) = compact.jobs(f"{compact.HEADER}\n{line(**BASE)}\n{compact.DETAILS}\n")
    assert r["memory_per_node"] == 1500 and r["memory_per_cpu"] is None and r["excluded_nodes"] == ""


def test_limits_and_memory_units() -> None:
    limits = ("UNLIMITED", "30:00", "1:00:00", "2-00:00:00")
    assert [compact._minutes(v) for v in limits] == [None, 30, 60, 2880]
    assert [compact._mib(v) for v in ("0", "8000M", "250G", "1T")] == [0, 8000, 256000, 1048576]


def test_array_lines_name_their_tasks() -> None:
    """squeue -r prints one line per task (a split task with its own job id): each becomes
    ARRAY_TASK, and a record still holding several tasks is split as the JSON's is."""
    tasks = (("9", "0"), ("11", "2"), ("9", "4-6%2"))
    rows = compact.rows("\n".join(line(**{**BASE, "job_id": jid, "array_job_id": "9", "array_task_id": task})
                                   for jid, task in tasks))
    names = [t["job_id"] for r in rows for t in array_tasks(r)]
    assert names == ["9_0", "9_2", "9_4", "9_5", "9_6"]


def test_running_allocations_from_scontrol_detail() -> None:
    """A running job's CPUs and memory per node come from scontrol's Nodes/CPU_IDs/Mem groups."""
    full = ("JobId=5 JobName=wrap ExcNodeList=(null) NumNodes=3   Nodes=n[1-2] CPU_IDs=0-3,6 Mem=800 GRES= "
            "  Nodes=n4 CPU_IDs=0 Mem=100 GRES= MinCPUsNode=1 MinMemoryNode=0 Features=(null)")
    d = compact.details(compact.reduced(full))["5"]
    assert d["allocated"] == [{"nodename": "n1", "cpus": 5, "memory_allocated": 800},
                              {"nodename": "n2", "cpus": 5, "memory_allocated": 800},
                              {"nodename": "n4", "cpus": 1, "memory_allocated": 100}]
    assert not d["per_cpu"] and d["excluded_nodes"] == ""


# two lines as 22.05's `scontrol -o show node` prints them (a drained node whose reason has blanks
# and an `=`, in two partitions, with GPUs; a powered-down cloud node in none)
NODE_LINES = (
    "NodeName=n7 Arch=x86_64 CoresPerSocket=1  CPUAlloc=2 CPUEfctv=8 CPUTot=8 CPULoad=1.25 "
    "AvailableFeatures=gpu,fast ActiveFeatures=gpu Gres=gpu:2 NodeAddr=127.0.0.1 RealMemory=16000 "
    "State=MIXED+DRAIN ThreadsPerCore=2 TmpDisk=0 Weight=5 Partitions=batch,short  "
    "Reason=disk swap State=IDLE [root@2026-11-27T14:08:46]\n"
    "NodeName=c1 CPUTot=4 CPULoad=N/A AvailableFeatures=(null) ActiveFeatures=(null) Gres=(null) "
    "RealMemory=1000 State=IDLE+CLOUD+POWERED_DOWN ThreadsPerCore=1 Weight=1\n")


def test_scontrol_node_lines_read_as_sinfo_json_records() -> None:
    """Base state and flags apart, `(null)` empty, load in hundredths, a reason's own `State=`
    ignored; node_in then maps them as it does sinfo's JSON."""
    n7, c1 = compact.nodes(f"{compact.NODES_HEADER}\n{NODE_LINES}")
    assert n7 == {"name": "n7", "threads": 2, "partitions": ["batch", "short"], "active_features": "gpu",
                  "features": "gpu,fast", "state": "mixed", "state_flags": ["DRAIN"], "weight": 5, "cpus": 8,
                  "real_memory": 16000, "gres": "gpu:2", "cpu_load": 125}
    assert c1["state"] == "idle" and c1["state_flags"] == ["CLOUD", "POWERED_DOWN"] and c1["partitions"] == []
    assert c1["features"] == c1["active_features"] == c1["gres"] == "" and c1["cpu_load"] == 0
    assert [node_state(n) for n in (n7, c1)] == ["drain", "drain"]  # powered down: drain, as from JSON
    assert node_in(n7)["capacity"] == {"cpu": 8, "mem_mib": 16000, "gpu": 2}
    assert node_in(n7)["labels"] == ["gpu"]


STATES = ("PENDING", "RUNNING", "COMPLETED")
DETAIL = ("", " ExcNodeList=n[3-4]", " MinMemoryCPU=1500M", " Nodes=n[1-2] CPU_IDs=0-3 Mem=4000")


@st.composite
def reads(draw: st.DrawFn) -> list[str]:
    """Successive compact texts of a small queue whose jobs come, go, and change state, priority
    and detail lines between reads (a line repeated now and then)."""
    out = []
    for _ in range(draw(st.integers(2, 5))):
        jobs = draw(st.lists(st.tuples(st.integers(1, 12), st.sampled_from(STATES), st.integers(0, 3),
                                       st.sampled_from(DETAIL)), max_size=12))
        body = "".join(line(**{**BASE, "job_id": str(j), "job_state": s, "priority": str(p)}) + "\n"
                       for j, s, p, _ in jobs)
        more = "".join(f"JobId={j} Name=x{d}\n" for j, _, _, d in jobs)
        out.append(f"{compact.HEADER}\n{body}{compact.DETAILS}\n{more}")
    return out


@given(reads())
@settings(max_examples=60, deadline=None)
def test_the_line_cache_reads_as_a_fresh_parse(texts: list[str]) -> None:
    """Read after read, the cache gives what a fresh parse gives, even after the records it handed
    out were changed by their caller."""
    cache = compact.LineCache()
    for text in texts:
        got = cache.jobs(text)
        assert got == compact.jobs(text)
        for r in got:  # a caller's changes must not reach the next read
            r["priority"] = -1
            r.get("job_resources", {}).get("allocated_nodes", [{}])[0]["cpus"] = -1

"""Label partitions and hysteresis (docs/methods.md §5)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from app.sched.model import Job, Node
from app.sched.partitions import (
    PartitionRules,
    capacity_bucket,
    hardware_labels,
    job_label,
    may_hold,
    offered_labels,
    should_move,
    surely_holds,
)

RULES = PartitionRules(bigmem_mib_per_core=8192, cpu_threshold=4, mem_threshold_mib=16_384)


def node(cpu: int, mem: int, gpu: int = 0, labels: frozenset[str] = frozenset()) -> Node:
    return Node("n", "q", (cpu, mem, gpu), (0, 0, 0), labels)


def job(cpu: int, mem: int, gpu: int = 0) -> Job:
    return Job("j", "q", 0.0, 60.0, 1, cpu, mem, gpu)


def test_first_labels_come_from_hardware_plus_the_resource_managers() -> None:
    assert hardware_labels(node(64, 256_000), RULES) == {"cpu"}
    assert hardware_labels(node(32, 1_048_576), RULES) == {"bigmem"}
    assert hardware_labels(node(32, 256_000, 4), RULES) == {"gpu"}
    assert hardware_labels(node(64, 256_000, labels=frozenset({"ib"})), RULES) == {"cpu", "ib"}


def test_a_used_up_resource_withdraws_its_label() -> None:
    gpu_node = node(32, 256_000, 4)
    assert offered_labels(gpu_node, (8, 64_000, 1), RULES) == {"gpu"}
    assert offered_labels(gpu_node, (8, 64_000, 0), RULES) == {"cpu"}
    big = node(32, 1_048_576)
    assert offered_labels(big, (4, 900_000, 0), RULES) == {"bigmem"}
    assert offered_labels(big, (16, 32_000, 0), RULES) == {"cpu"}  # its memory is mostly taken


def test_jobs_get_their_second_label() -> None:
    assert job_label(job(1, 4000), RULES) == "cpu"
    assert job_label(job(4, 64_000), RULES) == "bigmem"
    assert job_label(job(4, 64_000, 1), RULES) == "gpu"


@given(st.integers(0, 128), st.integers(0, 1 << 20), st.integers(-4, 4), st.integers(-16_384, 16_384))
def test_changes_within_the_thresholds_never_move_a_node(cpu: int, mem: int, dc: int, dm: int) -> None:
    assert not should_move((cpu, mem, 0), (cpu + dc, mem + dm, 0), RULES)


@given(st.integers(0, 128), st.integers(0, 1 << 20), st.integers(5, 64), st.sampled_from([-1, 1]))
def test_a_change_past_a_threshold_moves_it(cpu: int, mem: int, d: int, sign: int) -> None:
    assert should_move((cpu, mem, 0), (cpu + sign * d, mem, 0), RULES)
    assert should_move((cpu, mem, 0), (cpu, mem + sign * (16_384 + d), 0), RULES)
    assert should_move((cpu, mem, 2), (cpu, mem, 1), RULES)


TRIPLES = st.tuples(st.integers(0, 1024), st.integers(0, 1 << 21), st.integers(0, 8))


@given(TRIPLES, TRIPLES)
def test_a_bucket_that_may_not_hold_a_demand_never_holds_it(need, free) -> None:  # noqa: ANN001
    if not may_hold(capacity_bucket(free), need):
        assert any(f < n for f, n in zip(free, need, strict=True))
    if surely_holds(capacity_bucket(free), need):
        assert all(f >= n for f, n in zip(free, need, strict=True))


@given(st.integers(1, 16), st.integers(0, 64))
def test_a_small_node_that_empties_always_moves(cores: int, busy: int) -> None:
    busy = min(busy, cores)
    cap = (cores, cores * 4096, 0)
    # thresholds far above the node: without the capacity rule nothing would ever move it
    wide = PartitionRules(cpu_threshold=64, mem_threshold_mib=1 << 30)
    moved = should_move((cores - busy, 0, 0), (cores, 0, 0), wide, cap)
    assert moved == (busy > cores // 4)

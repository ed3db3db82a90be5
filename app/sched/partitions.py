"""Label partitions of seed 003 (docs/methods.md §5): which partitions a node is in, which one a job
searches, and when a node's changed free resources are worth moving it (hysteresis).

Pure functions over the core's records; the cluster cache (a store) calls them and keeps the result.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.sched.model import Job, Node, NodeState, Triple

GPU, BIGMEM, CPU = "gpu", "bigmem", "cpu"
ALL = "*"  # the idle set of every node of a queue, whatever its labels


@dataclass(frozen=True, slots=True)
class PartitionRules:
    bigmem_mib_per_core: int = 8192  # a node (or job) with more memory per core than this is bigmem
    cpu_threshold: int = 4  # a node moves only when its free cpu changed by more than this ...
    mem_threshold_mib: int = 16_384  # ... or its free memory by more than this, since its last move


def hardware_labels(node: Node, rules: PartitionRules = PartitionRules()) -> frozenset[str]:
    """The node's first labels: what its capacity makes it (`gpu`, `bigmem`, else `cpu`), plus the labels
    the resource manager sent."""
    cpu, mem, gpu = node.cap
    if gpu > 0:
        kind = GPU
    elif cpu > 0 and mem / cpu > rules.bigmem_mib_per_core:
        kind = BIGMEM
    else:
        kind = CPU
    return frozenset({kind}) | node.labels


def offered_labels(node: Node, free: Triple, rules: PartitionRules = PartitionRules()) -> frozenset[str]:
    """The partitions the node is offered in now: a hardware label whose resource is used up is
    withdrawn (a gpu node with no free gpu is not offered to gpu jobs; it still takes cpu jobs)."""
    labels = set(hardware_labels(node, rules))
    f_cpu, f_mem, f_gpu = free
    if GPU in labels and f_gpu <= 0:
        labels.discard(GPU)
        labels.add(CPU)
    if BIGMEM in labels and (f_cpu <= 0 or f_mem / f_cpu <= rules.bigmem_mib_per_core):
        labels.discard(BIGMEM)
        labels.add(CPU)
    return frozenset(labels)


def job_label(job: Job, rules: PartitionRules = PartitionRules()) -> str:
    """The job's second label: the partition it is searched in."""
    if job.gpu > 0:
        return GPU
    if job.cpu > 0 and job.mem_mib / job.cpu > rules.bigmem_mib_per_core:
        return BIGMEM
    return CPU


def should_move(at_last_move: Triple, free: Triple, rules: PartitionRules = PartitionRules(),
                cap: Triple | None = None) -> bool:
    """Whether a node's free resources drifted far enough since its last move to move it again.

    Changes at or under the thresholds are absorbed, so a node oscillating around a bucket edge by less
    than a threshold stays where it is. A gpu count change always counts (gpus are few and decisive).
    Given the node's capacity, a threshold never exceeds a quarter of it: a small node that empties
    (4 cores: 0 to 4 free) must move, or no job would ever find it.
    """
    cpu_t, mem_t = rules.cpu_threshold, rules.mem_threshold_mib
    if cap is not None:
        cpu_t, mem_t = min(cpu_t, cap[0] // 4), min(mem_t, cap[1] // 4)
    return (abs(free[0] - at_last_move[0]) > cpu_t
            or abs(free[1] - at_last_move[1]) > mem_t
            or free[2] != at_last_move[2])


def capacity_bucket(free: Triple) -> tuple[int, int, int]:
    """Bucket of remaining capacity: per resource, the power of two just under the free amount (its
    bit length; 0 for none). A job asking (c, m, g) looks only in buckets that `may_hold` it, and so
    skips nodes short of any resource."""
    return (max(free[0], 0).bit_length(), max(free[1], 0).bit_length(), max(free[2], 0).bit_length())


def may_hold(bucket: tuple[int, int, int] | list[int], demand: Triple) -> bool:
    """Whether some node of the bucket could hold the demand (a node below it in any resource cannot)."""
    return all(b >= d.bit_length() for b, d in zip(bucket, demand, strict=True))


def surely_holds(bucket: tuple[int, int, int] | list[int], demand: Triple) -> bool:
    """Whether every node of the bucket holds the demand (its least amount, 2^(b-1), is enough)."""
    return all(d == 0 or (b > 0 and 1 << (b - 1) >= d) for b, d in zip(bucket, demand, strict=True))


def bucket_floor(bucket: tuple[int, int, int] | list[int]) -> list[int]:
    """The least free amounts of a bucket's nodes (when they last moved)."""
    return [1 << (b - 1) if b > 0 else 0 for b in bucket]


def search_labels(job: Job, rules: PartitionRules = PartitionRules()) -> tuple[str, ...]:
    """The partitions searched for a job, in order: its constraint's labels (the rarest is not known
    here, so the first by name), else its derived second label."""
    return tuple(sorted(job.labels)) if job.labels else (job_label(job, rules),)


def is_idle(node: Node) -> bool:
    """Up and holding nothing: a whole-node (exclusive) job may start on it."""
    return node.state == NodeState.UP and not any(node.alloc)


def idle_labels(node: Node) -> tuple[str, ...]:
    """The idle sets an idle node is in, per queue it serves: every node's (`ALL`), `gpu` when it
    has gpus, and one per label the resource manager sent (a job's constraint)."""
    return tuple(sorted({ALL, *node.labels} | ({GPU} if node.cap[2] > 0 else set())))


def idle_label(job: Job) -> str:
    """The idle set searched for a whole-node job: its constraint's first label, else `gpu` when
    it asks for gpus, else every node of its queue (it may take any node whose capacity holds its
    demand, as the full scan does: the cpu and bigmem partitions are not used for it)."""
    if job.labels:
        return min(job.labels)
    return GPU if job.gpu > 0 else ALL

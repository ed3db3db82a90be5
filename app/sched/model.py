"""Plain records of the scheduling core: the snapshot it reads and the decision it returns.

Pure data, no behaviour beyond derived properties. Resources are always the triple
(cpu cores, memory MiB, gpus), in that order (`RESOURCES`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the columns are arrays built in cluster.py, which reads these records
    from app.sched.cluster import NodeColumns

RESOURCES = ("cpu", "mem_mib", "gpu")
Triple = tuple[int, int, int]


class NodeState(StrEnum):
    UP = "up"
    DOWN = "down"
    DRAIN = "drain"


class StartKind(StrEnum):
    START = "start"  # started in priority order
    BACKFILL = "backfill"  # started out of order while a job ahead of it holds a reservation


class Reason(StrEnum):
    """Why a pending job was neither started nor reserved in this pass."""

    resources = "resources"  # not enough free resources now, and no reservation was made for it
    priority = "priority"  # a higher-priority job ahead of it in its queue must start first (fcfs)
    blocked_by_reservation = "blocked_by_reservation"  # fits now, but would delay a reservation
    queue_overloaded = "queue_overloaded"  # its queue is over the load threshold, no queue could take it
    never_fits = "never_fits"  # no node of its queue with its labels could ever hold it
    node_down = "node_down"  # it fits only on nodes that are down or draining
    not_evaluated = "not_evaluated"  # beyond the queue depth of this pass; looked at next cycle


@dataclass(slots=True, unsafe_hash=True)  # not frozen: see RunningJob
class Node:
    id: str
    queue: str
    cap: Triple
    alloc: Triple
    labels: frozenset[str] = frozenset()
    cpu_load: float = 0.0
    cpu_ghz: float = 1.0
    state: NodeState = NodeState.UP
    weight: int = 1  # preference, lower first (Slurm's node weight)
    # every queue it serves when more than one (overlapping partitions), sorted; () = just `queue`
    queues: tuple[str, ...] = ()

    @property
    def serves(self) -> tuple[str, ...]:
        """Every queue it serves."""
        return self.queues or (self.queue,)


# Not frozen (nor are Node and Job), like Pending below: every request makes one per running job
# (~60,000 on 10,000 nodes), and a frozen dataclass's __init__ costs three times a plain one's.
# Read-only all the same; hashed and compared by value as a frozen one is.
@dataclass(slots=True, unsafe_hash=True)
class RunningJob:
    """A job holding resources; `alloc` maps node id to what the job holds there."""

    id: str
    queue: str
    alloc: tuple[tuple[str, Triple], ...]
    start_time: float
    walltime_s: float
    migrated: bool = False

    @property
    def end_time(self) -> float:
        return self.start_time + self.walltime_s


@dataclass(slots=True, unsafe_hash=True)  # not frozen: see RunningJob
class Job:
    """A pending job: `nodes` nodes, each with (cpu, mem_mib, gpu) free."""

    id: str
    queue: str
    submit_time: float
    walltime_s: float
    nodes: int = 1
    cpu: int = 1
    mem_mib: int = 0
    gpu: int = 0
    user: str = ""
    priority: float = 0.0  # preset priority Y (seed 001)
    user_priority: float = 0.0
    queue_priority: float = 0.0
    vip: bool = False
    labels: frozenset[str] = frozenset()
    migrated: bool = False
    # the reservation a previous pass gave it (start, nodes); conservative never plans it later
    promise_start: float | None = None
    promise_nodes: tuple[str, ...] = ()
    # whole nodes: only an idle node holds it, and it takes all of each node it gets; `demand` is
    # then the least a node must have
    exclusive: bool = False

    @property
    def demand(self) -> Triple:
        return (self.cpu, self.mem_mib, self.gpu)


@dataclass(frozen=True, slots=True)
class Window:
    """A maintenance window or advance reservation: its nodes hold nothing over [start, end)."""

    id: str
    node_ids: tuple[str, ...]
    start: float
    end: float


@dataclass(frozen=True, slots=True)
class CapacityType:
    """How many nodes of a queue share one label set and one capacity (all states, and usable)."""

    queue: str
    labels: frozenset[str]
    cap: Triple
    nodes: int
    up: int


@dataclass(frozen=True, slots=True)
class WholeCluster:
    """Facts of the whole cluster, for a snapshot that holds only some of its nodes (the candidates a
    cached cluster's index found): what can ever fit, and each queue's load, are judged on these."""

    nodes: int
    capacity_types: tuple[CapacityType, ...]
    queue_cap: dict[str, Triple]  # summed over usable nodes
    queue_used: dict[str, Triple]  # allocated on usable nodes


@dataclass(frozen=True, slots=True)
class Snapshot:
    now: float
    nodes: Sequence[Node]  # a tuple, or lists (app.sched.cluster.NodeLists) read as records
    running: Sequence[RunningJob] = ()  # a tuple, or columns (app.sched.running) read as records
    whole: WholeCluster | None = None  # None: `nodes` is the whole cluster
    # the nodes and running holdings as arrays, kept current by a caller that decides many times
    # over one machine (the replay), or made from the wire's nodes (POST /schedule: `nodes` is then
    # a `NodeLists`); when set, it is read instead of `nodes` and `running`'s holdings
    columns: NodeColumns | None = None
    windows: tuple[Window, ...] = ()  # nodes they name that the snapshot lacks are left out


@dataclass(slots=True, unsafe_hash=True)  # not frozen: see Pending
class Start:
    job_id: str
    node_ids: tuple[str, ...]
    kind: StartKind
    queue: str
    expected_end: float


@dataclass(slots=True, unsafe_hash=True)  # not frozen: see Pending
class Reservation:
    job_id: str
    node_ids: tuple[str, ...]
    queue: str
    start_time: float
    end_time: float


@dataclass(frozen=True, slots=True)
class Migration:
    job_id: str
    from_queue: str
    to_queue: str
    reason: str
    figures: dict[str, float] = field(default_factory=dict)


# Start, Reservation, Pending and PriorityInfo are not frozen: one of each is made per job at every
# decision (a replay makes millions), and a frozen dataclass's __init__ costs three times a plain
# one's. Treat them as read-only all the same (hashed and compared by value as frozen ones are).
@dataclass(slots=True)
class Pending:
    job_id: str
    queue: str
    reason: Reason
    estimated_start: float | None = None
    detail: str = ""


@dataclass(slots=True)
class PriorityInfo:
    """A job's priority and the factors it is made of (like Slurm's `sprio`)."""

    job_id: str
    priority: float
    rank: int
    factors: dict[str, float]


@dataclass(frozen=True, slots=True)
class Summary:
    started: int
    backfilled: int
    reserved: int
    migrated: int
    pending: int
    not_evaluated: int
    nodes_total: int
    nodes_examined: int
    queue_load: dict[str, float]
    budget_hit: str | None = None  # which limit of the decision's budget ended the pass early (budget.py)
    jobs_considered: int = 0  # jobs the pass looked at


@dataclass(frozen=True, slots=True)
class Decision:
    starts: tuple[Start, ...]
    reservations: tuple[Reservation, ...]
    migrations: tuple[Migration, ...]
    pending: tuple[Pending, ...]
    priorities: tuple[PriorityInfo, ...]
    summary: Summary


def never_detail(job: Job, reason: Reason) -> str:
    """The detail of a job no node could ever hold (`never_fits`) or only down ones could (`node_down`)."""
    need = f"{job.nodes} node(s) with cpu={job.cpu} mem_mib={job.mem_mib} gpu={job.gpu}"
    labels = f" and labels {sorted(job.labels)}" if job.labels else ""
    if reason == Reason.never_fits:
        return f"no node of queue {job.queue}{labels} can ever hold {need}"
    return f"only nodes that are down or draining can hold {need}"

"""The pending jobs a decision needs to see: the replay hands `decide` these, not the whole queue.

Call a pending job *short* when fewer nodes than it asks for have its per-node demand free now.
During a pass free room only shrinks, so a short job cannot start anywhere in the pass. Suppose the
policy's order is standing (a job's rank among the submitted jobs moves neither with time nor with
the cluster: fcfs, sjf, f1) and the pass answers every short job past the first
`reservation_depth` short ones that could ever fit with a plain wait that changes nothing for the
other jobs (`BasePolicy.standing_key` says which policies do: not conservative, whose promised slots
are held for every job; not firstfit or the weighted order, whose reservations depend on time; not
memory_backfill, where a blocked job may find no node to book). Then a decision on

    every job that is not short, and the first `reservation_depth` short jobs (in the order) that
    could ever fit

starts, reserves and backfills exactly what the decision on the whole queue does:
- the jobs ranked before the queue's reservations are full are all in the list: each is either not
  short, or short and one of the first `reservation_depth` short ones (every short job met before
  then takes a reservation; a job that could never fit takes none and starts nothing);
- after that point, a short job left out would only have waited, and its wait changed nothing: no
  booking, no start, no stop of the queue (fcfs stops at its first blocked job, which is in the
  list). What the pass remembers from a wait (the shapes that lacked room, the nodes clear of
  bookings) is what it would find again for the jobs it does look at.
- the pass ranks whatever it is given by its own order, so the list's order does not matter.
The left-out jobs' wait records are not made (the replay does not read them). The queue must also
fit within the policy's `queue_depth` (else the depth would cut it at another job) and the machine
be one partition without balancing (a migration moves a job between queues). Exactness is tested
against replays given the whole queue (tests/sim/test_shortlist.py) and the reference digests.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from collections.abc import Mapping

from app.sched.model import Job
from app.sched.params import CommonParams
from app.sched.policies.base import StandingKey
from app.sched.registry import POLICIES
from app.sim.workload import Machine, Workload

Shape = tuple[int, int]  # (cpu, mem_mib) per node


def standing_key(w: Workload, policy: str, params: CommonParams | None) -> StandingKey | None:
    """The policy's standing key when the rule above holds for this replay, else None."""
    if w.machine.queues or params is None or params.migration is not None or policy not in POLICIES:
        return None
    return POLICIES[policy][1](params).standing_key()


class Shortlist:
    """The pending jobs in the policy's order, and grouped by shape and node count."""

    def __init__(self, key: StandingKey, machine: Machine, depth: int, queue_depth: int) -> None:
        self.key, self.machine, self.depth, self.queue_depth = key, machine, depth, queue_depth
        self.order: list[tuple[tuple[bool, float, float, str], str]] = []  # (key, job id), sorted
        self.keys: dict[str, tuple[bool, float, float, str]] = {}
        # per shape: the node counts asked (sorted), and per count the ids of the jobs asking it
        self.sizes: dict[Shape, list[int]] = {}
        self.ids: dict[tuple[Shape, int], dict[str, None]] = {}

    def add(self, job: Job) -> None:
        k = self.keys[job.id] = self.key(job)
        insort(self.order, (k, job.id))
        shape = (job.cpu, job.mem_mib)
        group = self.ids.get((shape, job.nodes))
        if group is None:
            group = self.ids[shape, job.nodes] = {}
            insort(self.sizes.setdefault(shape, []), job.nodes)
        group[job.id] = None

    def remove(self, job: Job) -> None:
        entry = (self.keys.pop(job.id), job.id)
        del self.order[bisect_left(self.order, entry)]
        shape = (job.cpu, job.mem_mib)
        group = self.ids[shape, job.nodes]
        del group[job.id]
        if not group:
            del self.ids[shape, job.nodes]
            sizes = self.sizes[shape]
            del sizes[bisect_left(sizes, job.nodes)]
            if not sizes:
                del self.sizes[shape]

    def jobs(self, pending: Mapping[str, Job], room: Mapping[Shape, int]) -> list[Job]:
        """The jobs the decision needs; `room`: per shape of a pending job, how many nodes have
        it free now. The whole queue when it is deeper than the policy looks."""
        if len(pending) > self.queue_depth:
            return list(pending.values())
        out = []
        for shape, sizes in self.sizes.items():  # the jobs that are not short
            for n in sizes[: bisect_right(sizes, room[shape])]:
                out.extend(map(pending.__getitem__, self.ids[shape, n]))
        return out + self._first_short(pending, room)

    def _first_short(self, pending: Mapping[str, Job], room: Mapping[Shape, int]) -> list[Job]:
        """The first `depth` short jobs, in the order, that could ever fit."""
        found: list[Job] = []
        for _, jid in self.order:
            if len(found) >= self.depth:
                break
            job = pending[jid]
            if job.nodes > room[job.cpu, job.mem_mib] and self._could_fit(job):
                found.append(job)
        return found

    def _could_fit(self, job: Job) -> bool:
        m = self.machine
        return job.nodes <= m.nodes and job.cpu <= m.cores_per_node and job.mem_mib <= m.mem_mib_per_node

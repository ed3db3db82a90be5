"""Terse builders for hand-checked scenarios (times are multiples of 60 so grain effects are visible)."""

from __future__ import annotations

from dataclasses import replace

from app.sched.model import Job, Node, NodeState, RunningJob, Snapshot, Window

NOW = 6000.0


def node(nid: str, cpu: int = 4, mem: int = 8192, gpu: int = 0, *, queue: str = "q",
         alloc: tuple[int, int, int] | None = None, labels: tuple[str, ...] = (),
         state: NodeState = NodeState.UP, load: float = 0.0, ghz: float = 2.0, weight: int = 1,
         queues: tuple[str, ...] = ()) -> Node:
    """`queues`: every queue it serves when more than one (`queue` is then the first)."""
    return Node(nid, queues[0] if queues else queue, (cpu, mem, gpu), alloc or (0, 0, 0),
                frozenset(labels), load, ghz, state, weight, tuple(sorted(queues)))


def running(jid: str, holds: dict[str, tuple[int, int, int]], end: float, *, queue: str = "q",
            start: float = 0.0) -> RunningJob:
    return RunningJob(jid, queue, tuple(holds.items()), start, end - start)


def job(jid: str, submit: float, walltime: float, *, nodes: int = 1, cpu: int = 1, mem: int = 0,
        gpu: int = 0, queue: str = "q", labels: tuple[str, ...] = (), **kw: object) -> Job:
    return Job(jid, queue, submit, walltime, nodes, cpu, mem, gpu, labels=frozenset(labels),
               **kw)  # type: ignore[arg-type]


def window(wid: str, nodes: tuple[str, ...], start: float, end: float) -> Window:
    return Window(wid, nodes, start, end)


def snapshot(nodes: list[Node], run: list[RunningJob], now: float = NOW,
             windows: tuple[Window, ...] = ()) -> Snapshot:
    """Nodes' alloc is filled in from the running jobs unless a node sets its own."""
    held: dict[str, list[int]] = {}
    for rj in run:
        for nid, d in rj.alloc:
            acc = held.setdefault(nid, [0, 0, 0])
            for r in range(3):
                acc[r] += d[r]
    filled = [
        n if n.alloc != (0, 0, 0) or n.id not in held
        else replace(n, alloc=tuple(held[n.id]))
        for n in nodes
    ]
    return Snapshot(now, tuple(filled), tuple(run), windows=windows)

"""Hypothesis strategies: random DAGs (edges only forward in index order) on random group sets."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import strategies as st

from app.sched.dag.model import DagProblem, Edge, Group, Link, Network, Placement, Task, TaskStatus

LABELS = ("bwa", "gatk", "gpu")


@st.composite
def groups(draw: st.DrawFn) -> tuple[Group, ...]:
    n = draw(st.integers(1, 5))
    out = []
    for i in range(n):
        out.append(Group(
            f"g{i}",
            speed=draw(st.sampled_from([0.5, 1.0, 2.0, 3.0])),
            labels=frozenset(draw(st.sets(st.sampled_from(LABELS)))),
            free_at=draw(st.sampled_from([0.0, 0.0, 3.0, 10.0])),
            slots=draw(st.integers(1, 3)),
        ))
    return tuple(out)


@st.composite
def task(draw: st.DrawFn, tid: str, gs: tuple[Group, ...]) -> Task:
    if draw(st.booleans()) and len(gs) > 1:
        able = draw(st.lists(st.sampled_from([g.id for g in gs]), min_size=1, unique=True))
        return Task(tid, costs={g: float(draw(st.integers(0, 20))) for g in able})
    offered = draw(st.sampled_from(gs)).labels  # some group can always run it
    needs = frozenset(draw(st.sets(st.sampled_from(sorted(offered))))) if offered else frozenset()
    return Task(tid, work=float(draw(st.integers(0, 20))), requires=needs)


@st.composite
def dag_problems(draw: st.DrawFn, max_tasks: int = 18) -> DagProblem:
    gs = draw(groups())
    n = draw(st.integers(1, max_tasks))
    tasks = tuple(draw(task(f"t{i}", gs)) for i in range(n))
    edges = []
    for j in range(1, n):
        for i in draw(st.sets(st.integers(0, j - 1), max_size=3)):
            edges.append(Edge(f"t{i}", f"t{j}", float(draw(st.sampled_from([0, 1e6, 5e8, 2e9])))))
    links: tuple[Link, ...] = ()
    if len(gs) > 1 and draw(st.booleans()):
        links = (Link(gs[0].id, gs[1].id, bandwidth=draw(st.sampled_from([1e7, 1e9])), latency=0.5),)
    if draw(st.booleans()):  # a transfer inside a group, as saga's instances have
        links += (Link(gs[-1].id, gs[-1].id, bandwidth=draw(st.sampled_from([1e8, 1e10])), latency=0.1),)
    net = Network(bandwidth=draw(st.sampled_from([1e8, 1e9])), latency=draw(st.sampled_from([0.0, 0.2])),
                  links=links)
    return DagProblem(tasks, tuple(edges), gs, net, now=draw(st.sampled_from([0.0, 5.0])))


def replanned(p: DagProblem, plan: list[Placement], cut: float) -> DagProblem:
    """The problem again at a time `cut` of the way through `plan`: tasks finished by then are done,
    those under way (or starting then with some length) are running, the rest pending."""
    span = max(pl.finish for pl in plan)
    now = p.now + cut * (span - p.now)
    tasks = []
    for t, pl in zip(p.tasks, plan, strict=True):
        gid = p.groups[pl.group].id
        if pl.finish <= now:
            tasks.append(replace(t, status=TaskStatus.DONE, group=gid, start=pl.start, finish=pl.finish))
        elif pl.start < now or (pl.start == now and pl.finish > pl.start):
            tasks.append(replace(t, status=TaskStatus.RUNNING, group=gid, start=pl.start))
        else:
            tasks.append(t)
    return replace(p, tasks=tuple(tasks), now=now)

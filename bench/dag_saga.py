"""The instances of the quality bench, built as saga problems (saga's own objects, so saga's HEFT
reads exactly what it was written for) and turned into this service's DagProblem, and an
independent plan checker that knows nothing of the planner's code.

saga (the PyPI package `anrg-saga`, a `bench` extra) models one task at a time per node, a task
costing `cost / speed`, and a transfer of `size` bytes costing `size / speed of the link`, a node's
link to itself included (its generators give it a finite speed): the same model as /dag/plan with
one slot per group, no latency, and a link per pair including each group's self-link.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import networkx as nx
import numpy as np
from saga import Network, TaskGraph
from saga.schedulers.data.random import gen_in_trees, gen_out_trees, gen_parallel_chains

from app.sched.dag.model import DagProblem, Edge, Group, Link, Placement, Task, TaskStatus
from app.sched.dag.model import Network as CoreNetwork


@dataclass(frozen=True)
class Instance:
    family: str
    name: str
    graph: TaskGraph
    network: Network

    def problem(self) -> DagProblem:
        return to_problem(self.graph, self.network)


def to_problem(tg: TaskGraph, net: Network) -> DagProblem:
    """The same instance in this service's model, tasks and groups sorted by name."""
    tasks = tuple(Task(t.name, work=float(t.cost)) for t in sorted(tg.tasks, key=lambda t: t.name))
    edges = tuple(Edge(d.source, d.target, float(d.size))
                  for d in sorted(tg.dependencies, key=lambda d: (d.source, d.target)))
    groups = tuple(Group(n.name, speed=float(n.speed)) for n in sorted(net.nodes, key=lambda n: n.name))
    links = tuple(Link(e.source, e.target, bandwidth=float(e.speed))
                  for e in sorted(net.edges, key=lambda e: (e.source, e.target)))
    return DagProblem(tasks, edges, groups, CoreNetwork(bandwidth=1.0, links=links))


def network(n: int, rng: random.Random) -> Network:
    """n nodes of speed 0.5–2, links of speed 0.5–2, each node's link to itself 100× faster."""
    g = nx.complete_graph(n)
    g = nx.relabel_nodes(g, {i: f"N{i:02d}" for i in g.nodes})
    for u, v in g.edges:
        g.edges[u, v]["weight"] = rng.uniform(0.5, 2.0)
    for v in list(g.nodes):
        g.nodes[v]["weight"] = rng.uniform(0.5, 2.0)
        g.add_edge(v, v, weight=100.0)
    return Network.from_nx(g)


def layered(n: int, ccr: float, rng: random.Random) -> TaskGraph:
    """n tasks in about sqrt(n) layers, 1–3 parents each from the two layers above; costs
    lognormal (mean ~1), sizes exponential with mean `ccr` (a transfer at speed 1 vs a task)."""
    depth = max(2, round(n ** 0.5))
    layer = sorted(rng.randrange(depth) for _ in range(n))
    g = nx.DiGraph()
    for i in range(n):
        g.add_node(f"T{i:04d}", weight=rng.lognormvariate(-0.5, 1.0))
    by_layer: dict[int, list[int]] = {}
    for i, k in enumerate(layer):
        by_layer.setdefault(k, []).append(i)
    for i, k in enumerate(layer):
        above = [j for d in (1, 2) for j in by_layer.get(k - d, [])]
        for j in rng.sample(above, min(len(above), rng.randint(1, 3))):
            g.add_edge(f"T{j:04d}", f"T{i:04d}", weight=rng.expovariate(1 / ccr))
    return TaskGraph.from_nx(g)


def _weights(rng: random.Random, ccr: float) -> tuple[Callable[..., float], Callable[..., float]]:
    return (lambda *_: rng.lognormvariate(-0.5, 1.0)), (lambda *_: rng.expovariate(1 / ccr))


def saga_family(kind: str, rng: random.Random, ccr: float) -> TaskGraph:
    """saga's own generators (out-trees, in-trees, parallel chains), with seeded weights."""
    task_w, dep_w = _weights(rng, ccr)
    if kind == "out_trees":
        return gen_out_trees(1, rng.randint(3, 5), rng.randint(2, 3), task_w, dep_w)[0]
    if kind == "in_trees":
        return gen_in_trees(1, rng.randint(3, 5), rng.randint(2, 3), task_w, dep_w)[0]
    return gen_parallel_chains(1, rng.randint(3, 10), rng.randint(3, 12), task_w, dep_w)[0]


def wfcommons(path: Path, rng: random.Random, ccr: float) -> TaskGraph:
    """A real WfFormat instance: recorded runtimes as costs (scaled to a mean of 1), bytes of the
    files a parent writes and a child reads as sizes (scaled so their mean is `ccr`)."""
    wf = json.loads(path.read_text())["workflow"]
    runtime = {t["id"]: float(t["runtimeInSeconds"]) for t in wf["execution"]["tasks"]}
    size = {f["id"]: float(f.get("sizeInBytes", 0)) for f in wf["specification"].get("files", [])}
    spec = {t["id"]: t for t in wf["specification"]["tasks"]}
    pairs = {(p, t["id"]) for t in spec.values() for p in t.get("parents", [])}
    pairs |= {(t["id"], c) for t in spec.values() for c in t.get("children", [])}
    data = {(u, v): sum(size.get(f, 0.0) for f in set(spec[u].get("outputFiles", []))
                        & set(spec[v].get("inputFiles", []))) for u, v in pairs}
    mean_rt = float(np.mean(list(runtime.values()))) or 1.0
    mean_data = float(np.mean(list(data.values()))) if data else 0.0
    g = nx.DiGraph()
    for tid in spec:
        g.add_node(tid, weight=max(runtime.get(tid, 0.0) / mean_rt, 1e-6))
    for (u, v), d in sorted(data.items()):
        g.add_edge(u, v, weight=ccr * d / mean_data if mean_data else 0.0)
    return TaskGraph.from_nx(g)


RECIPES = ("bwa", "cycles", "genome", "rnaseq", "seismology", "srasearch")  # families not in the folder


def recipe_workflows(families: list[str], tasks: int, folder: Path) -> list[Path]:
    """Synthetic WfFormat instances of WfCommons' recipes (WfChef: task graphs and runtimes modelled
    on the family's recorded runs), one of about `tasks` tasks per family, seeded: the same graph,
    runtimes and file sizes every run (only file ids, random uuids, differ). Written to `folder`."""
    from wfcommons import WorkflowGenerator  # bench only (pip install -e '.[bench]')
    from wfcommons.wfchef import recipes

    paths = []
    for k, family in enumerate(families):
        recipe = getattr(recipes, f"{family.capitalize()}Recipe", None)
        if recipe is None:
            known = sorted(n[:-6].lower() for n in dir(recipes) if n.endswith("Recipe") and n != "Recipe")
            raise ValueError(f"unknown WfCommons recipe {family!r}; one of {', '.join(known)}")
        random.seed(4000 + k)
        np.random.seed(4000 + k)
        workflow = WorkflowGenerator(recipe.from_num_tasks(tasks)).build_workflow()
        path = folder / f"{family}-wfchef-{tasks}.json"
        workflow.write_json(path)
        paths.append(path)
    return paths


def instances(workflows: list[Path], quick: bool = False) -> Iterator[Instance]:
    """Generated layered DAGs (50–500 tasks, 4–16 groups, ccr 0.1–5), saga's families and the real
    workflows given, each on a seeded heterogeneous network. Same seeds, same instances."""
    per = 2 if quick else 8
    for i in range(3 * per):
        rng = random.Random(1000 + i)
        n, groups, ccr = (50, 100, 200, 500)[i % 4], (4, 8, 16)[i % 3], (0.1, 1.0, 5.0)[(i // 4) % 3]
        yield Instance("layered", f"layered n{n} g{groups} ccr{ccr} #{i}", layered(n, ccr, rng),
                       network(groups, rng))
    for kind in ("out_trees", "in_trees", "parallel_chains"):
        for i in range(per):
            rng = random.Random(2000 + i)
            groups, ccr = (4, 8, 16)[i % 3], (0.1, 1.0, 5.0)[(i // 3) % 3]
            yield Instance(kind, f"{kind} g{groups} ccr{ccr} #{i}", saga_family(kind, rng, ccr),
                           network(groups, rng))
    for path in workflows:
        for i, (groups, ccr) in enumerate([(4, 1.0), (8, 0.1), (16, 5.0)][: 1 if quick else 3]):
            rng = random.Random(3000 + i)
            short = path.stem.split("-")[0]
            yield Instance(f"wf:{short}", f"{short} g{groups} ccr{ccr}", wfcommons(path, rng, ccr),
                           network(groups, rng))


def check(p: DagProblem, placements: list[Placement]) -> list[str]:
    """Independent of the planners: every task once, on a group that can run it, for its cost;
    after its inputs have arrived (finish + size / link speed, the self-link on one group); no
    group running two tasks at once beyond its slots. Returns what is wrong (empty: valid)."""
    errors: list[str] = []
    tol = 1e-9
    index = {t.id: i for i, t in enumerate(p.tasks)}
    link = {frozenset((lk.a, lk.b)): lk for lk in p.network.links}
    if sorted(pl.task for pl in placements) != list(range(len(p.tasks))):
        return ["not one placement per task"]
    at = {pl.task: pl for pl in placements}
    for v, t in enumerate(p.tasks):
        pl, g = at[v], p.groups[at[v].group]
        if pl.status == TaskStatus.PENDING:
            want = t.work / g.speed if t.work is not None else (t.costs or {}).get(g.id, float("inf"))
            if not abs(pl.finish - pl.start - want) <= tol * max(1.0, want):
                errors.append(f"{t.id} runs {pl.finish - pl.start}, its cost on {g.id} is {want}")
            if pl.start < p.now - tol:
                errors.append(f"{t.id} starts before now")
    for e in p.edges:
        u, v = at[index[e.src]], at[index[e.dst]]
        gu, gv = p.groups[u.group].id, p.groups[v.group].id
        lk = link.get(frozenset((gu, gv)))
        if lk is not None:
            moved = lk.latency + e.data / lk.bandwidth
        else:
            moved = 0.0 if gu == gv else p.network.latency + e.data / p.network.bandwidth
        if v.start < u.finish + moved - tol * max(1.0, abs(u.finish + moved)):
            errors.append(f"{e.dst} starts at {v.start}, before {e.src}'s data arrive at {u.finish + moved}")
    for r, g in enumerate(p.groups):
        events = sorted((x, d) for pl in placements if pl.group == r and pl.finish > pl.start
                        for x, d in ((pl.start, 1), (pl.finish - tol * max(1.0, pl.finish), -1)))
        running = 0
        for _, d in sorted(events, key=lambda e: (e[0], e[1])):
            running += d
            if running > g.slots:
                errors.append(f"group {g.id} runs more than {g.slots} tasks at once")
                break
    return errors

"""The adapter between the DAG wire models (schemas.dag) and the DAG core (app.sched.dag), with the
cross-record checks pydantic cannot make: unknown ids, duplicates, cycles, tasks no group can run,
replanning states that contradict the graph. Every problem is collected with its path."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from app.errors import ErrorDetail, InputError
from app.sched.dag.graph import cost_row, find_cycle
from app.sched.dag.model import DagProblem, Edge, Group, Link, Network, Plan, Task, TaskStatus
from app.sched.registry import DagResult
from schemas.dag import (
    DagPlanRequest,
    DagPlanResponse,
    EdgeIn,
    GroupIn,
    ProgressIn,
    RunnerUpOut,
    SearchOut,
    StepOut,
    TaskIn,
    TaskPlanOut,
    WfInstance,
    WfSpecification,
)

Loc = tuple[str | int, ...]
STATUS_OUT = {TaskStatus.PENDING: "planned", TaskStatus.RUNNING: "running", TaskStatus.DONE: "done"}


@dataclass(frozen=True, slots=True)
class DagLimits:
    max_tasks: int = 20_000
    max_cells: int = 4_000_000  # tasks × groups: the planners keep a few float matrices of that size
    max_search_s: float = 2.0  # ceiling of the search budget
    best_default_s: float = 0.8  # `best` without an asked budget: planners and search within this


class Problems:
    """Collects errors; `raise_if_any` ends the checks of one stage."""

    def __init__(self) -> None:
        self.items: list[ErrorDetail] = []

    def add(self, loc: Loc, msg: str, type_: str = "value_error") -> None:
        self.items.append(ErrorDetail(("body", *loc), msg, type_))

    def raise_if_any(self) -> None:
        if self.items:
            raise InputError(self.items)  # (the answer lists the first 100: api.errors.listed)


def _duplicates(ids: Iterable[str], where: Loc, what: str, out: Problems) -> None:
    seen: set[str] = set()
    for i, x in enumerate(ids):
        if x in seen:
            out.add((*where, i, "id"), f"duplicate {what} id {x!r}", "duplicate")
        seen.add(x)


def problem_from_wire(req: DagPlanRequest, limits: DagLimits) -> tuple[DagProblem, list[str]]:
    """Check the request and build the core problem; InputError (422) lists everything wrong."""
    out = Problems()
    if (req.tasks is None) == (req.workflow is None):
        out.add((), "give either `tasks` (with `edges`) or `workflow`, not both and not neither")
    if req.workflow is None and req.groups is None:
        out.add(("groups",), "groups are required with `tasks` (only a WfFormat workflow has defaults)",
                "missing")
    if req.progress and req.workflow is None:
        out.add(("progress",), "`progress` goes with `workflow`; with `tasks`, set each task's status")
    out.raise_if_any()
    warnings: list[str] = []
    if req.workflow is not None:
        tasks, edges, locs = _from_wfformat(req.workflow, req.progress, out)
        groups = req.groups if req.groups is not None else _default_groups(req.workflow, warnings)
    else:
        tasks, edges, groups = req.tasks or [], req.edges, req.groups or []
        locs = [("tasks", i) for i in range(len(tasks))]
    out.raise_if_any()
    _check_sizes(len(tasks), len(groups), limits, out)
    out.raise_if_any()
    problem = _build(req, tasks, locs, edges, groups, out)
    out.raise_if_any()
    _check_graph(problem, locs, req.workflow is not None, out)
    out.raise_if_any()
    return problem, warnings + overdue_warnings(problem)


def _check_sizes(n_tasks: int, n_groups: int, limits: DagLimits, out: Problems) -> None:
    if n_tasks == 0:
        out.add(("tasks",), "the workflow has no task", "too_short")
    if n_groups == 0:
        out.add(("groups",), "there is no group to run the tasks", "too_short")
    if n_tasks > limits.max_tasks:
        out.add(("tasks",), f"{n_tasks} tasks; this service plans at most {limits.max_tasks}", "too_long")
    if n_tasks * n_groups > limits.max_cells:
        out.add(("groups",), f"{n_tasks} tasks × {n_groups} groups = {n_tasks * n_groups} pairs; "
                f"the limit is {limits.max_cells}", "too_long")


def _build(req: DagPlanRequest, tasks: Sequence[TaskIn], locs: Sequence[Loc], edges: Sequence[EdgeIn],
           groups: Sequence[GroupIn], out: Problems) -> DagProblem:
    seen: set[str] = set()
    for t, loc in zip(tasks, locs, strict=True):
        if t.id in seen:
            out.add((*loc, "id"), f"duplicate task id {t.id!r}", "duplicate")
        seen.add(t.id)
    _duplicates((g.id for g in groups), ("groups",), "group", out)
    group_ids = {g.id for g in groups}
    for t, loc in zip(tasks, locs, strict=True):
        _check_task(loc, t, group_ids, req.now, out)
    _check_links(req, group_ids, out)
    core_edges = _edges(edges, {t.id for t in tasks}, out)
    return DagProblem(
        tasks=tuple(_task(t) for t in tasks),
        edges=core_edges,
        groups=tuple(Group(g.id, g.speed, frozenset(g.labels),
                           req.now if g.free_at is None else g.free_at, g.slots) for g in groups),
        network=Network(req.network.bandwidth, req.network.latency,
                        tuple(Link(x.a, x.b, x.bandwidth, x.latency) for x in req.network.links)),
        now=req.now,
    )


def _check_links(req: DagPlanRequest, group_ids: set[str], out: Problems) -> None:
    """Known ends, and one link per pair of groups (either direction): a second one would have to be
    dropped or merged, and either would change the plan without a word."""
    first: dict[frozenset[str], int] = {}
    for i, link in enumerate(req.network.links):
        for end in ("a", "b"):
            if getattr(link, end) not in group_ids:
                out.add(("network", "links", i, end), f"unknown group {getattr(link, end)!r}", "unknown")
        pair = frozenset((link.a, link.b))
        if pair in first:
            out.add(("network", "links", i), f"a second link between {link.a!r} and {link.b!r} (the first "
                    f"is links[{first[pair]}]); give one per pair, it serves both directions", "duplicate")
        first.setdefault(pair, i)


def _check_task(loc: Loc, t: TaskIn, group_ids: set[str], now: float, out: Problems) -> None:
    if (t.work is None) == (t.costs is None):
        out.add(loc, f"task {t.id!r}: give `work` (with `requires`) or `costs`, exactly one")
    for gid, secs in (t.costs or {}).items():
        if gid not in group_ids:
            out.add((*loc, "costs", gid), f"unknown group {gid!r}", "unknown")
        if not secs >= 0:
            out.add((*loc, "costs", gid), f"a cost must be a number of seconds >= 0, not {secs}")
    if t.status == "pending":
        return
    if t.group is None or t.group not in group_ids:
        out.add((*loc, "group"), f"a {t.status.value} task needs the group it ran on; "
                f"{t.group!r} is not one of the groups", "unknown" if t.group else "missing")
    if t.status == "running" and (t.start is None or t.start > now):
        out.add((*loc, "start"), f"a running task needs its actual start, at or before now ({now})",
                "missing")
    if t.status == "done" and (t.finish is None or t.finish > now):
        out.add((*loc, "finish"), f"a done task needs its actual finish, at or before now ({now})", "missing")
    if t.start is not None and t.finish is not None and t.finish < t.start:
        out.add((*loc, "finish"), "finish is before start")


def _task(t: TaskIn) -> Task:
    return Task(t.id, t.work, dict(t.costs) if t.costs is not None else None, frozenset(t.requires),
                TaskStatus(t.status.value), t.group, t.start, t.finish)


def _edges(edges: Sequence[EdgeIn], task_ids: set[str], out: Problems) -> tuple[Edge, ...]:
    seen: set[tuple[str, str]] = set()
    result = []
    for i, e in enumerate(edges):
        for end, tid in (("from", e.source), ("to", e.target)):
            if tid not in task_ids:
                out.add(("edges", i, end), f"unknown task {tid!r}", "unknown")
        if e.source == e.target:
            out.add(("edges", i), f"task {e.source!r} cannot depend on itself", "cycle")
        if (e.source, e.target) in seen:
            out.add(("edges", i), f"duplicate edge {e.source!r} -> {e.target!r}", "duplicate")
        seen.add((e.source, e.target))
        result.append(Edge(e.source, e.target, e.data))
    return tuple(result)


def _check_graph(p: DagProblem, locs: Sequence[Loc], from_workflow: bool, out: Problems) -> None:
    index = {t.id: i for i, t in enumerate(p.tasks)}
    succs: list[list[int]] = [[] for _ in p.tasks]
    for e in p.edges:
        succs[index[e.src]].append(index[e.dst])
    cycle = find_cycle(len(p.tasks), succs)
    if cycle:
        names = " -> ".join(repr(p.tasks[v].id) for v in [*cycle, cycle[0]])
        out.add(("workflow",) if from_workflow else ("edges",), f"the tasks form a cycle: {names}", "cycle")
        return
    group_index = {g.id: r for r, g in enumerate(p.groups)}
    for t, loc in zip(p.tasks, locs, strict=True):
        row = cost_row(t, p.groups)
        if not (row < float("inf")).any():
            out.add(loc, _cannot_run(t, p.groups), "no_group")
        elif t.status == TaskStatus.RUNNING and row[group_index[t.group]] == float("inf"):  # type: ignore[index]
            out.add((*loc, "group"), f"task {t.id!r} is running on group {t.group!r}, which cannot run it")
    _check_progress(p, index, locs, out)


def overdue_warnings(p: DagProblem) -> list[str]:
    """Running tasks already past their expected end (start + cost on their group): the plan lets them
    end at `now`, which is the earliest they can, and says so."""
    out = []
    group_index = {g.id: r for r, g in enumerate(p.groups)}
    for t in p.tasks:
        if t.status != TaskStatus.RUNNING:
            continue
        expected = t.start + float(cost_row(t, p.groups)[group_index[t.group]])  # type: ignore[index,operator]
        if expected < p.now:
            out.append(f"task {t.id!r} was expected to end at {expected} and is still running at now "
                       f"({p.now}): planned as ending at now, so its successors may start later than planned")
    return out


def _cannot_run(t: Task, groups: Sequence[Group]) -> str:
    if t.costs is not None:
        return f"no group can run task {t.id!r}: its `costs` name no group"
    offered = sorted({lab for g in groups for lab in g.labels})
    return (f"no group can run task {t.id!r}: it needs {sorted(t.requires)}, and no single group has "
            f"all of them (labels offered: {offered})")


def _check_progress(p: DagProblem, index: dict[str, int], locs: Sequence[Loc], out: Problems) -> None:
    """A done task's inputs are done; a running task's inputs are done; no group over its slots."""
    for e in p.edges:
        u, v = p.tasks[index[e.src]], p.tasks[index[e.dst]]
        if v.status != TaskStatus.PENDING and u.status != TaskStatus.DONE:
            out.add((*locs[index[v.id]], "status"), f"task {v.id!r} is {v.status.value} but its "
                    f"predecessor {u.id!r} is {u.status.value}; it must be done first")
    running = Counter(t.group for t in p.tasks if t.status == TaskStatus.RUNNING)
    for g in p.groups:
        if running[g.id] > g.slots:
            out.add(("groups",), f"group {g.id!r} runs {running[g.id]} tasks but has {g.slots} slots")


def _from_wfformat(wf: WfInstance, progress: Sequence[ProgressIn],
                   out: Problems) -> tuple[list[TaskIn], list[EdgeIn], list[Loc]]:
    """Tasks and edges of a WfFormat instance; each task's errors point at its progress entry when it
    has one, else at the instance's task."""
    spec, execution = wf.workflow.specification, wf.workflow.execution
    loc: Loc = ("workflow", "workflow")
    runtime = {t.id: t.runtimeInSeconds for t in execution.tasks}
    size = {f.id: f.sizeInBytes for f in spec.files}
    done = {p.id: (i, p) for i, p in enumerate(progress)}
    tasks, locs = [], []
    for i, t in enumerate(spec.tasks):
        if t.id not in runtime:
            out.add((*loc, "specification", "tasks", i), f"task {t.id!r} has no runtimeInSeconds in "
                    "workflow.execution.tasks", "missing")
        j, p = done.get(t.id, (None, None))
        locs.append(("progress", j) if j is not None else (*loc, "specification", "tasks", i))
        tasks.append(TaskIn(id=t.id, work=runtime.get(t.id, 0.0),
                            **({"status": p.status, "group": p.group, "start": p.start,
                                "finish": p.finish} if p else {})))
    known = {t.id for t in spec.tasks}
    for pid, (i, _) in done.items():
        if pid not in known:
            out.add(("progress", i, "id"), f"unknown task {pid!r}", "unknown")
    return tasks, _wf_edges(spec, size, known, loc, out), locs


def _wf_edges(spec: WfSpecification, size: dict[str, float], known: set[str], loc: Loc,
              out: Problems) -> list[EdgeIn]:
    """Parent/child links from both sides, deduplicated; data = files written by one and read by the other."""
    links: dict[tuple[str, str], None] = {}
    for i, t in enumerate(spec.tasks):
        for field, others in (("parents", t.parents), ("children", t.children)):
            for j, o in enumerate(others):
                if o not in known:
                    out.add((*loc, "specification", "tasks", i, field, j), f"unknown task {o!r}", "unknown")
                else:
                    links[(o, t.id) if field == "parents" else (t.id, o)] = None
    outputs = {t.id: set(t.outputFiles) for t in spec.tasks}
    inputs = {t.id: set(t.inputFiles) for t in spec.tasks}
    return [EdgeIn(source=u, target=v, data=sum(size.get(f, 0.0) for f in outputs[u] & inputs[v]))
            for u, v in links]


def _default_groups(wf: WfInstance, warnings: list[str]) -> list[GroupIn]:
    machines = wf.workflow.execution.machines
    if not machines:
        warnings.append("the workflow names no machine and no groups were given: planned on one group "
                        "'local' with one slot")
        return [GroupIn(id="local")]
    counts = Counter(m.nodeName for m in machines)
    dup = [n for n, c in counts.items() if c > 1]
    if dup:
        warnings.append(f"machines listed more than once were merged: {sorted(dup)}")
    seen: dict[str, GroupIn] = {}
    for m in machines:
        seen.setdefault(m.nodeName, GroupIn(id=m.nodeName, slots=min(m.cpu.coreCount, 4096)))
    return list(seen.values())


def plan_to_wire(req: DagPlanRequest, result: DagResult, timing: dict[str, float],
                 warnings: list[str]) -> DagPlanResponse:
    c, plan = result.compiled, result.plan
    tasks, groups = c.problem.tasks, c.problem.groups
    on_path = set(result.critical)
    return DagPlanResponse(
        algorithm=req.algorithm,
        used=plan.algorithm,
        now=result.now,
        makespan=result.makespan,
        search=_search(result),
        finish=plan.finish,
        makespans=result.makespans,
        skipped=result.skipped,
        total_budget_s=result.budget_s,
        lower_bound=result.bound,
        tasks=[TaskPlanOut(id=tasks[p.task].id, group=groups[p.group].id, slot=p.slot, start=p.start,
                           finish=p.finish, status=STATUS_OUT[p.status],
                           static_level=float(c.static_level[p.task]), critical=p.task in on_path)
               for p in plan.placements],
        groups=[g.id for g in groups],
        critical_path=[tasks[v].id for v in result.critical],
        steps=_steps(plan, tasks, groups) if req.explain else None,
        warnings=warnings,
        timing_ms=timing,
    )


def _search(result: DagResult) -> SearchOut | None:
    s = result.search
    if s is None:
        return None
    return SearchOut(budget_s=s.budget_s, ms=s.seconds * 1e3, before=s.before, after=s.after, gain=s.gain,
                     moves=s.moves, evaluations=s.evaluations, restarts=result.restarts)


def _steps(plan: Plan, tasks: Sequence[Task], groups: Sequence[Group]) -> list[StepOut]:
    out = []
    for s in plan.steps:
        runner = None
        if s.runner_up_task is not None and s.runner_up_group is not None and s.runner_up_score is not None:
            runner = RunnerUpOut(task=tasks[s.runner_up_task].id, group=groups[s.runner_up_group].id,
                                 score=s.runner_up_score)
        out.append(StepOut(task=tasks[s.task].id, group=groups[s.group].id, score=s.score, start=s.start,
                           runner_up=runner))
    return out

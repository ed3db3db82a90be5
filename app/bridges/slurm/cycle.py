"""One bridge cycle (read, convert, decide, apply) and the loop that repeats it.

A cycle that cannot read or decide changes nothing; a command that fails is logged and the rest
go on; the next cycle starts from a fresh read. One job's or node's inconsistent reading never
skips a cycle: it is set aside with its reason (`sane`, and a 422 naming pending jobs is asked
again without them). Released jobs are reconciled first (`reconcile`). A job is pinned to its
nodes, recorded as started, then released (the cycle's starts in one command), and never released
twice by one decision; a release that fails is taken back.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from app.bridges.slurm.apply import Plan, Start, plan, release, started
from app.bridges.slurm.cached import CachedCluster
from app.bridges.slurm.failsafe import Heartbeat
from app.bridges.slurm.read import SlurmView, priority_factors, read
from app.bridges.slurm.reconcile import START_BOUND_S, hold, reconcile, refused_jobs, unpin
from app.bridges.slurm.runner import Runner, SlurmError
from app.bridges.slurm.sane import set_aside
from app.bridges.slurm.service import ClusterLostError, Decide, RefusedError
from app.bridges.slurm.state import BridgeState
from schemas.schedule import ScheduleRequest, ScheduleResponse

log = logging.getLogger("hpcsched.slurm")
RELEASE_BATCH = 200
POLL_S = 0.25  # how often the loop looks at Slurm's job counters between cycles
FACTORS_EVERY = 6  # cycles between two reads of parked jobs' priority factors (`sprio`)
EMPTY = ScheduleResponse.model_construct(starts=[], reservations=[], migrations=[], pending=[], priorities=[])


def _validated(build: Callable[[], ScheduleRequest]) -> ScheduleRequest:
    """The request `build` makes; a pending job the wire refuses is a RefusedError naming it."""
    try:
        return build()
    except ValidationError as exc:
        raise RefusedError([{"loc": ["body", *e["loc"]], "msg": e["msg"], "type": e["type"]}
                            for e in exc.errors(include_url=False)]) from exc


@dataclass
class CycleReport:
    ok: bool = True
    timing_ms: dict[str, float] = field(default_factory=dict)
    started: list[str] = field(default_factory=list)
    commands: int = 0
    errors: list[str] = field(default_factory=list)
    aside: dict[str, str] = field(default_factory=dict)
    view: SlurmView | None = None
    response: ScheduleResponse | None = None


@dataclass
class Bridge:
    runner: Runner
    decide: Decide
    state: BridgeState
    policy: dict[str, Any] | None = None
    dry_run: bool = False
    events: Path | None = None
    cache: CachedCluster | None = None
    start_bound_s: float = START_BOUND_S
    hook: Callable[[str], None] = lambda step: None
    heartbeat: Heartbeat | None = None  # beaten after each completed cycle (not in shadow mode)
    poll_s: float = POLL_S
    factors_every: int = FACTORS_EVERY  # 0: never read Slurm's priority factors
    factors: dict[str, dict[str, float]] = field(default_factory=dict)
    factors_age: int = -1  # cycles since `factors` were read (-1: never)

    def cycle(self) -> CycleReport:
        """One read-decide-apply round; never raises for Slurm's or the service's failures (`hook`,
        called after each step, may: a test stops a cycle there as a kill would)."""
        rep = CycleReport()
        t0 = time.perf_counter()
        try:
            text = self.runner.read()
            tr = time.perf_counter()
            view = read(text, self.state.started, self.dry_run, self.state.layouts)
            self.hook("read")
            t1 = time.perf_counter()
            self._reconcile(view, rep)
            self._with_factors(view)
            resp = self._decision(view, rep) if view.pending else None
            t2 = time.perf_counter()
        except Exception as exc:  # noqa: BLE001 - a cycle never dies: log, skip, start fresh next time
            return self._failed(rep, f"{type(exc).__name__}: {exc}")
        rep.view, rep.response = view, resp
        rep.timing_ms = {"read": (tr - t0) * 1e3, "convert": (t1 - tr) * 1e3, "decide": (t2 - t1) * 1e3}
        self.state.forget_gone(set(view.comments))
        if resp is not None:
            self._note(view, resp)
        if not self.dry_run:
            self._apply(plan(resp or EMPTY, view, self.state.held_again), rep)
        rep.timing_ms["apply"] = (time.perf_counter() - t2) * 1e3
        self.state.save()
        if self.heartbeat is not None and not self.dry_run:
            self.heartbeat.completed(rep.errors, decided=resp is not None)
        self.event("cycle", cache=self.cache.last_write if self.cache else None,
                    timing_ms=rep.timing_ms, pending=len(view.pending), running=len(view.running),
                    skipped=view.skipped, aside=rep.aside, started=rep.started, errors=rep.errors,
                    dry_run=self.dry_run)
        return rep

    def _failed(self, rep: CycleReport, msg: str) -> CycleReport:
        log.error("cycle skipped: %s", msg)
        rep.ok = False
        rep.errors.append(msg)
        self.event("cycle_failed", error=msg)
        return rep

    def _reconcile(self, view: SlurmView, rep: CycleReport) -> None:
        """Released jobs Slurm has not started: release again the ones still held (the bridge
        stopped before its release), hold again and unpin the ones overdue (see `reconcile`)."""
        if self.dry_run:
            return
        todo = reconcile(view, self.state.started, self.start_bound_s)
        if todo.release_again:
            ok = self._run(release(todo.release_again), rep)
            self.event("released_again", jobs=todo.release_again, ok=ok)
        for jid in todo.never_pinned:
            self.state.take_back(jid)
        for jid, why in todo.overdue.items():
            self._hold_again(view, jid, why, rep)
        self._unpin_left(view, rep)
        self.hook("reconciled")

    def _unpin_left(self, view: SlurmView, rep: CycleReport) -> None:
        """Held jobs left on a pin the bridge never released (`read.left_pinned`): unpinned, then
        decided with the rest; one that cannot be unpinned waits for the next cycle."""
        for jid in view.left_pinned:
            ok = self._run(unpin(jid), rep)
            self.event("unpinned", job=jid, ok=ok)
            if not ok:
                view.pending = [p for p in view.pending if p["id"] != jid]

    def _with_factors(self, view: SlurmView) -> None:
        """Each parked job's priority factors as Slurm weighed them (`sprio`: age, fairshare, job
        size, partition, QOS, nice), read at most once every `factors_every` cycles and only while
        jobs are parked; a failed read keeps the last ones (the total priority is read every cycle)."""
        if not view.parked or self.factors_every <= 0:
            return
        if self.factors_age < 0 or self.factors_age >= self.factors_every - 1:
            try:
                self.factors = priority_factors(self.runner.priority_factors())
                self.factors_age = 0
            except SlurmError as exc:
                self.event("factors_failed", error=str(exc))
                self.factors_age = 0
        else:
            self.factors_age += 1
        parked = set(view.parked)
        for p in view.pending:
            if p["id"] in parked and p["id"] in self.factors:
                p["priority_factors"] = self.factors[p["id"]]

    def _hold_again(self, view: SlurmView, jid: str, why: str, rep: CycleReport) -> None:
        """Hold, unpin, then forget the release (so a kill in between leaves it released again, or
        decided again, never stuck); its nodes are freed in this view and it is decided again."""
        if not self._run(hold(jid), rep):
            return
        unpinned = self._run(unpin(jid), rep)
        self.state.take_back(jid, why)
        self.state.save()
        view.running = [r for r in view.running if r["id"] != jid]
        back = view.released[jid].job
        if back is not None and unpinned:  # still pinned: next cycle's read finds it `left_pinned`
            view.pending.append(back)
        self.event("held_again", job=jid, reason=why)
        log.warning("job %s: %s", jid, why)

    def _decision(self, view: SlurmView, rep: CycleReport) -> ScheduleResponse | None:
        """Set aside what the read cannot say, then ask; a request the service refuses for some
        pending jobs is asked again without them, as often as it names more (a 422 lists its first
        100 problems: 300 refused jobs take three refusals), and a cached cluster it lost (or
        answered from another version) is PUT and asked again, all in this cycle."""
        rep.aside.update(set_aside(view))
        while view.pending:  # each refusal sets aside at least one job (`_refused`), so this ends
            try:
                return self._ask(view)
            except RefusedError as exc:
                self._refused(view, exc, rep)
        return None

    def _refused(self, view: SlurmView, exc: RefusedError, rep: CycleReport) -> None:
        bad = refused_jobs(exc.details, view)
        if not bad:
            raise exc
        for jid, why in bad.items():
            view.aside[jid] = rep.aside[jid] = view.skipped[jid] = why
            log.warning("set aside %s: %s", jid, why)
        view.pending = [p for p in view.pending if p["id"] not in bad]

    def _ask(self, view: SlurmView) -> ScheduleResponse:
        if self.cache is None:
            return self.decide(_validated(lambda: view.request(self.policy)))
        for _ in range(2):
            try:
                resp = self.decide(_validated(lambda: self.cache.request(view, self.policy)))  # type: ignore[union-attr]
            except ClusterLostError as exc:
                self.event("cluster_lost", error=str(exc))
                self.cache.forget()  # type: ignore[union-attr]
                continue
            if resp.summary.cluster_version == self.cache.version:  # type: ignore[union-attr]
                return resp
            self.event("stale_answer", got=resp.summary.cluster_version, want=self.cache.version)  # type: ignore[union-attr]
            self.cache.forget()  # type: ignore[union-attr]
        raise RuntimeError("the service lost the cluster or answered from another version twice: not applied")

    def _note(self, view: SlurmView, resp: ScheduleResponse) -> None:
        """Keep each pending or reserved job's priority and reason for `explain`; log the plan."""
        prio = {p.job_id: p for p in resp.priorities}
        for p in resp.pending:
            f = prio.get(p.job_id)
            self.state.explain[p.job_id] = {
                "at": view.now, "reason": p.reason.value, "estimated_start": p.estimated_start,
                "detail": p.detail, "queue": p.queue, "priority": f.priority if f else None,
                "rank": f.rank if f else None, "factors": f.factors if f else {}}
        for r in resp.reservations:
            f = prio.get(r.job_id)
            self.state.explain[r.job_id] = {
                **self.state.explain.get(r.job_id, {}), "at": view.now, "reason": "reserved",
                "reserved_start": r.start_time, "reserved_nodes": r.node_ids, "queue": r.queue,
                "priority": f.priority if f else None, "rank": f.rank if f else None,
                "factors": f.factors if f else {}}
        for jid, why in view.aside.items():
            self.state.explain[jid] = {"at": view.now, "reason": "set_aside", "detail": why}
        for s in resp.starts:
            self.event("plan_start", job=s.job_id, nodes=s.node_ids, kind=s.kind.value, queue=s.queue,
                        expected_end=s.expected_end, dry_run=self.dry_run)
        for r in resp.reservations:
            self.event("plan_reservation", job=r.job_id, nodes=r.node_ids, start=r.start_time,
                        end=r.end_time, dry_run=self.dry_run)

    def _apply(self, todo: Plan, rep: CycleReport) -> None:
        for jid, why in todo.deferred.items():
            self.event("deferred", job=jid, reason=why)
        fresh = [s for s in todo.starts if s.job_id not in self.state.started]
        failed = self._run_all([s.pin() for s in fresh], rep)
        pinned = [s for i, s in enumerate(fresh) if i not in failed]
        self.hook("pinned")
        notes = dict(self.state.held_again)  # the release forgets them: kept for the comments
        self._release(pinned, rep)
        self._run_all([c for m in todo.moves for c in m.commands()] +
                      [c for t in todo.comments + started(rep.started, notes) for c in t.commands()], rep)
        self.hook("applied")

    def _release(self, pinned: list[Start], rep: CycleReport) -> None:
        """Record the pinned jobs as started, then release them in batches; a batch Slurm refuses is
        retried job by job (releasing a released job does nothing), and a job whose own release
        fails is taken back."""
        now = time.time()
        for s in pinned:
            self.state.release(s.job_id, now, dict(s.layout))
        self.state.save()
        self.hook("state_saved")
        for i in range(0, len(pinned), RELEASE_BATCH):
            batch = pinned[i:i + RELEASE_BATCH]
            if self._run(release([s.job_id for s in batch]), rep):
                done = batch
            else:
                done = [s for s in batch if self._run(release([s.job_id]), rep)]
            for s in batch:
                if s in done:
                    rep.started.append(s.job_id)
                    self.event("start", job=s.job_id, nodes=list(s.nodes), partition=s.partition,
                                cpus=dict(s.layout))
                else:
                    self.state.take_back(s.job_id)
        self.hook("released")

    def _run(self, args: list[str], rep: CycleReport) -> bool:
        rep.commands += 1
        try:
            self.runner.run(args)
            return True
        except SlurmError as exc:
            log.warning("skipped: %s", exc)
            rep.errors.append(str(exc))
            self.event("command_failed", args=args, error=str(exc))
            return False

    def _run_all(self, commands: list[list[str]], rep: CycleReport) -> set[int]:
        """The commands in as few round trips as the runner can (one scontrol process for the
        pins); the indexes of the ones that failed, each logged as `_run` logs one."""
        if not commands:
            return set()
        rep.commands += len(commands)
        failed = self.runner.run_all(commands)
        for i, error in failed.items():
            log.warning("skipped: %s", error)
            rep.errors.append(error)
            self.event("command_failed", args=commands[i], error=error)
        return set(failed)

    def event(self, event: str, **data: Any) -> None:
        """One JSON line in the `--log` file (when there is one)."""
        if self.events is None:
            return
        with self.events.open("a") as f:
            f.write(json.dumps({"t": time.time(), "event": event, **data}) + "\n")

    def loop(self, interval_s: float, cycles: int | None = None,
             done: Callable[[CycleReport], bool] = lambda rep: False, wake: bool = True,
             sleep: Callable[[float], None] = time.sleep) -> None:
        """Cycle, then wait at most `interval_s`. With `wake`, the next cycle starts as soon as the
        controller's job counters (a job submitted, started or ended) differ from what they were
        just before the last cycle read Slurm (polled every `poll_s`; a submit during a cycle is
        not missed), but never sooner than that cycle took (the bridge cycles at most half the
        time, however busy the queue)."""
        n = 0
        while cycles is None or n < cycles:
            mark = self._counters() if wake else None
            t0 = time.monotonic()
            rep = self.cycle()
            n += 1
            if done(rep) or (cycles is not None and n >= cycles):
                return
            self._wait(interval_s, mark, sleep, time.monotonic() - t0)

    def _wait(self, interval_s: float, mark: str | None, sleep: Callable[[float], None],
              busy_s: float) -> None:
        waited, poll = 0.0, min(self.poll_s, interval_s)
        while waited < interval_s:
            if mark is not None and waited >= min(busy_s, interval_s) and self._counters() != mark:
                self.event("wake", after_s=waited)
                return
            sleep(poll)
            waited += poll

    def _counters(self) -> str | None:
        try:
            return self.runner.changes()
        except SlurmError:
            return None

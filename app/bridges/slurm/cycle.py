"""One bridge cycle (read, convert, decide, apply) and the loop that repeats it.

A cycle that cannot read or decide changes nothing; a command that fails is logged and the rest
go on; the next cycle starts from a fresh read. A job is pinned to its nodes, recorded as started,
then released (the cycle's starts in one command), and never released again; a release that
fails is taken back.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.bridges.slurm.apply import Plan, Start, plan, release
from app.bridges.slurm.cached import CachedCluster
from app.bridges.slurm.failsafe import Heartbeat
from app.bridges.slurm.read import SlurmView, read
from app.bridges.slurm.runner import Runner, SlurmError
from app.bridges.slurm.service import Decide
from app.bridges.slurm.state import BridgeState
from schemas.schedule import ScheduleResponse

log = logging.getLogger("hpcsched.slurm")
RELEASE_BATCH = 200


@dataclass
class CycleReport:
    ok: bool = True
    timing_ms: dict[str, float] = field(default_factory=dict)
    started: list[str] = field(default_factory=list)
    commands: int = 0
    errors: list[str] = field(default_factory=list)
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
    heartbeat: Heartbeat | None = None  # beaten after each completed cycle (not in shadow mode)

    def cycle(self) -> CycleReport:
        """One read-decide-apply round; never raises for Slurm's or the service's failures."""
        rep = CycleReport()
        t0 = time.perf_counter()
        try:
            text = self.runner.read()
            t1 = time.perf_counter()
            view = read(text, self.state.started, take_unheld=self.dry_run)
            req = self.cache.request(view, self.policy) if self.cache else view.request(self.policy)
            t2 = time.perf_counter()
            resp = self.decide(req) if view.pending else None
            t3 = time.perf_counter()
        except Exception as exc:  # noqa: BLE001 - a cycle never dies: log, skip, start fresh next time
            return self._failed(rep, f"{type(exc).__name__}: {exc}")
        rep.view, rep.response = view, resp
        rep.timing_ms = {"read": (t1 - t0) * 1e3, "convert": (t2 - t1) * 1e3, "decide": (t3 - t2) * 1e3}
        self.state.forget_gone(set(view.comments))
        if resp is not None:
            self._note(view, resp)
            if not self.dry_run:
                self._apply(plan(resp, view), rep)
        rep.timing_ms["apply"] = (time.perf_counter() - t3) * 1e3
        self.state.save()
        if self.heartbeat is not None and not self.dry_run:
            self.heartbeat.completed(rep.errors, decided=resp is not None)
        self._event("cycle", cache=self.cache.last_write if self.cache else None,
                    timing_ms=rep.timing_ms, pending=len(view.pending), running=len(view.running),
                    skipped=view.skipped, started=rep.started, errors=rep.errors, dry_run=self.dry_run)
        return rep

    def _failed(self, rep: CycleReport, msg: str) -> CycleReport:
        log.error("cycle skipped: %s", msg)
        rep.ok = False
        rep.errors.append(msg)
        self._event("cycle_failed", error=msg)
        return rep

    def _note(self, view: SlurmView, resp: ScheduleResponse) -> None:
        """Keep each pending job's priority and reason for `explain`; log the plan."""
        prio = {p.job_id: p for p in resp.priorities}
        for p in resp.pending:
            f = prio.get(p.job_id)
            self.state.explain[p.job_id] = {
                "at": view.now, "reason": p.reason.value, "estimated_start": p.estimated_start,
                "detail": p.detail, "queue": p.queue, "priority": f.priority if f else None,
                "rank": f.rank if f else None, "factors": f.factors if f else {}}
        for s in resp.starts:
            self._event("plan_start", job=s.job_id, nodes=s.node_ids, kind=s.kind.value, queue=s.queue,
                        expected_end=s.expected_end, dry_run=self.dry_run)
        for r in resp.reservations:
            self._event("plan_reservation", job=r.job_id, nodes=r.node_ids, start=r.start_time,
                        end=r.end_time, dry_run=self.dry_run)

    def _apply(self, todo: Plan, rep: CycleReport) -> None:
        pinned = [s for s in todo.starts if s.job_id not in self.state.started and self._run(s.pin(), rep)]
        self._release(pinned, rep)
        for args in [c for m in todo.moves for c in m.commands()] + \
                [c for t in todo.comments for c in t.commands()]:
            self._run(args, rep)

    def _release(self, pinned: list[Start], rep: CycleReport) -> None:
        """Record the pinned jobs as started, then release them in batches; a batch Slurm refuses is
        retried job by job (releasing a released job does nothing), and a job whose own release
        fails is taken back."""
        now = time.time()
        self.state.started.update({s.job_id: now for s in pinned})
        self.state.save()
        for i in range(0, len(pinned), RELEASE_BATCH):
            batch = pinned[i:i + RELEASE_BATCH]
            if self._run(release([s.job_id for s in batch]), rep):
                done = batch
            else:
                done = [s for s in batch if self._run(release([s.job_id]), rep)]
            for s in batch:
                if s in done:
                    rep.started.append(s.job_id)
                    self._event("start", job=s.job_id, nodes=list(s.nodes), partition=s.partition)
                else:
                    del self.state.started[s.job_id]

    def _run(self, args: list[str], rep: CycleReport) -> bool:
        rep.commands += 1
        try:
            self.runner.run(args)
            return True
        except SlurmError as exc:
            log.warning("skipped: %s", exc)
            rep.errors.append(str(exc))
            self._event("command_failed", args=args, error=str(exc))
            return False

    def _event(self, event: str, **data: Any) -> None:
        if self.events is None:
            return
        with self.events.open("a") as f:
            f.write(json.dumps({"t": time.time(), "event": event, **data}) + "\n")

    def loop(self, interval_s: float, cycles: int | None = None,
             done: Callable[[CycleReport], bool] = lambda rep: False, wake: bool = True,
             sleep: Callable[[float], None] = time.sleep) -> None:
        """Cycle, then wait `interval_s`; with `wake`, less when the controller's job counters move
        (a job submitted, started or ended; polled each second, never two cycles within 2 s)."""
        n = 0
        while cycles is None or n < cycles:
            rep = self.cycle()
            n += 1
            if done(rep) or (cycles is not None and n >= cycles):
                return
            self._wait(interval_s, wake, sleep)

    def _wait(self, interval_s: float, wake: bool, sleep: Callable[[float], None]) -> None:
        mark = self._counters() if wake else None
        waited, poll = 0.0, min(1.0, interval_s)
        while waited < interval_s:
            sleep(poll)
            waited += poll
            if mark is not None and waited >= min(2.0, interval_s) and self._counters() != mark:
                self._event("wake", after_s=waited)
                return

    def _counters(self) -> str | None:
        try:
            return self.runner.changes()
        except SlurmError:
            return None

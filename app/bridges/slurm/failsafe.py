"""Fail-safe and rollback: Slurm schedules on its own when the bridge stops.

The bridge writes a heartbeat (the epoch second of its last completed cycle) to a file; the
recipe's job_submit.lua reads it at each submission and holds nothing once it is missing or
older than the grace. `hand_back` gives Slurm's own scheduler every job the bridge holds: the
watchdog calls it when the heartbeat is stale, `hpcsched slurm handback` on demand.

A hand-back, per pending job the bridge controls, in an order that leaves no job stranded if it
is interrupted at any point:
1. a job the bridge pinned (`ReqNodeList`, its comment the pin's or the start's) is unpinned;
2. a job held by the recipe (marked, priority 0) is released; one it parked (in a down partition,
   `PARK` in the recipe) is moved back to the partition(s) it asked for;
3. its mark becomes `hpcsched:handed-back`, so no later bridge takes it for its own.
A job interrupted after 2 is released (or back in its partition) and still marked: Slurm may start
it, and a bridge reads such a job as not its own; the next hand-back rewrites the mark.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from importlib import resources
from pathlib import Path
from typing import Any

import httpx

from app.bridges.slurm.apply import release
from app.bridges.slurm.read import BRIDGE_PINS, COMMENT_PREFIX, HANDED_BACK, MARK, job_records, parked
from app.bridges.slurm.runner import Runner, SlurmError

log = logging.getLogger("hpcsched.slurm")
DEFAULT_HEARTBEAT = Path("/var/lib/hpcsched/heartbeat")
DEFAULT_GRACE_S = 300
HANDED_BACK_COMMENT = f"{COMMENT_PREFIX}handed back to Slurm's own scheduler"
BATCH = 200
_HEARTBEAT_LINE = re.compile(r'^local HEARTBEAT = "(.*)"$', re.M)
_GRACE_LINE = re.compile(r"^local GRACE_S = (\d+)$", re.M)
_PARK_LINE = re.compile(r'^local PARK = "(.*)"$', re.M)


def recipe_text() -> str:
    """The job_submit.lua shipped with the package, as it is."""
    return resources.files("app.bridges.slurm").joinpath("job_submit.lua").read_text()


def render(text: str, heartbeat: Path | None, grace_s: int, park: str | None = None) -> str:
    """`text` (a job_submit.lua) with its heartbeat path and grace set; `heartbeat=None` turns the
    fail-safe off (every job held, whatever the bridge does); `park`, when given, the partition new
    jobs are parked in ("": held at priority 0)."""
    if grace_s < 1:
        raise ValueError(f"grace {grace_s}: must be at least 1 second")
    path = "" if heartbeat is None else str(heartbeat)
    if '"' in path or "\\" in path or "\n" in path:
        raise ValueError(f"heartbeat path {path!r}: no quotes, backslashes or newlines")
    if park and not re.fullmatch(r"[A-Za-z0-9_.-]+", park):
        raise ValueError(f"parking partition {park!r}: a partition name (letters, digits, _ . -)")
    text, n = _HEARTBEAT_LINE.subn(lambda m: f'local HEARTBEAT = "{path}"', text, count=1)
    text, k = _GRACE_LINE.subn(f"local GRACE_S = {grace_s}", text, count=1)
    if n != 1 or k != 1:
        raise ValueError("not hpcsched's job_submit.lua: no HEARTBEAT or GRACE_S line")
    if park is not None:
        text, n = _PARK_LINE.subn(f'local PARK = "{park}"', text, count=1)
        if n != 1:
            raise ValueError("this job_submit.lua cannot park jobs: no PARK line")
    return text


def recipe_settings(text: str) -> tuple[Path | None, int]:
    """The heartbeat path (None: fail-safe off) and grace an installed recipe uses."""
    path, grace = _HEARTBEAT_LINE.search(text), _GRACE_LINE.search(text)
    if path is None or grace is None:
        raise ValueError("not hpcsched's job_submit.lua: no HEARTBEAT or GRACE_S line")
    return (Path(path.group(1)) if path.group(1) else None), int(grace.group(1))


@dataclass
class Heartbeat:
    """The file the bridge touches after each completed cycle and the recipe and watchdog read."""

    path: Path
    grace_s: float = DEFAULT_GRACE_S
    probe: Callable[[], bool] = lambda: True  # the service answers (asked on cycles with no decision)

    def age(self, now: float | None = None) -> float | None:
        """Seconds since the last completed cycle; None when the file is missing or unreadable."""
        try:
            beat = float(self.path.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None
        return (time.time() if now is None else now) - beat

    def stale(self, now: float | None = None) -> bool:
        """What the recipe decides: no heartbeat, or one older than the grace (to the second, as
        Lua's os.time())."""
        age = self.age(now)
        return age is None or int(age) > self.grace_s

    def beat(self, now: float | None = None) -> None:
        """Record a completed cycle: its epoch second (all the recipe reads), then who wrote it
        (process id and host); atomically, readable by slurmctld's user."""
        now = time.time() if now is None else now
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        tmp.write_text(f"{int(now)} {os.getpid()} {socket.gethostname()}\n")
        tmp.chmod(0o644)
        os.replace(tmp, self.path)

    def completed(self, errors: list[str], decided: bool) -> None:
        """After a completed cycle: beat, saying when the bridge comes back after the grace (Slurm
        then scheduled on its own and the watchdog may have handed its jobs back). A cycle that
        asked the service nothing (no pending job) beats only if the service answers `probe`:
        otherwise a dead service would pass for alive on an idle (or just handed-back) queue, and
        new jobs would be held again with no one to decide them."""
        if not decided and not self.probe():
            errors.append("the service does not answer: no heartbeat")
            return
        if self.stale():
            age = self.age()
            log.warning("resuming control: last completed cycle %s; jobs submitted meanwhile are "
                        "Slurm's, new ones are held again", "never" if age is None else f"{age:.0f} s ago")
        try:
            self.beat()
        except OSError as exc:
            msg = f"heartbeat {self.path}: {exc} (the recipe will stop holding jobs)"
            log.error(msg)
            errors.append(msg)

    def writer_alive(self) -> bool | None:
        """Whether the process that wrote the heartbeat still runs: None when it cannot be told
        (no heartbeat, or written on another host)."""
        try:
            _, pid, host = self.path.read_text().split()[:3]
        except (OSError, ValueError):
            return None
        if host != socket.gethostname():
            return None
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return False
        except (PermissionError, ValueError):
            return True
        return True

    def stop(self) -> None:
        """Remove the heartbeat: the recipe stops holding new jobs at once."""
        self.path.unlink(missing_ok=True)


def service_probe(service: object, timeout_s: float = 5.0) -> Callable[[], bool]:
    """Whether the service answers: its `/readyz` over HTTP (the cache store too); in process,
    always."""
    client = getattr(service, "client", None)
    if not isinstance(client, httpx.Client):
        return lambda: True

    def ready() -> bool:
        try:
            return client.get("/readyz", timeout=timeout_s).status_code == 200
        except httpx.HTTPError:
            return False
    return ready


@dataclass
class Controlled:
    """The pending jobs the bridge controls, from one read of Slurm's jobs (either reader's text)."""

    held: list[str] = field(default_factory=list)      # held by the recipe: to release
    pinned: list[str] = field(default_factory=list)    # pinned by the bridge: to unpin
    marked: list[str] = field(default_factory=list)    # every marked one: to mark handed back
    parked: dict[str, list[str]] = field(default_factory=dict)  # parked, by the partitions they asked

    @classmethod
    def of(cls, jobs_text: str) -> Controlled:
        out = cls()
        for j in job_records(jobs_text):
            if j.get("job_state") == "PENDING":
                out.add(j)
        return out

    def add(self, j: dict[str, Any]) -> None:
        jid = str(j["job_id"])
        if (j.get("comment") or "").startswith(BRIDGE_PINS) and j.get("required_nodes"):
            self.pinned.append(jid)
        if MARK in (j.get("admin_comment") or ""):
            self.marked.append(jid)
            if j.get("priority", 0) == 0:
                self.held.append(jid)
            if home := parked(j):
                self.parked.setdefault(home, []).append(jid)


@dataclass
class HandBack:
    """What a hand-back did."""

    released: list[str] = field(default_factory=list)
    unparked: list[str] = field(default_factory=list)
    unpinned: list[str] = field(default_factory=list)
    marked: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def summary(self) -> str:
        return (f"{len(self.released)} released, {len(self.unparked)} unparked, "
                f"{len(self.unpinned)} unpinned, {len(self.marked)} marked handed back, "
                f"{len(self.errors)} errors")


def hand_back(runner: Runner, proceed: Callable[[], bool] = lambda: True) -> HandBack:
    """Give every pending job the bridge controls to Slurm's own scheduler, unpinned. Idempotent:
    a second call finds nothing to do. Slurm errors are collected, not raised (a job refused
    one by one is skipped); a failed read raises SlurmError. `proceed` is asked before each
    command: the watchdog stops when the bridge beats again (any step left undone leaves a job
    the bridge reads as its own or as Slurm's, never stranded)."""
    todo = Controlled.of(runner.read().jobs)
    done = HandBack()
    steps = [(todo.pinned, unpin, done.unpinned), (todo.held, release, done.released)]
    steps += [(ids, partial(unpark, home), done.unparked) for home, ids in todo.parked.items()]
    steps += [(todo.marked, mark_handed_back, done.marked)]
    for ids, command, into in steps:
        if ids and not proceed():
            done.errors.append("stopped: the bridge completed a cycle again")
            break
        into += _each(runner, ids, command, done.errors, proceed)
    return done


def unpin(ids: list[str]) -> list[str]:
    return ["scontrol", "update", f"JobId={','.join(ids)}", "ReqNodeList=", f"Comment={HANDED_BACK_COMMENT}"]


def unpark(home: str, ids: list[str]) -> list[str]:
    """Back to the partition(s) the jobs asked for, where Slurm's scheduler starts them."""
    return ["scontrol", "update", f"JobId={','.join(ids)}", f"Partition={home}"]


def mark_handed_back(ids: list[str]) -> list[str]:
    return ["scontrol", "update", f"JobId={','.join(ids)}", f"AdminComment={HANDED_BACK}",
            f"Comment={HANDED_BACK_COMMENT}"]


def _each(runner: Runner, ids: list[str], command: Callable[[list[str]], list[str]], errors: list[str],
          proceed: Callable[[], bool]) -> list[str]:
    """Run `command` on `ids` in batches while `proceed()`; a refused batch is retried job by job
    (a job that ended meanwhile is refused alone). The ids it succeeded on."""
    ok: list[str] = []
    for i in range(0, len(ids), BATCH):
        if i and not proceed():
            errors.append("stopped: the bridge completed a cycle again")
            return ok
        batch = ids[i:i + BATCH]
        if _run(runner, command(batch), errors):
            ok += batch
        else:
            ok += [j for j in batch if _run(runner, command([j]), errors)]
    return ok


def _run(runner: Runner, args: list[str], errors: list[str]) -> bool:
    try:
        runner.run(args)
        return True
    except SlurmError as exc:
        log.warning("hand-back: %s", exc)
        errors.append(str(exc))
        return False


@dataclass
class Watch:
    """One watchdog check: the heartbeat's age and, when stale, what was handed back."""

    age: float | None
    handed: HandBack | None = None

    def line(self) -> str:
        seen = "no heartbeat" if self.age is None else f"last completed cycle {self.age:.0f} s ago"
        if self.handed is None:
            return f"bridge alive: {seen}"
        done = self.handed
        if not (done.released or done.unparked or done.unpinned or done.marked or done.errors):
            return f"bridge stopped ({seen}): nothing of the bridge's left to hand back"
        return f"bridge stopped ({seen}): handed back to Slurm: {done.summary()}"


def check(runner: Runner, heartbeat: Heartbeat) -> Watch:
    """Hand back the bridge's jobs when its heartbeat is stale; otherwise do nothing."""
    if not heartbeat.stale():
        return Watch(heartbeat.age())
    handed = hand_back(runner, heartbeat.stale)
    return Watch(heartbeat.age(), handed)

"""The one place the bridge talks to Slurm: read its state, run one command.

`CommandRunner` calls the Slurm client programs; `rest.RestRunner` goes through slurmrestd where it
can; `RecordedRunner` answers reads from recorded
text and records the commands it is given (a cycle replayed in a benchmark or a test).
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Protocol

from app.bridges.slurm import compact
from app.bridges.slurm.read import SPRIO, SlurmText

READS = {
    "nodes": ["sinfo", "-N", "--json"],
    "jobs": ["squeue", "--json"],
    "reservations": ["scontrol", "show", "-o", "reservation"],
}
SLURM_PLAN = ["squeue", "--start", "-h", "-t", "PD", "-o", "%i %S %N %r"]
COUNTERS = ("Jobs submitted", "Jobs started", "Jobs completed", "Jobs canceled", "Jobs failed")


def job_counters(sdiag: str) -> str:
    """The controller's job counters from `sdiag` (one RPC, ~40 ms): they move when a job is
    submitted, starts or ends, so a change means a cycle is worth running early."""
    values = {}
    for line in sdiag.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in COUNTERS:
            values[key.strip()] = value.strip()
    return "/".join(values.get(k, "?") for k in COUNTERS)


DETAILS_ONE_BY_ONE = 64  # more new jobs than this: one `scontrol show job` of them all


def _detail_key(state: str, start: int) -> tuple[bool, int]:
    """When a job's scontrol line must be read again: once it holds nodes (a requeued job again)."""
    holding = state != "PENDING"
    return holding, start if holding else 0


class SlurmError(RuntimeError):
    """A Slurm command failed or did not answer."""


class Reader(Protocol):
    """Where a cycle reads Slurm's state: the client programs (`CommandRunner`), slurmrestd
    (`rest.RestReader`) or a recording; every one gives the same `SlurmText`."""

    def read(self) -> SlurmText: ...


class Runner(Reader, Protocol):
    """A reader that also runs the bridge's commands and reads Slurm's own plan and job counters."""

    def slurm_plan(self) -> str: ...
    def priority_factors(self) -> str: ...
    def run(self, args: list[str]) -> None: ...
    def run_all(self, commands: list[list[str]]) -> dict[int, str]: ...
    def changes(self) -> str: ...


def one_by_one(run: Callable[[list[str]], None], commands: list[list[str]],
               only: list[int] | None = None) -> dict[int, str]:
    """Each command (of the indexes `only`, default all) run alone: {index: error} of the ones
    that failed."""
    failed = {}
    for i in range(len(commands)) if only is None else only:
        try:
            run(commands[i])
        except SlurmError as exc:
            failed[i] = str(exc)
    return failed


def stdin_line(args: list[str]) -> str | None:
    """An `scontrol` command as a line of scontrol's own input, or None when it cannot be one
    (scontrol splits its input at blanks and keeps quotes in values: a comment with blanks)."""
    if len(args) < 2 or args[0] != "scontrol" or any(not a or re.search(r'[\s"\']', a) for a in args[1:]):
        return None
    return " ".join(args[1:])


@dataclass
class CommandRunner:
    """Slurm's client programs, with `SLURM_CONF` from `conf` (or the environment's). `compact`:
    jobs read as squeue's text plus each job's scontrol line once (`compact`), not as JSON."""

    conf: str | None = None
    timeout_s: float = 60.0
    compact: bool = True
    details: dict[str, tuple[tuple[bool, int], str]] = field(default_factory=dict)

    def _env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        return dict(os.environ, **(extra or {}), **({"SLURM_CONF": self.conf} if self.conf else {}))

    def _call(self, args: list[str], stdin: str | None = None, extra: dict[str, str] | None = None) -> str:
        try:
            out = subprocess.run(args, env=self._env(extra), capture_output=True, text=True,
                                 timeout=self.timeout_s, input=stdin)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SlurmError(f"{args[0]}: {exc}") from exc
        if out.returncode != 0 and stdin is None:
            raise SlurmError(f"{' '.join(args[:4])}: exit {out.returncode}: {out.stderr.strip()[:300]}")
        return out.stdout

    def read(self) -> SlurmText:
        """The three reads at once (each a process of its own, so they overlap)."""
        now = time.time()
        reads = dict(READS, jobs=compact.SQUEUE, nodes=compact.SCONTROL_NODES) if self.compact else READS
        with ThreadPoolExecutor(len(reads)) as pool:
            futures = {k: pool.submit(self._call, cmd, None, compact.SQUEUE_ENV if k == "jobs" else None)
                       for k, cmd in reads.items()}
            texts = {k: f.result() for k, f in futures.items()}
        if self.compact:
            texts["jobs"] = self._with_details(texts["jobs"])
            texts["nodes"] = f"{compact.NODES_HEADER}\n{texts['nodes']}"
        return SlurmText(texts["nodes"], texts["jobs"], texts["reservations"], now)

    def _with_details(self, squeue: str) -> str:
        """squeue's text and the scontrol line of every job that needs one, the new ones read now
        (one scontrol process; every job's at once when many are new)."""
        want = {j: _detail_key(state, start) for j, (state, start) in compact.states(squeue).items()
                if compact.needs_details(state)}
        new = [j for j, key in want.items() if self.details.get(j, ((False, -1), ""))[0] != key]
        if new:
            args = ["scontrol", "-d", "-o", "show", "job"]
            text = self._call(args) if len(new) > DETAILS_ONE_BY_ONE else \
                self._call(["scontrol", "-d", "-o"], "".join(f"show job {j}\n" for j in new))
            for line in text.splitlines():
                jid = line[6:].split(" ", 1)[0] if line.startswith("JobId=") else ""
                if jid in want:
                    self.details[jid] = (want[jid], compact.reduced(line))
        self.details = {j: v for j, v in self.details.items() if j in want}
        lines = "".join(line + "\n" for _, line in self.details.values())
        return f"{compact.HEADER}\n{squeue}{compact.DETAILS}\n{lines}"

    def slurm_plan(self) -> str:
        return self._call(SLURM_PLAN)

    def priority_factors(self) -> str:
        """`sprio`'s weighted factors of the jobs Slurm ranks (one RPC; held jobs are not listed)."""
        return self._call(SPRIO)

    def run(self, args: list[str]) -> None:
        self._call(args)

    def changes(self) -> str:
        return job_counters(self._call(["sdiag"]))

    def run_all(self, commands: list[list[str]]) -> dict[int, str]:
        """Every command, the `scontrol` ones without blanks fed to ONE scontrol process on its
        input (one process for thousands of pins, not one each); {index: error}
        of the ones that failed. scontrol names the job of each failed update ("... for job N");
        when it fails without naming them all, the commands it did not name are run again one by
        one (pins, releases and comments can be applied twice), so no failure goes unseen."""
        lines = {i: stdin_line(c) for i, c in enumerate(commands)}
        batch = [i for i, line in lines.items() if line is not None]
        alone = [i for i in lines if i not in batch]
        failed = one_by_one(self.run, commands, alone)
        if len(batch) < 2:
            return failed | one_by_one(self.run, commands, batch)
        failed.update(self._fed(commands, batch))
        return failed

    def _fed(self, commands: list[list[str]], batch: list[int]) -> dict[int, str]:
        text = "".join(stdin_line(commands[i]) + "\n" for i in batch)  # type: ignore[operator]
        try:
            out = subprocess.run(["scontrol"], input=text + "quit\n", env=self._env(), capture_output=True,
                                 text=True, timeout=self.timeout_s + len(batch) * 0.5)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return {i: f"scontrol (fed {len(batch)} commands): {exc}" for i in batch}
        if out.returncode == 0:
            return {}
        named, unnamed = failed_jobs(out.stderr)
        failed = {i: f"scontrol {' '.join(commands[i][1:3])}: {named[j]}"
                  for i in batch for j in command_jobs(commands[i]) if j in named}
        if unnamed or not named:  # an error scontrol did not tie to a job: ask each command again
            again = [i for i in batch if i not in failed]
            failed.update(one_by_one(self.run, commands, again))
        return failed


def failed_jobs(stderr: str) -> tuple[dict[str, str], list[str]]:
    """scontrol's error lines: {job: error} for the ones naming their job, and the others."""
    named, unnamed = {}, []
    for line in stderr.splitlines():
        m = re.search(r"^(.*?)\s+for job\s+(\S+)\s*$", line.strip())
        if m:
            named[m.group(2)] = m.group(1)
        elif line.strip():
            unnamed.append(line.strip())
    return named, unnamed


def command_jobs(args: list[str]) -> list[str]:
    """The jobs an `scontrol update JobId=...` or `scontrol release|hold IDS` names."""
    for a in args[2:]:
        if a.startswith("JobId="):
            return a.removeprefix("JobId=").split(",")
    return args[2].split(",") if len(args) > 2 and args[1] in ("release", "hold") else []


@dataclass
class RecordedRunner:
    """Reads answered from recorded text; commands recorded, not run (`fail` may refuse one)."""

    text: SlurmText
    plan: str = ""
    factors: str = ""  # what `sprio` printed
    commands: list[list[str]] = field(default_factory=list)
    fail: Callable[[list[str]], bool] = lambda args: False
    counters: Callable[[], str] = lambda: ""
    batches: int = 0  # run_all calls: one scontrol process each on a real controller

    def read(self) -> SlurmText:
        return self.text

    def slurm_plan(self) -> str:
        return self.plan

    def priority_factors(self) -> str:
        return self.factors

    def changes(self) -> str:
        return self.counters()

    def run(self, args: list[str]) -> None:
        self.commands.append(list(args))
        if self.fail(args):
            raise SlurmError(f"{' '.join(args[:3])}: refused (recorded runner)")

    def run_all(self, commands: list[list[str]]) -> dict[int, str]:
        self.batches += 1
        return one_by_one(self.run, commands)

"""The one place the bridge talks to Slurm: read its state, run one command.

`CommandRunner` calls the Slurm client programs; `rest.RestRunner` goes through slurmrestd where it
can; `RecordedRunner` answers reads from recorded
text and records the commands it is given (a cycle replayed in a benchmark or a test).
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from app.bridges.slurm.read import SlurmText

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


class SlurmError(RuntimeError):
    """A Slurm command failed or did not answer."""


class Reader(Protocol):
    """Where a cycle reads Slurm's state: the client programs (`CommandRunner`), slurmrestd
    (`rest.RestReader`) or a recording; every one gives the same `SlurmText`."""

    def read(self) -> SlurmText: ...


class Runner(Reader, Protocol):
    """A reader that also runs the bridge's commands and reads Slurm's own plan and job counters."""

    def slurm_plan(self) -> str: ...
    def run(self, args: list[str]) -> None: ...
    def changes(self) -> str: ...


@dataclass
class CommandRunner:
    """Slurm's client programs, with `SLURM_CONF` from `conf` (or the environment's)."""

    conf: str | None = None
    timeout_s: float = 60.0

    def _call(self, args: list[str]) -> str:
        env = dict(os.environ)
        if self.conf:
            env["SLURM_CONF"] = self.conf
        try:
            out = subprocess.run(args, env=env, capture_output=True, text=True, timeout=self.timeout_s)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SlurmError(f"{args[0]}: {exc}") from exc
        if out.returncode != 0:
            raise SlurmError(f"{' '.join(args[:4])}: exit {out.returncode}: {out.stderr.strip()[:300]}")
        return out.stdout

    def read(self) -> SlurmText:
        now = time.time()
        texts = {k: self._call(cmd) for k, cmd in READS.items()}
        return SlurmText(texts["nodes"], texts["jobs"], texts["reservations"], now)

    def slurm_plan(self) -> str:
        return self._call(SLURM_PLAN)

    def run(self, args: list[str]) -> None:
        self._call(args)

    def changes(self) -> str:
        return job_counters(self._call(["sdiag"]))


@dataclass
class RecordedRunner:
    """Reads answered from recorded text; commands recorded, not run (`fail` may refuse one)."""

    text: SlurmText
    plan: str = ""
    commands: list[list[str]] = field(default_factory=list)
    fail: Callable[[list[str]], bool] = lambda args: False
    counters: Callable[[], str] = lambda: ""

    def read(self) -> SlurmText:
        return self.text

    def slurm_plan(self) -> str:
        return self.plan

    def changes(self) -> str:
        return self.counters()

    def run(self, args: list[str]) -> None:
        self.commands.append(list(args))
        if self.fail(args):
            raise SlurmError(f"{' '.join(args[:3])}: refused (recorded runner)")

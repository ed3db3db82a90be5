"""A throw-away Slurm on this host: its own munged, slurmctld and one slurmd per node, in a temp dir.

Nothing here reads the system's Slurm configuration or talks to a munged or Slurm it did not
start: every command is run with SLURM_CONF pointing at the temp dir's slurm.conf, which names its
own munge socket.
"""

from __future__ import annotations

import getpass
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import pytest

from app.bridges.slurm.failsafe import render

BINARIES = ("munged", "slurmctld", "slurmd", "scontrol", "squeue", "sbatch", "sinfo")


def missing_binaries() -> list[str]:
    """The Slurm/munge programs this harness needs that are not on PATH."""
    return [b for b in BINARIES if shutil.which(b) is None]


# the marks of a test module that starts a real Slurm: slow, and skipped where Slurm is missing
NEEDS_SLURM = [pytest.mark.slow,
               pytest.mark.skipif(bool(missing_binaries()), reason=f"Slurm/munge not installed: "
                                  f"{missing_binaries()} (.ci/run installs slurm-wlm munge)")]


@dataclass(frozen=True)
class NodeSpec:
    name: str
    cpus: int = 8
    mem_mib: int = 16_000
    features: tuple[str, ...] = ()
    weight: int = 1
    gpus: int = 0  # GRES gpu count, at most len(FAKE_GPU_DEVICES)


# slurmd's gpu plugin drops a GPU without a device file and wants a character device: these stand in
# for the GPUs (Slurm only looks at them; with task/none nothing is bound to them).
FAKE_GPU_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/urandom")


@dataclass(frozen=True)
class PartitionSpec:
    name: str
    nodes: tuple[str, ...]
    default: bool = False


@dataclass
class LocalSlurm:
    """One slurmctld and a slurmd per node, all on loopback, all under `root`."""

    root: Path
    nodes: list[NodeSpec]
    partitions: list[PartitionSpec]
    job_submit_lua: Path | None = None
    # the recipe's fail-safe: the heartbeat file it reads and its grace; None: off (every job held)
    heartbeat: Path | None = None
    grace_s: int = 300
    park: str = ""  # the recipe's PARK: a State=DOWN partition of every node new jobs wait in
    priority_conf: tuple[str, ...] = ("PriorityType=priority/basic",)
    scheduler: str = "sched/backfill"
    sched_params: str = "bf_interval=5"
    jwt: bool = False  # also accept JWTs (AuthAltTypes=auth/jwt, key in the temp dir): `token()`
    extra_conf: tuple[str, ...] = ()  # more slurm.conf lines (`Licenses=lic:1`, ...)
    accounting: tuple[str, ...] = ("AccountingStorageType=accounting_storage/none",)
    # run after munged and slurm.conf, before slurmctld (a slurmdbd the controller registers with)
    before_controller: Callable[[LocalSlurm], None] | None = None
    ctld: int = -1  # slurmctld's index in `procs` (-1: not started)
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    logs: list[IO[bytes]] = field(default_factory=list)

    @property
    def conf(self) -> Path:
        return self.root / "slurm.conf"

    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def run(self, *args: str, check: bool = True, timeout: float = 30) -> str:
        out = subprocess.run(args, env=self.env(), capture_output=True, text=True, timeout=timeout)
        if check and out.returncode != 0:
            raise RuntimeError(f"{' '.join(args)}: {out.returncode} {out.stderr.strip()}")
        return out.stdout

    def start(self, timeout_s: float = 90) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self._start_munge()
        self._write_conf()
        if self.before_controller is not None:
            self.before_controller(self)
        self.ctld = len(self.procs)
        self._spawn("slurmctld", "-D", "-i")
        self._wait(lambda: self.run("scontrol", "ping", check=False).find("UP") >= 0, timeout_s, "slurmctld")
        for n in self.nodes:
            self._spawn("slurmd", "-D", "-N", n.name)
        self._wait(self._all_idle, timeout_s, "slurmd nodes idle")

    def stop_controller(self, kill: bool = True) -> None:
        """slurmctld stopped (`kill -9`, or `scontrol shutdown slurmctld`), the slurmds left running."""
        ctld = self.procs[self.ctld]
        if kill:
            ctld.send_signal(signal.SIGKILL)
        else:
            self.run("scontrol", "shutdown", "slurmctld")
        ctld.wait(timeout=60)

    def start_controller(self, timeout_s: float = 90) -> None:
        """slurmctld started again on the same slurm.conf and StateSaveLocation (it recovers its
        jobs from there), in the stopped one's place."""
        self._spawn("slurmctld", "-D")
        self.procs[self.ctld] = self.procs.pop()
        self._wait(lambda: self.run("scontrol", "ping", check=False).find("UP") >= 0, timeout_s, "slurmctld")

    def start_rest(self, listen: str, auth: str = "rest_auth/local", timeout_s: float = 30) -> None:
        """A slurmrestd of this cluster listening on `listen` (`unix:/path` in the temp dir, or
        `127.0.0.1:port`), stopped with the rest. As root it needs SLURMRESTD_SECURITY=
        disable_user_check (slurmrestd refuses root otherwise); the test's user is then root too.
        With `rest_auth/jwt` it passes each request's token on to slurmctld (SLURM_JWT=daemon)."""
        extra = {"SLURMRESTD_SECURITY": "disable_user_check"} if os.geteuid() == 0 else {}
        if auth == "rest_auth/jwt":
            extra["SLURM_JWT"] = "daemon"
        self._spawn("slurmrestd", "-a", auth, "-s", "openapi/v0.0.38", listen, extra=extra)
        if listen.startswith("unix:"):
            self._wait(Path(listen.removeprefix("unix:")).exists, timeout_s, "slurmrestd socket")
        else:
            host, _, port = listen.rpartition(":")
            self._wait(lambda: _accepts(host, int(port)), timeout_s, "slurmrestd port")

    def token(self, user: str, lifespan_s: int = 3600) -> str:
        """A JWT for `user` from `scontrol token` (needs `jwt=True`; Slurm refuses a JWT of root or
        SlurmUser, so this is another user's)."""
        out = self.run("scontrol", "token", f"username={user}", f"lifespan={lifespan_s}")
        return out.strip().removeprefix("SLURM_JWT=")

    def stop(self) -> None:
        try:
            self._cancel_jobs()
        except (RuntimeError, subprocess.TimeoutExpired):
            pass  # a controller that does not answer: its daemons are stopped all the same
        for p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in reversed(self.procs):
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.procs.clear()
        for f in self.logs:
            f.close()
        self.logs.clear()

    def _cancel_jobs(self, timeout_s: float = 20) -> None:
        """Cancel every job and wait until none runs: a batch job still running when its slurmd
        stops would leave its slurmstepd and script behind (a benchmark's `sleep 3600`)."""
        if self.ctld < 0 or any(p.poll() is not None for p in self.procs[:self.ctld + 1]):
            return  # munged or slurmctld gone: nothing to ask
        self.run("scancel", "-u", getpass.getuser(), check=False)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and self.run("squeue", "-h", "-t", "R,CG", check=False).strip():
            time.sleep(0.5)

    def spawn(self, *args: str, extra: dict[str, str] | None = None) -> None:
        """A process of this cluster (its output in the temp dir), stopped with the rest."""
        self._spawn(*args, extra=extra)

    def wait_for(self, ok: Callable[[], bool], timeout_s: float, what: str) -> None:
        self._wait(ok, timeout_s, what)

    def _spawn(self, *args: str, extra: dict[str, str] | None = None) -> None:
        log = open(self.root / f"{args[0]}-{len(self.procs)}.out", "wb")  # noqa: SIM115
        self.logs.append(log)
        self.procs.append(subprocess.Popen(args, env={**self.env(), **(extra or {})}, stdout=log,
                                           stderr=subprocess.STDOUT, start_new_session=True))

    def _start_munge(self) -> None:
        key = self.root / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        self._spawn("munged", "-F", "--force", f"--key-file={key}", f"--socket={self.socket}",
                    f"--pid-file={self.root / 'munged.pid'}", f"--log-file={self.root / 'munged.log'}",
                    f"--seed-file={self.root / 'munged.seed'}")
        self._wait(self.socket.exists, 20, "munged socket")

    @property
    def socket(self) -> Path:
        return self.root / "munge.sock"

    def _all_idle(self) -> bool:
        out = self.run("sinfo", "-h", "-N", "-o", "%N %t", check=False)
        states = dict(line.split() for line in out.splitlines() if line.strip())
        return len(states) == len(self.nodes) and all(s == "idle" for s in states.values())

    def _wait(self, ok: object, timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if ok():  # type: ignore[operator]
                return
            for p in self.procs:
                if p.poll() is not None:
                    raise RuntimeError(f"{p.args[0]} exited ({p.returncode}) waiting for {what}; "
                                       f"see {self.root}")
            time.sleep(0.2)
        raise RuntimeError(f"timed out waiting for {what}; see {self.root}")

    def _write_conf(self) -> None:
        ports = free_ports(len(self.nodes) + 1)
        host = socket.gethostname().split(".")[0]
        r = self.root
        lines = [
            "ClusterName=hpct", f"SlurmctldHost={host}(127.0.0.1)", f"SlurmctldPort={ports[0]}",
            "AuthType=auth/munge", "CredType=cred/munge", f"AuthInfo=socket={self.socket}",
            "SlurmUser=root", "SlurmdUser=root", f"StateSaveLocation={r / 'state'}",
            f"SlurmctldPidFile={r / 'slurmctld.pid'}", f"SlurmctldLogFile={r / 'slurmctld.log'}",
            f"SlurmdPidFile={r}/slurmd.%n.pid", f"SlurmdSpoolDir={r}/spool.%n",
            f"SlurmdLogFile={r}/slurmd.%n.log", "SlurmdParameters=config_overrides",
            "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", "MpiDefault=none",
            "JobAcctGatherType=jobacct_gather/none", *self.accounting,
            "JobCompType=jobcomp/none", f"SchedulerType={self.scheduler}",
            "SelectType=select/cons_tres", "SelectTypeParameters=CR_Core_Memory",
            "ReturnToService=2", "MinJobAge=3600", "InactiveLimit=0", "KillWait=2",
            "SlurmctldTimeout=30", "SlurmdTimeout=60", "MessageTimeout=20",
            f"SchedulerParameters={self.sched_params}", *self.priority_conf, *self.extra_conf,
        ]
        if self.jwt:
            key = r / "jwt.key"
            key.write_bytes(os.urandom(32))
            key.chmod(0o600)
            lines += ["AuthAltTypes=auth/jwt", f"AuthAltParameters=jwt_key={key}"]
        if self.job_submit_lua is not None:
            lua = render(self.job_submit_lua.read_text(), self.heartbeat, self.grace_s, self.park)
            (r / "job_submit.lua").write_text(lua)
            lines.append("JobSubmitPlugins=lua")
        if any(n.gpus for n in self.nodes):
            lines.append("GresTypes=gpu")
            self._write_gres_conf()
        for n, port in zip(self.nodes, ports[1:], strict=True):
            feat = f" Feature={','.join(n.features)}" if n.features else ""
            gres = f" Gres=gpu:{n.gpus}" if n.gpus else ""
            lines.append(f"NodeName={n.name} NodeAddr=127.0.0.1 NodeHostname={host} Port={port} "
                         f"CPUs={n.cpus} RealMemory={n.mem_mib} Weight={n.weight}{feat}{gres} State=UNKNOWN")
        for p in self.partitions:
            default = "YES" if p.default else "NO"
            lines.append(f"PartitionName={p.name} Nodes={','.join(p.nodes)} Default={default}"
                         " MaxTime=INFINITE State=UP OverSubscribe=NO")
        if self.park:
            lines.append(f"PartitionName={self.park} Nodes=ALL Default=NO MaxTime=INFINITE State=DOWN "
                         "Hidden=YES")
        (r / "state").mkdir(exist_ok=True)
        self.conf.write_text("\n".join(lines) + "\n")

    def _write_gres_conf(self) -> None:
        """gres.conf beside slurm.conf (where slurmd looks for it): each GPU node's stand-in devices."""
        lines = [f"NodeName={n.name} Name=gpu File={','.join(FAKE_GPU_DEVICES[:n.gpus])}"
                 for n in self.nodes if n.gpus]
        (self.root / "gres.conf").write_text("\n".join(lines) + "\n")


def _accepts(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


def free_ports(count: int) -> list[int]:
    """`count` loopback ports free right now (held open together so they differ)."""
    socks = []
    for _ in range(count):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def submit(slurm: LocalSlurm, *args: str, sleep: int = 3) -> str:
    """A job that records its run in `ran` under the cluster's root (so a second run would show),
    then sleeps; its id."""
    out = slurm.run("sbatch", "--parsable", f"--chdir={slurm.root}", "-o", "/dev/null", "-t", "2", *args,
                    "--wrap", f"echo $SLURM_JOB_ID >> {slurm.root / 'ran'}; sleep {sleep}")
    return out.strip().split(";")[0]

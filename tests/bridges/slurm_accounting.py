"""Slurm accounting for a LocalSlurm: its own mariadbd (data dir, socket and port in the temp dir,
loopback only) and its own slurmdbd, started after munged and before slurmctld, stopped with the
cluster. Nothing here touches a database or slurmdbd the test did not start."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from tests.bridges.slurm_cluster import LocalSlurm, _accepts, free_ports

BINARIES = ("mariadbd", "mariadb-install-db", "slurmdbd", "sacctmgr", "sshare")


def missing_binaries() -> list[str]:
    return [b for b in BINARIES if shutil.which(b) is None]


@dataclass
class Accounting:
    """Give `conf()` as the LocalSlurm's `accounting` and `start` as its `before_controller`."""

    root: Path
    ports: list[int] = field(default_factory=lambda: free_ports(2))  # mariadbd's, slurmdbd's

    def conf(self, slurm_root: Path) -> tuple[str, ...]:
        """slurm.conf's lines for the LocalSlurm in `slurm_root` (its munged's socket is the
        AccountingStoragePass: the commands' way to slurmdbd)."""
        return ("AccountingStorageType=accounting_storage/slurmdbd", "AccountingStorageHost=127.0.0.1",
                f"AccountingStoragePort={self.ports[1]}",
                f"AccountingStoragePass={slurm_root / 'munge.sock'}")

    def start(self, slurm: LocalSlurm) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        data, user = self.root / "data", ["--user=root"] if os.geteuid() == 0 else []
        subprocess.run(["mariadb-install-db", "--no-defaults", f"--datadir={data}", *user,
                        "--auth-root-authentication-method=normal", "--skip-test-db"],
                       capture_output=True, check=True, timeout=120)
        # no grant tables: a server only this test reaches (loopback, a port and socket of its own)
        slurm.spawn("mariadbd", "--no-defaults", f"--datadir={data}", f"--socket={self.root / 'sock'}",
                    f"--port={self.ports[0]}", "--bind-address=127.0.0.1", *user, "--skip-grant-tables",
                    f"--pid-file={self.root / 'mariadbd.pid'}", f"--log-error={self.root / 'mariadbd.err'}")
        slurm.wait_for(lambda: _accepts("127.0.0.1", self.ports[0]), 60, "mariadbd")
        conf = slurm.root / "slurmdbd.conf"  # beside slurm.conf, where slurmdbd looks for it
        conf.write_text("\n".join([
            "AuthType=auth/munge", f"AuthInfo=socket={slurm.socket}", "DbdHost=localhost",
            f"DbdPort={self.ports[1]}", "SlurmUser=root", "StorageType=accounting_storage/mysql",
            "StorageHost=127.0.0.1", f"StoragePort={self.ports[0]}", "StorageUser=root",
            "StorageLoc=hpct_acct", f"PidFile={self.root / 'slurmdbd.pid'}",
            f"LogFile={self.root / 'slurmdbd.log'}"]) + "\n")
        conf.chmod(0o600)
        slurm.spawn("slurmdbd", "-D")
        slurm.wait_for(lambda: _accepts("127.0.0.1", self.ports[1]), 60, "slurmdbd")
        slurm.run("sacctmgr", "-i", "add", "cluster", "hpct")

    def shares(self, slurm: LocalSlurm, accounts: dict[str, int]) -> None:
        """Accounts with these fair-share shares, the test's user in each."""
        user = slurm.run("id", "-un").strip()
        for name, share in accounts.items():
            slurm.run("sacctmgr", "-i", "add", "account", name, f"Fairshare={share}")
            slurm.run("sacctmgr", "-i", "add", "user", user, f"Account={name}")

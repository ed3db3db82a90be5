"""The bridge through slurmrestd (`--slurmrestd URL`): the same reads and commands as the client
programs, over Slurm's REST API (22.05: `/slurm/v0.0.38`).

Reads: nodes, jobs and reservations. In 22.05 slurmrestd's node and job JSON is the same
document `sinfo -N --json` and `squeue --json` print (both come from the v0.0.38 plugin), so
`read.read` takes it unchanged; reservations come as JSON instead of `scontrol show -o` text.

Commands: a partition move, a comment and a release (`hold: false`) go through
`POST /job/{id}`. Pinning a job to its nodes cannot: 22.05 refuses the `required_nodes` key
("Disabled key") and its `nodes` key is a node count, so the pin (`ReqNodeList`, `NumNodes`) is
run with `scontrol`, as without slurmrestd. Slurm's own plan (shadow mode) is read with `squeue`.

Auth: `unix:/path` is a socket slurmrestd serves with `-a rest_auth/local` (it trusts the
connecting process's user); an `http(s)://` URL is sent a JWT (`X-SLURM-USER-NAME`,
`X-SLURM-USER-TOKEN`; `-a rest_auth/jwt`, tokens from `scontrol token`).
"""

from __future__ import annotations

import getpass
import time
from dataclasses import dataclass
from typing import Any

import httpx

from app.bridges.slurm.read import SlurmText
from app.bridges.slurm.runner import COUNTERS, Runner, SlurmError, one_by_one

API = "/slurm/v0.0.38"
READS = {"nodes": "/nodes", "jobs": "/jobs", "reservations": "/reservations"}
DIAG = {"Jobs submitted": "jobs_submitted", "Jobs started": "jobs_started",
        "Jobs completed": "jobs_completed", "Jobs canceled": "jobs_canceled", "Jobs failed": "jobs_failed"}
REST_KEYS = {"Partition": "partition", "Comment": "comment"}


def connect(url: str, token: str | None = None, user: str | None = None,
            timeout_s: float = 60.0) -> httpx.Client:
    """An HTTP client for slurmrestd at `url`: `unix:/path` (local auth) or `http(s)://host:port`
    (JWT auth: `token` is required, `user` defaults to this process's user)."""
    if url.startswith("unix:"):
        transport = httpx.HTTPTransport(uds=url.removeprefix("unix:"))
        return httpx.Client(transport=transport, base_url="http://slurmrestd", timeout=timeout_s)
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"--slurmrestd {url!r}: give unix:/path/to/socket or http(s)://host:port")
    if not token:
        raise ValueError("--slurmrestd over TCP needs a JWT: set SLURM_JWT or give --token-file")
    headers = {"X-SLURM-USER-NAME": user or getpass.getuser(), "X-SLURM-USER-TOKEN": token}
    return httpx.Client(base_url=url, headers=headers, timeout=timeout_s)


@dataclass
class RestReader:
    """Slurm's state from slurmrestd, as the same `SlurmText` the client programs give."""

    http: httpx.Client

    def get(self, path: str) -> httpx.Response:
        try:
            r = self.http.get(API + path)
        except httpx.HTTPError as exc:
            raise SlurmError(f"slurmrestd GET {path}: {exc}") from exc
        _checked(r, f"GET {path}")
        return r

    def read(self) -> SlurmText:
        now = time.time()
        texts = {k: self.get(path).text for k, path in READS.items()}
        return SlurmText(texts["nodes"], texts["jobs"], texts["reservations"], now)


@dataclass
class RestRunner:
    """Reads and what commands it can through slurmrestd; the rest (the pin, Slurm's plan) through
    the client programs of `cli`."""

    reader: RestReader
    cli: Runner

    def read(self) -> SlurmText:
        return self.reader.read()

    def slurm_plan(self) -> str:
        return self.cli.slurm_plan()

    def priority_factors(self) -> str:  # slurmrestd v0.0.38 has no priority factors
        return self.cli.priority_factors()

    def changes(self) -> str:
        stats = self.reader.get("/diag").json().get("statistics") or {}
        return "/".join(str(stats.get(DIAG[k], "?")) for k in COUNTERS)

    def run(self, args: list[str]) -> None:
        updates = rest_updates(args)
        if updates is None:
            self.cli.run(args)
            return
        for job_id, body in updates:
            self.update(job_id, body)

    def run_all(self, commands: list[list[str]]) -> dict[int, str]:
        """What REST can say through it (one keep-alive connection), the rest (the pins) fed to
        the client programs' one scontrol process; {index: error} of the ones that failed."""
        by_cli = [i for i, c in enumerate(commands) if rest_updates(c) is None]
        by_rest = [i for i in range(len(commands)) if i not in set(by_cli)]
        failed = one_by_one(self.run, commands, by_rest)
        if by_cli:
            failed.update({by_cli[k]: e for k, e in self.cli.run_all([commands[i] for i in by_cli]).items()})
        return failed

    def update(self, job_id: str, body: dict[str, Any]) -> None:
        try:
            r = self.reader.http.post(f"{API}/job/{job_id}", json=body)
        except httpx.HTTPError as exc:
            raise SlurmError(f"slurmrestd update job {job_id}: {exc}") from exc
        _checked(r, f"update job {job_id} {sorted(body)}")


def rest_updates(args: list[str]) -> list[tuple[str, dict[str, Any]]] | None:
    """A bridge command as slurmrestd job updates (one per job), or None when REST cannot say
    it: `scontrol release IDS` is `hold: false` per job; `scontrol update JobId=IDS` with only a
    partition and/or comment is the same update per job; anything else (the pin) is None."""
    if args[:2] == ["scontrol", "release"] and len(args) == 3:
        return [(j, {"hold": False}) for j in args[2].split(",")]
    if args[:2] != ["scontrol", "update"]:
        return None
    kv = dict(a.split("=", 1) for a in args[2:])
    ids = kv.pop("JobId", "")
    if not ids or not kv or not set(kv) <= set(REST_KEYS):
        return None
    body = {REST_KEYS[k]: v for k, v in kv.items()}
    return [(j, body) for j in ids.split(",")]


def _checked(r: httpx.Response, what: str) -> dict[str, Any]:
    """The JSON of a slurmrestd answer; SlurmError when it says an error (status or `errors`)."""
    try:
        doc = r.json()
    except ValueError:
        doc = {}
    errors = doc.get("errors") or []
    if r.status_code >= 400 or errors:
        said = "; ".join(str(e.get("description") or e.get("error") or e) for e in errors) or r.text[:300]
        raise SlurmError(f"slurmrestd {what}: HTTP {r.status_code}: {said}")
    return doc

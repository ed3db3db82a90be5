"""What the bridge keeps between cycles, in a small JSON file: the jobs it released (so none is
released twice) with the CPUs per node it expects Slurm to give them, why it held a job again,
and each pending or reserved job's last priority, factors, reason and estimated start (for
`hpcsched slurm explain`).

Where the file is: `--state`, else `$HPCSCHED_SLURM_STATE`, else `hpcsched/slurm-state.json`
under `$XDG_STATE_HOME` (default `~/.local/state`): `run` and `explain` resolve it the same way."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

STATE_ENV = "HPCSCHED_SLURM_STATE"


def state_path(given: Path | None) -> Path:
    """The state file `run` writes and `explain` reads (see the module's doc)."""
    if given is not None:
        return given.expanduser().absolute()
    if os.environ.get(STATE_ENV):
        return Path(os.environ[STATE_ENV]).expanduser().absolute()
    base = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")
    return base / "hpcsched" / "slurm-state.json"


@dataclass
class BridgeState:
    path: Path | None
    started: dict[str, float] = field(default_factory=dict)
    explain: dict[str, dict[str, Any]] = field(default_factory=dict)
    layouts: dict[str, dict[str, int]] = field(default_factory=dict)
    held_again: dict[str, str] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path | None) -> BridgeState:
        if path is None or not path.exists():
            return cls(path)
        data = json.loads(path.read_text())
        return cls(path, {k: float(v) for k, v in data.get("started", {}).items()}, data.get("explain", {}),
                   data.get("layouts", {}), data.get("held_again", {}))

    def save(self) -> None:
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(self.path.suffix + ".tmp")
        tmp.write_text(json.dumps({"started": self.started, "explain": self.explain, "layouts": self.layouts,
                                   "held_again": self.held_again}))
        os.replace(tmp, self.path)

    def release(self, job_id: str, at: float, layout: dict[str, int]) -> None:
        self.started[job_id] = at
        self.layouts[job_id] = layout
        self.held_again.pop(job_id, None)
        self.explain[job_id] = {"at": at, "released": True, "nodes": list(layout), "cpus": layout}

    def take_back(self, job_id: str, why: str | None = None) -> None:
        """The job is no longer released (its release failed, or the bridge held it again)."""
        self.started.pop(job_id, None)
        self.layouts.pop(job_id, None)
        self.explain.pop(job_id, None)
        if why:
            self.held_again[job_id] = why

    def forget_gone(self, alive: set[str]) -> None:
        """Drop jobs Slurm no longer lists (finished, cancelled): their ids will not come back."""
        self.started = {k: v for k, v in self.started.items() if k in alive}
        self.explain = {k: v for k, v in self.explain.items() if k in alive}
        self.layouts = {k: v for k, v in self.layouts.items() if k in alive}
        self.held_again = {k: v for k, v in self.held_again.items() if k in alive}

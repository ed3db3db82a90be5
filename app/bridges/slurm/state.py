"""What the bridge keeps between cycles, in a small JSON file: the jobs it released (so none is
released twice) and each pending job's last priority, factors, reason and estimated start (for
`hpcsched slurm explain`)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class BridgeState:
    path: Path | None
    started: dict[str, float] = field(default_factory=dict)
    explain: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path | None) -> BridgeState:
        if path is None or not path.exists():
            return cls(path)
        data = json.loads(path.read_text())
        return cls(path, {k: float(v) for k, v in data.get("started", {}).items()}, data.get("explain", {}))

    def save(self) -> None:
        if self.path is None:
            return
        tmp = self.path.with_suffix(self.path.suffix + ".tmp")
        tmp.write_text(json.dumps({"started": self.started, "explain": self.explain}))
        os.replace(tmp, self.path)

    def forget_gone(self, alive: set[str]) -> None:
        """Drop jobs Slurm no longer lists (finished, cancelled): their ids will not come back."""
        self.started = {k: v for k, v in self.started.items() if k in alive}
        self.explain = {k: v for k, v in self.explain.items() if k in alive}

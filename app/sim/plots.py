"""Plots of replays (matplotlib, drawn off-screen to PNG files)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from app.sim.replay import ReplayResult  # noqa: E402
from app.sim.workload import Machine  # noqa: E402


def wait_cdf(results: Mapping[str, ReplayResult], path: Path) -> Path:
    """Share of jobs that waited at most x, per policy (log x; waits under 1 s are drawn at 1 s)."""
    fig, ax = plt.subplots(figsize=(8, 5))
    for name, r in results.items():
        waits = np.sort([max(rec.start - rec.job.submit, 1.0) for rec in r.records])
        ax.step(waits, np.arange(1, waits.size + 1) / max(waits.size, 1), where="post", label=name)
    ax.set_xscale("log")
    return _save(fig, ax, "wait (s)", "share of jobs waiting at most this long", path)


def utilisation(results: Mapping[str, ReplayResult], machine: Machine, path: Path, bins: int = 200) -> Path:
    """Busy share of the machine's cores over time, per policy (averaged over `bins` equal spans)."""
    fig, ax = plt.subplots(figsize=(10, 4))
    t0 = min((rec.job.submit for r in results.values() for rec in r.records), default=0.0)
    t1 = max((rec.end for r in results.values() for rec in r.records), default=1.0)
    edges = np.linspace(t0, t1, bins + 1)
    width = edges[1] - edges[0] if t1 > t0 else 1.0
    for name, r in results.items():
        busy = np.zeros(bins)
        for rec in r.records:
            cores = rec.job.cpu * len(rec.nodes)
            lo = np.clip(edges[:-1], rec.start, rec.end)
            hi = np.clip(edges[1:], rec.start, rec.end)
            busy += (hi - lo) * cores
        ax.plot((edges[:-1] - t0) / 86400, busy / (width * machine.cores), label=name, lw=1)
    ax.set_ylim(0, 1.05)
    return _save(fig, ax, "days since the first submission", "utilisation", path)


def _save(fig: Any, ax: Any, xlabel: str, ylabel: str, path: Path) -> Path:
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path

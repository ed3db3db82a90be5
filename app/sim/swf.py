"""The Standard Workload Format (SWF 2.2) of the Parallel Workloads Archive: plain or gzipped.

Header lines start with `;` (`; MaxNodes: 128`, `; Queue: 3 normal ...`); every other non-empty line is
one job of 18 whitespace-separated numbers, -1 meaning unknown. A line that is not that is an error
naming its line number.
"""

from __future__ import annotations

import gzip
import io
import re
from dataclasses import dataclass, field
from pathlib import Path

FIELDS = 18
MAX_VALUE = 1e12  # no real log holds more (seconds, processors, KB); keeps the replay's sums finite


class SwfError(ValueError):
    def __init__(self, line: int, msg: str) -> None:
        self.line = line
        super().__init__(f"line {line}: {msg}")


@dataclass(frozen=True, slots=True)
class SwfJob:
    job_id: str
    submit: float
    wait: float
    run: float
    alloc_procs: int
    used_mem_kb: float  # per processor
    req_procs: int
    req_time: float
    req_mem_kb: float  # per processor
    status: int
    user: int
    group: int
    queue: int
    partition: int

    @property
    def procs(self) -> int:
        """Requested processors, else allocated ones (-1 when neither is known)."""
        return self.req_procs if self.req_procs > 0 else self.alloc_procs


@dataclass(slots=True)
class SwfTrace:
    header: dict[str, str] = field(default_factory=dict)
    queues: dict[int, str] = field(default_factory=dict)
    partitions: dict[int, str] = field(default_factory=dict)
    jobs: list[SwfJob] = field(default_factory=list)

    def header_int(self, key: str) -> int | None:
        value = self.header.get(key, "").split()
        return int(value[0]) if value and value[0].lstrip("-").isdigit() else None


_NAMED = re.compile(r"^\s*(-?\d+)\s+(\S+)")


def _text(source: str | Path | bytes) -> io.TextIOBase:
    if isinstance(source, bytes):
        raw = gzip.decompress(source) if source[:2] == b"\x1f\x8b" else source
        return io.StringIO(raw.decode("utf-8", errors="replace"))
    path = Path(source)
    with path.open("rb") as f:
        gz = f.read(2) == b"\x1f\x8b"
    opener = gzip.open if gz else open
    return opener(path, "rt", encoding="utf-8", errors="replace")  # type: ignore[return-value]


def read_swf(source: str | Path | bytes, limit: int | None = None) -> SwfTrace:
    """Parse a trace (a path, or the file's bytes); `limit` keeps the first N jobs."""
    trace = SwfTrace()
    with _text(source) as lines:
        for number, line in enumerate(lines, start=1):
            if limit is not None and len(trace.jobs) >= limit:
                break
            stripped = line.strip()
            if not stripped:
                continue
            if stripped.startswith(";"):
                _header_line(trace, stripped[1:])
            else:
                trace.jobs.append(_job(number, stripped))
    return trace


def _header_line(trace: SwfTrace, text: str) -> None:
    key, sep, value = text.partition(":")
    if not sep:
        return
    key, value = key.strip(), value.strip()
    named = _NAMED.match(value)
    if key == "Queue" and named:
        trace.queues[int(named.group(1))] = named.group(2)
    elif key == "Partition" and named:
        trace.partitions[int(named.group(1))] = named.group(2)
    else:
        trace.header.setdefault(key, value)


def _job(number: int, line: str) -> SwfJob:
    parts = line.split()
    if len(parts) < FIELDS:
        raise SwfError(number, f"a job line has {FIELDS} fields, this one has {len(parts)}")
    try:
        v = [float(x) for x in parts[:FIELDS]]
    except ValueError as exc:
        raise SwfError(number, f"not a number: {exc}") from exc
    if not all(abs(x) <= MAX_VALUE for x in v):  # also refuses inf and nan
        raise SwfError(number, f"a field is not a finite number within ±{MAX_VALUE:g}")
    return SwfJob(
        job_id=str(int(v[0])), submit=v[1], wait=v[2], run=v[3], alloc_procs=int(v[4]), used_mem_kb=v[6],
        req_procs=int(v[7]), req_time=v[8], req_mem_kb=v[9], status=int(v[10]), user=int(v[11]),
        group=int(v[12]), queue=int(v[14]), partition=int(v[15]),
    )

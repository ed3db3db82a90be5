"""Slurm host lists (`n[1-3,07],gpu1`) to node names and back, without calling `scontrol`."""

from __future__ import annotations

import re

_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")


def expand(text: str) -> list[str]:
    """Every node name a Slurm host list names, in order (`n[1-3],m` -> n1 n2 n3 m)."""
    names: list[str] = []
    for part in _split_top(text.strip()):
        names.extend(_expand_one(part))
    return names


def _split_top(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += {"[": 1, "]": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p for p in parts if p and p != "(null)"]


def _expand_one(part: str) -> list[str]:
    if "[" not in part:
        return [part]
    head, rest = part.split("[", 1)
    body, tail = rest.split("]", 1)
    names: list[str] = []
    for item in body.split(","):
        m = _RANGE.match(item)
        if m is None:
            raise ValueError(f"not a Slurm host list: {part!r}")
        lo, hi = m.group(1), m.group(2) or m.group(1)
        width = len(lo)
        names.extend(f"{head}{i:0{width}d}" for i in range(int(lo), int(hi) + 1))
    return [n + t for n in names for t in _expand_one(tail) or [""]] if tail else names

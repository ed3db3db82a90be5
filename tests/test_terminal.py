"""The commands' tables fold a long value rather than cut it, however narrow the terminal."""

from __future__ import annotations

import io

from rich.console import Console
from rich.table import Table

from app import terminal


def test_a_narrow_table_keeps_every_digit() -> None:
    t = terminal.table("policy", "makespan", "wait_mean")
    t.add_row("conservative-with-a-long-label", "63,025,417", "1,234,567.8")
    out = io.StringIO()
    Console(file=out, width=30).print(t)
    text = out.getvalue()
    assert "…" not in text
    assert sorted(ch for ch in text if ch.isdigit()) == sorted("630254171234567" + "8")  # folded, not cut


def test_the_default_overflow_would_cut_it() -> None:
    """The check above can fail: a plain rich table at that width cuts the value."""
    t = Table("policy", "makespan")
    t.add_row("conservative-with-a-long-label", "63,025,417")
    out = io.StringIO()
    Console(file=out, width=20).print(t)
    assert "…" in out.getvalue()

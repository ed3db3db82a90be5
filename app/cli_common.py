"""What the command lines share: a console as wide as the terminal, tables that never cut a value,
and the options that choose how an SWF log is read."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

Size = Annotated[str, typer.Option(help="allocated | requested: which processor count sizes a job")]
Kill = Annotated[bool, typer.Option(help="kill a job that ran past its requested time there (default: it "
                                         "runs its recorded time; the scheduler is told the request raised "
                                         "to it)")]
UnknownRun = Annotated[str, typer.Option(help="ten_seconds | drop: jobs whose run time is -1")]
ZeroRun = Annotated[str, typer.Option(help="drop | keep: jobs whose run time is 0 s")]


def terminal() -> Console:
    """The terminal's width (or $COLUMNS); when the output is not a terminal, rich's default."""
    return Console()


def tables(title: str, first: str, columns: Sequence[str], rows: Sequence[tuple[str, Sequence[str]]],
           width: int) -> list[Table]:
    """The rows as tables that fit `width` columns: the value columns are split into as many tables as
    it takes, each repeating the first column, so no value is ever cut or folded."""
    def need(i: int | None) -> int:  # a column's width with its padding and border
        cells = [first, *(r[0] for r in rows)] if i is None else [columns[i], *(r[1][i] for r in rows)]
        return max(map(len, cells)) + 3
    groups: list[list[int]] = [[]]
    used = need(None) + 1
    for i in range(len(columns)):
        if groups[-1] and used + need(i) > width:
            groups.append([])
            used = need(None) + 1
        groups[-1].append(i)
        used += need(i)
    out = []
    for k, group in enumerate(groups):
        part = f" ({k + 1}/{len(groups)})" if len(groups) > 1 else ""
        t = Table(title=title + part)
        t.add_column(first, no_wrap=True)
        for i in group:
            t.add_column(columns[i], justify="right", no_wrap=True)
        for name, values in rows:
            t.add_row(name, *[values[i] for i in group])
        out.append(t)
    return out

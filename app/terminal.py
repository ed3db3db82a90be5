"""The console the commands print their tables on: as wide as the terminal, and wide when the output
goes to a file or pipe (no terminal to fit). No value is ever cut: `tables` splits the columns into as
many tables as fit, and a cell too long for its column folds onto the next line."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from rich.console import Console
from rich.table import Table

PIPED_WIDTH = 200  # columns when stdout is not a terminal


def console() -> Console:
    return Console(width=None if sys.stdout.isatty() else PIPED_WIDTH)


def table(*headers: str, title: str | None = None, numeric: bool = True) -> Table:
    """A table whose first column is a label and the others numbers (right-aligned unless not
    `numeric`); every cell folds rather than being cut."""
    t = Table(title=title)
    for i, h in enumerate(headers):
        t.add_column(h, justify="right" if numeric and i else "left", overflow="fold")
    return t


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

"""The console the commands print their tables on: as wide as the terminal, and wide when the output
goes to a file or pipe (no terminal to fit); a cell too long for its column folds onto the next line
instead of being cut, so no number loses digits."""

from __future__ import annotations

import sys

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

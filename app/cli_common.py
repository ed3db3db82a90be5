"""The options every command that reads an SWF log takes to choose how it is read."""

from __future__ import annotations

from typing import Annotated

import typer

Size = Annotated[str, typer.Option(help="allocated | requested: which processor count sizes a job")]
Kill = Annotated[bool, typer.Option(help="kill a job that ran past its requested time there (default: it "
                                         "runs its recorded time; the scheduler is told the request raised "
                                         "to it)")]
UnknownRun = Annotated[str, typer.Option(help="ten_seconds | drop: jobs whose run time is -1")]
ZeroRun = Annotated[str, typer.Option(help="drop | keep: jobs whose run time is 0 s")]

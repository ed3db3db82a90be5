"""The options every command that reads an SWF log takes to choose how it is read."""

from __future__ import annotations

from typing import Annotated

import typer

Size = Annotated[str, typer.Option(help="larger | allocated | requested: which processor count sizes a "
                                        "job (default: the larger of the two, SchedGym's rule)")]
Kill = Annotated[bool, typer.Option(help="kill a job that ran past its requested time there (default: the "
                                         "scheduler is told the request and the job runs its recorded "
                                         "time)")]
RaiseToRun = Annotated[bool, typer.Option(help="tell the scheduler the run time of a job that ran past "
                                               "its request (the request raised to it): a knowledge of the "
                                               "future no scheduler has; off by default")]
UnknownRun = Annotated[str, typer.Option(help="ten_seconds | drop: jobs whose run time is -1")]
ZeroRun = Annotated[str, typer.Option(help="drop | keep: jobs whose run time is 0 s")]

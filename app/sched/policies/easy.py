"""EASY backfilling: the first blocked job of each queue is reserved, the rest backfill around it."""

from __future__ import annotations

from app.sched.params import EasyParams
from app.sched.policies.base import BasePolicy

NAME = "easy"


class EasyPolicy(BasePolicy):
    NAME = NAME
    Params = EasyParams

"""The wire contract exports what it says, and its enums match the core's: nothing unmapped."""

from __future__ import annotations

import schemas
from app.sched.model import NodeState, Reason, StartKind
from schemas.common import NodeState as WireNodeState
from schemas.common import ReasonCode
from schemas.common import StartKind as WireStartKind


def test_all_names_import() -> None:
    """Every name in schemas.__all__ exists."""
    for name in schemas.__all__:
        assert hasattr(schemas, name), name


def test_enums_match_the_core() -> None:
    """Reason codes, node states and start kinds are the same on both sides."""
    assert [m.value for m in ReasonCode] == [m.value for m in Reason]
    assert {m.value for m in WireNodeState} == {m.value for m in NodeState}
    assert {m.value for m in WireStartKind} == {m.value for m in StartKind}

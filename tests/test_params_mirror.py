"""Every policy's wire params carry the core's fields with the core's defaults."""

from __future__ import annotations

import dataclasses

import pytest

from app.convert import params_from_wire
from app.sched.registry import POLICIES
from schemas import policies as wire

WIRE = {
    "fcfs": wire.FcfsPolicy, "firstfit": wire.FirstfitPolicy, "easy": wire.EasyPolicy,
    "conservative": wire.ConservativePolicy, "memory_backfill": wire.MemoryBackfillPolicy,
    "priority": wire.PriorityPolicy,
}


def test_every_policy_has_a_wire_model() -> None:
    """No registered policy is missing on the wire, and no wire policy is unknown to the core."""
    assert set(WIRE) == set(POLICIES)


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_defaults_match(name: str) -> None:
    """The wire defaults convert to exactly the core defaults."""
    core_type = POLICIES[name][0]
    wire_fields = set(WIRE[name].model_fields["params"].annotation.model_fields)
    assert wire_fields == {f.name for f in dataclasses.fields(core_type)}
    assert params_from_wire(WIRE[name](name=name)) == (name, core_type())

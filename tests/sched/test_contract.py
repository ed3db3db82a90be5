"""Every registered policy keeps every invariant on random clusters (tests/invariants.py)."""

from __future__ import annotations

import dataclasses
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.sched.registry import POLICIES, decide
from tests.invariants import check_decision
from tests.strategies import common_params, snapshots_and_jobs


def params_for(name: str, common: dict[str, object], depth: int | None) -> object:
    params_type = POLICIES[name][0]
    fields = {f.name for f in dataclasses.fields(params_type)}
    kw = {k: v for k, v in common.items() if k in fields}
    if depth is not None:
        kw["reservation_depth"] = depth
    return params_type(**kw)


@pytest.mark.parametrize("name", sorted(POLICIES))
@given(case=snapshots_and_jobs(), common=common_params(),
       depth=st.sampled_from([None, 1, 3]), seed=st.integers(0, 2**16))
def test_policy_keeps_every_invariant(name, case, common, depth, seed) -> None:  # noqa: ANN001
    """No over-commit, no delayed reservation, honest reasons; the same answer for any input order."""
    snap, jobs = case
    params = params_for(name, common, depth)
    decision = decide(snap, jobs, name, params)
    assert check_decision(snap, jobs, decision, params.time_grain_s) == []
    shuffled = jobs[:]
    random.Random(seed).shuffle(shuffled)
    nodes = list(snap.nodes)
    random.Random(seed + 1).shuffle(nodes)
    again = decide(dataclasses.replace(snap, nodes=tuple(nodes)), shuffled, name, params)
    assert _canonical(again) == _canonical(decision)


def _canonical(d):  # noqa: ANN001, ANN202
    return (d.starts, d.reservations, d.migrations, sorted(d.pending, key=lambda p: p.job_id),
            d.priorities, d.summary)


@pytest.mark.parametrize("name", ["conservative", "priority", "easy"])
@given(case=snapshots_and_jobs(), common=common_params())
def test_sure_start_fallback_keeps_every_invariant(name, case, common) -> None:  # noqa: ANN001
    """With no candidate instant tried, multi-node jobs take the 'quiet nodes' start: still sound."""
    from unittest import mock

    from app.sched import core

    snap, jobs = case
    params = params_for(name, common, None)
    with mock.patch.object(core, "MAX_INSTANTS_TRIED", 0):
        decision = decide(snap, jobs, name, params)
    assert check_decision(snap, jobs, decision, params.time_grain_s) == []

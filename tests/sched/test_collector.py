"""A decision or replay raises the cycle collector's threshold only while it runs, however they overlap."""

from __future__ import annotations

import gc
import threading

import pytest

from app.sched.collector import REPLAY_THRESHOLD, rare_collections


def test_raised_inside_and_restored_after() -> None:
    before = gc.get_threshold()
    with rare_collections():
        assert gc.get_threshold() == (max(REPLAY_THRESHOLD, before[0]), *before[1:])
    assert gc.get_threshold() == before


def test_restored_when_the_caller_fails() -> None:
    before = gc.get_threshold()
    with pytest.raises(RuntimeError), rare_collections():
        raise RuntimeError("decision failed")
    assert gc.get_threshold() == before


def test_overlapping_callers_restore_only_when_the_last_ends() -> None:
    before = gc.get_threshold()
    first_in, second_done, leave = threading.Event(), threading.Event(), threading.Event()
    seen: list[tuple[int, int, int]] = []

    def first() -> None:
        with rare_collections():
            first_in.set()
            leave.wait(5)

    def second() -> None:
        first_in.wait(5)
        with rare_collections():
            pass
        seen.append(gc.get_threshold())  # the first is still inside: still raised
        second_done.set()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    second_done.wait(5)
    leave.set()
    for t in threads:
        t.join(5)
    assert seen == [(max(REPLAY_THRESHOLD, before[0]), *before[1:])]
    assert gc.get_threshold() == before

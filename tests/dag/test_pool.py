"""`mdl.ReadyPool` (holes, compaction, the block table) chooses what a plain scan of its tasks chooses."""

from __future__ import annotations

from unittest.mock import patch

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from app.sched.dag import mdl

G = 3
SCORES = st.sampled_from([0.0, 1.0, 2.0, 5.0, -np.inf])  # few values: many exact ties
LOW = st.sampled_from([0.0, 1.0, -np.inf])
ADD = st.lists(st.lists(SCORES, min_size=G, max_size=G), min_size=1, max_size=12)  # tasks' base rows
REMOVE = st.tuples(st.just("remove"), st.lists(st.integers(0, 99), min_size=1, max_size=12))  # which ones
OPS = st.lists(st.one_of(st.tuples(st.just("add"), ADD), REMOVE), max_size=40)


def plain_top(rows: dict[int, list[float]]) -> tuple[int, int] | None:
    """(task, group) of the largest score; ties to the lower task, then the lower group."""
    pairs = [(-s, v, r) for v, row in rows.items() for r, s in enumerate(row) if s > -np.inf]
    return min(pairs)[1:] if pairs else None


@settings(max_examples=600)
@given(OPS)
def test_pool_top_equals_a_plain_scan_through_adds_and_removes(ops: list) -> None:
    """Blocks of 2 positions: the block table, holes and compaction all take part."""
    replay(2, ops)


@settings(max_examples=300)
@given(st.lists(st.lists(LOW, min_size=G, max_size=G), min_size=40, max_size=40), OPS)
def test_pool_top_with_the_block_table_on_from_the_start(first: list, ops: list) -> None:
    """Blocks of 8 after 40 tasks scoring low: the table is on, and an add of 5 to 8 tasks at once
    (which may score higher) raises its blocks' best column by column."""
    replay(8, [("add", first), *ops])


def replay(block: int, ops: list) -> None:
    """Apply the adds and removes to a pool with blocks of `block` positions, checking `top` after each."""
    with patch.object(mdl, "BLOCK", block):
        pool = mdl.ReadyPool(G)
        rows: dict[int, list[float]] = {}
        nxt = 0
        for kind, arg in ops:
            if kind == "add":
                tasks = list(range(nxt, nxt + len(arg)))
                nxt += len(arg)
                base = np.array(arg)
                zeros = np.zeros_like(base)
                pool.add(tasks, base, zeros, np.where(base > -np.inf, 1.0, np.inf), zeros)
                rows.update(zip(tasks, arg, strict=True))
            else:
                for k in arg:
                    if rows:
                        v = sorted(rows)[k % len(rows)]
                        pool.remove(pool.position[v])
                        del rows[v]
                        check(pool, rows)
            check(pool, rows)


def check(pool: mdl.ReadyPool, rows: dict[int, list[float]]) -> None:
    assert pool.count == len(rows)
    p, r = pool.top()
    assert (None if p < 0 else (int(pool.task[p]), r)) == plain_top(rows)

"""Modified dynamic level (docs/methods.md §6, seed 004): choose the (task, group) pair together.

    MDL(v, R) = L(v) − EST(v, R) + Δ(v, R),   Δ(v, R) = C̄(v) − C(v, R)

L(v) is the transfer-aware level: the longest path from v to an exit counting each task at its mean
cost and each edge at its mean transfer (HEFT's upward rank). EST(v, R) is the earliest start of v on
R: once its inputs can be there (t_d, fixed once v is ready) on any slot of R, in an idle gap between
tasks already placed when one is long enough, else at the slot's end (`slots.GroupSlots`).

The part that never changes, L(v) + C̄(v) − C(v, R), is computed once per task (`base`). Placing a
task on R only takes idle time from R, so only column R of the MDL matrix can change, and only
downwards: the planner refreshes that column, recomputes the best pair of the tasks whose best was
on R, and takes the largest. Each step costs O(ready + tasks touched × G) in a few vector
operations, not O(ready × G) pairs scored one by one.

Ties: the lower task index (request order), then the lower group index — what `argmax` gives.
Within a group the task takes the slot where it starts earliest; among equals one where it fills an
idle gap, else the slot that became free last (best fit), keeping earlier-free slots for tasks whose
data arrive sooner.
"""

from __future__ import annotations

import numpy as np

from app.sched.dag.graph import Compiled
from app.sched.dag.heft import upward_rank
from app.sched.dag.model import Late, Plan, Step, check
from app.sched.dag.slots import GroupSlots
from app.sched.dag.state import PlanState
from app.sched.dag.wave import LastWave, bounds, settled, settled_exactly

NAME = "mdl"


def base_matrix(c: Compiled) -> np.ndarray:
    """L(v) + C̄(v) − C(v, R); −inf where R cannot run v."""
    return upward_rank(c)[:, None] + c.mean_cost[:, None] - c.cost


def durations(c: Compiled) -> np.ndarray:
    """C(v, R) as the pool keeps it: NaN, not inf, where R cannot run v. Every test a refresh makes of
    a pair (EST + C >= the booking's start, C <= a gap, ...) is then false for such a pair without
    a separate test of C < inf over the row at every step; `np.isfinite` still tells them apart."""
    return np.where(np.isfinite(c.cost), c.cost, np.nan)


BLOCK = 64  # positions per block of the pool
NO_TASK = np.iinfo(np.int64).max
# An empty position's column (base, t_d, C, EST, MDL). Base −inf and MDL −inf: no pass chooses it,
# and recomputing MDL as base − EST keeps it −inf; C NaN, as for a pair that cannot run (`durations`):
# no refresh takes it for a task that could start there. So clearing a position needs only those
# three rows (CLEARED), the strided ones of a (5, G, positions) array; t_d and EST may keep the old
# task's values.
EMPTY = np.array([-np.inf, np.inf, np.nan, np.inf, -np.inf])[:, None, None]
CLEARED = slice(0, 5, 2)  # base, C, MDL


class ReadyPool:
    """The ready tasks' MDL matrix, packed: position p holds one ready task, arrays are (G, positions).
    A task leaving leaves a hole (its column cleared, see EMPTY: no pass chooses or rescores it) that the
    next task added fills; moving the last task into it instead would copy a strided column and
    touch a second block. Holes are squeezed out (`compact`) once they outnumber the tasks, so
    passes over the positions stay within twice the ready set.

    Positions are cut into blocks of BLOCK; for every group and block the pool keeps the largest MDL and
    a position reaching it (only while more than 4 blocks' worth of positions are in use: below that,
    scanning the matrix itself is cheaper). Which position among equals is not kept: `top` looks for the
    lowest task among them in the one block it chooses from (`_lowest_in`), so the many block updates of
    a step are an argmax each instead of a masked minimum over task indices. Placing a task touches one
    block of every group (the task leaves) and one row (t_a of its group grew); the next pair is the
    best of the blocks × G table. A step costs O(G·BLOCK + ready + G·ready/BLOCK), never O(G·ready):
    10,000 independent tasks on 64 groups would otherwise recompute most of the matrix at every step.
    Positions carry no meaning: ties go by task index, so holes change no choice.
    """

    def __init__(self, n_groups: int) -> None:
        self.g = n_groups
        # base, t_d(v, R), C(v, R), EST(v, R) and MDL as views of one (5, G, positions) array, so that
        # clearing a position is one operation, not five
        self.rows = np.broadcast_to(EMPTY, (5, n_groups, BLOCK)).copy()
        self.base, self.td, self.dur, self.est, self.mdl = self.rows
        self.task = np.full(BLOCK, NO_TASK, dtype=np.int64)
        # the block table, (blocks, G): a block's row is contiguous, as the updates of a removal
        # and an arrival (one block, some groups) read and write it
        self.bmax = np.full((1, n_groups), -np.inf)
        self.bpos = np.zeros((1, n_groups), dtype=np.int64)
        self.starts = np.zeros(1, dtype=np.int64)  # each block's first position
        self.position: dict[int, int] = {}
        self.hi = 0  # positions in use (tasks or holes) are below hi
        self.holes: list[int] = []  # empty positions below hi
        self.blocked = False  # the block table is kept only while many positions are in use

    @property
    def count(self) -> int:
        """Ready tasks in the pool."""
        return self.hi - len(self.holes)

    @property
    def blocks(self) -> int:
        return -(-self.hi // BLOCK)

    def add(self, tasks: list[int], base: np.ndarray, td: np.ndarray, dur: np.ndarray,
            est: np.ndarray) -> None:
        """Tasks made ready, with their rows of `base`, t_d, C (NaN where a group cannot run the task:
        `durations`) and EST (len(tasks) × G)."""
        if not tasks:
            return
        if len(tasks) <= 4:  # the common case: column by column, plain indexing
            for i, v in enumerate(tasks):
                p = self._take(v)
                self.task[p], self.base[:, p], self.td[:, p] = v, base[i], td[i]
                self.dur[:, p], self.est[:, p] = dur[i], est[i]
                self.mdl[:, p] = base[i] - est[i]
                if self.blocked:
                    self._raise(p)
            if not self.blocked and self.hi > 4 * BLOCK:
                self.blocked = True
                self._blocks(np.arange(self.blocks))
            return
        self.reserve(len(tasks))
        cols, blocks = self._take_many(tasks)
        self.task[cols] = tasks
        self.base[:, cols], self.td[:, cols] = base.T, td.T
        self.dur[:, cols], self.est[:, cols] = dur.T, est.T
        self.mdl[:, cols] = (base - est).T
        if not self.blocked and self.hi > 4 * BLOCK:
            self.blocked = True
            self._blocks(np.arange(self.blocks))
            return
        if not self.blocked:
            return
        if len(tasks) <= BLOCK:  # a few columns: each raises its block's best, cheaper than a rescan
            for p in (range(cols.start, cols.stop) if isinstance(cols, slice) else cols.tolist()):
                self._raise(p)
            return
        self._blocks(blocks)

    def _take_many(self, tasks: list[int]) -> tuple[slice | np.ndarray, np.ndarray]:
        """Positions for these tasks and the blocks they fall in. Without holes they are the next
        positions at the end, as a slice: plain slice writes of the rows, not fancy-indexed
        scatters (a 20,000-leaf fan-out adds every leaf at once)."""
        if self.holes:
            cols = np.array([self._take(v) for v in tasks], dtype=np.int64)
            return cols, np.unique(cols // BLOCK)
        lo, k = self.hi, len(tasks)
        self.hi += k
        self.position.update(zip(tasks, range(lo, lo + k), strict=True))
        return slice(lo, lo + k), np.arange(lo // BLOCK, (lo + k - 1) // BLOCK + 1)

    def _take(self, v: int) -> int:
        p = self.holes.pop() if self.holes else self._grow()
        self.position[v] = p
        return p

    def _grow(self) -> int:
        if self.hi == self.task.size:
            self.reserve(1)
        self.hi += 1
        return self.hi - 1

    def reserve(self, k: int) -> None:
        """Room for k more positions, doubling (in whole blocks) so that growth is paid once."""
        size = self.task.size
        if self.hi + k <= size:
            return
        extra = max(size, -(-(self.hi + k - size) // BLOCK) * BLOCK)
        self.rows = np.concatenate([self.rows, np.broadcast_to(EMPTY, (5, self.g, extra))], axis=2)
        self.base, self.td, self.dur, self.est, self.mdl = self.rows
        self.task = np.concatenate([self.task, np.full(extra, NO_TASK, dtype=np.int64)])
        more = extra // BLOCK
        self.bmax = np.vstack([self.bmax, np.full((more, self.g), -np.inf)])
        self.bpos = np.vstack([self.bpos, np.zeros((more, self.g), dtype=np.int64)])
        self.starts = np.arange(0, self.task.size, BLOCK)

    def _blocks(self, blocks: np.ndarray) -> None:
        """Recompute the best of these blocks (ascending) for every group."""
        if blocks.size and blocks[-1] - blocks[0] + 1 == blocks.size:
            self._block_range(int(blocks[0]), int(blocks[-1]) + 1)
            return
        for b in blocks.tolist():
            self._block_range(b, b + 1)

    def _block_range(self, b0: int, b1: int) -> None:
        """Recompute the best of blocks b0 to b1 − 1 for every group, on a view of the matrix (a
        gather of the blocks' columns first costs several times more for many groups)."""
        seg = self.mdl[:, b0 * BLOCK:b1 * BLOCK].reshape(self.g, b1 - b0, BLOCK)
        self.bmax[b0:b1] = np.maximum.reduce(seg, axis=2).T
        self.bpos[b0:b1] = (seg.argmax(axis=2) + self.starts[b0:b1]).T

    def top(self) -> tuple[int, int]:
        """(position, group) of the largest MDL; ties to the lower task, then the lower group.
        (-1, -1) when nothing is left."""
        if not self.blocked:
            return self._top_small()
        nb = self.blocks
        if not nb:
            return -1, -1
        bmax = self.bmax[:nb]
        b, r = divmod(int(bmax.argmax()), self.g)
        m = bmax[b, r]
        if m == -np.inf:
            return -1, -1
        if np.count_nonzero(bmax == m) == 1:  # almost always: a 2-D nonzero costs several times more
            return self._lowest_in(r, b, m), r
        blocks, rows = np.nonzero(bmax == m)
        pairs = [(self._lowest_in(r, b, m), r) for r, b in zip(rows.tolist(), blocks.tolist(), strict=True)]
        return min(pairs, key=lambda pair: (int(self.task[pair[0]]), pair[1]))

    def _lowest_in(self, r: int, b: int, m: float) -> int:
        """The position of the lowest task scoring m on group r in block b (its best is m)."""
        lo = b * BLOCK
        at = (self.mdl[r, lo:lo + BLOCK] == m).nonzero()[0]
        if at.size == 1:
            return lo + int(at[0])
        return lo + int(at[self.task[lo + at].argmin()])

    def _top_small(self) -> tuple[int, int]:
        if self.hi == 1:  # one position (a chain): its best group, the lowest of equals
            r = int(self.mdl[:, 0].argmax())
            return (0, r) if self.mdl[r, 0] > -np.inf else (-1, -1)
        sub = self.mdl[:, :self.hi]
        if not self.hi or (m := sub.max()) == -np.inf:
            return -1, -1
        rows, cols = np.nonzero(sub == m)
        if rows.size == 1:
            return int(cols[0]), int(rows[0])
        v, r = min(zip(self.task[cols].tolist(), rows.tolist(), strict=True))
        return self.position[v], r

    def remove(self, p: int) -> None:
        """The task at p leaves a hole."""
        v = int(self.task[p])
        del self.position[v]
        self.task[p] = NO_TASK
        self.rows[CLEARED, :, p] = EMPTY[CLEARED, :, 0]
        self.holes.append(p)
        if self.blocked and self.count <= 2 * BLOCK:
            self.blocked = False  # few ready tasks: the whole matrix is smaller than the block table
            self.compact()
            return
        if len(self.holes) > max(self.count, BLOCK):
            self.compact()
            return
        if self.blocked:
            self._forget(p // BLOCK, p)

    def compact(self) -> None:
        """Move the tasks to the first `count` positions (in position order) and drop the holes."""
        if not self.holes:
            return
        keep = (self.task[:self.hi] != NO_TASK).nonzero()[0]
        k, hi = keep.size, self.hi
        self.rows[:, :, :k] = self.rows[:, :, keep]
        self.rows[:, :, k:hi] = EMPTY
        self.task[:k] = self.task[keep]
        self.task[k:hi] = NO_TASK
        self.position = dict(zip(self.task[:k].tolist(), range(k), strict=True))
        self.hi, self.holes = k, []
        nb = -(-hi // BLOCK)  # emptied blocks keep no best (a later _raise would lose to it)
        self.bmax[:nb] = -np.inf
        if self.blocked:
            self._blocks(np.arange(self.blocks))

    def _forget(self, b: int, p: int) -> None:
        """Position p of block b was cleared: recompute the groups whose block best was there (where
        an equal score stays elsewhere in the block, the best is unchanged)."""
        lo, hi = b * BLOCK, min(self.hi, (b + 1) * BLOCK)
        if hi <= lo:
            self.bmax[b] = -np.inf
            return
        rows = (self.bpos[b] == p).nonzero()[0]
        if rows.size:
            seg = self.mdl[rows, lo:hi]
            self.bmax[b][rows] = np.maximum.reduce(seg, axis=1)
            self.bpos[b][rows] = seg.argmax(axis=1) + lo

    def _raise(self, p: int) -> None:
        """A column arrived at p: it can only raise its block's best (an equal score changes nothing:
        ties are settled in `top`)."""
        b, score = p // BLOCK, self.mdl[:, p]
        bmax = self.bmax[b]
        better = score > bmax
        bmax[better], self.bpos[b][better] = score[better], p

    def span(self) -> int:
        """Positions a row refresh covers (whole blocks while the block table is kept)."""
        return self.blocks * BLOCK if self.blocked else self.hi

    def group_later(self, r: int, start: float, finish: float, slots: GroupSlots,
                    booked: tuple[float, float]) -> None:
        """Group r lost the idle time [start, finish) on one slot (`booked`: see
        `GroupSlots.start_after`). A task's EST there changes only if its earliest placement on r met
        that interval (elsewhere it is still free), so only those are recomputed; the others keep
        theirs exactly."""
        n = self.span()
        est, dur = self.est[r, :n], self.dur[r, :n]
        if slots.gap_end[r] == -np.inf:  # no idle gap on r: EST is max(t_d, free), one vector operation
            np.maximum(self.td[r, :n], slots.free[r], out=est)
        else:
            hit = ((est < finish) & (est + dur >= start)).nonzero()[0]  # C NaN: never (`durations`)
            if not hit.size:
                return
            est[hit] = slots.start_after(r, start, finish, booked, est[hit], self.td[r][hit], dur[hit])
        row = np.subtract(self.base[r, :n], est, out=self.mdl[r, :n])
        if not self.blocked:
            return
        nb = n // BLOCK
        at = np.add(row.reshape(nb, BLOCK).argmax(axis=1), self.starts[:nb], out=self.bpos[:nb, r])
        row.take(at, out=self.bmax[:nb, r])


WAVE_MIN = 256  # ready tasks from which the last wave is worth sorting (tests lower it)


class MdlPlanner:
    NAME = NAME

    def plan(self, c: Compiled, explain: bool = False, late: Late | None = None) -> Plan:
        """MDL's plan; `late` is asked now and then (`model.check`) whether to give up (Stopped)."""
        state = PlanState(c)
        base, dur = base_matrix(c), durations(c)
        slots = GroupSlots(state.lanes)
        pool = ReadyPool(c.n_groups)
        _add(pool, state, slots, base, dur, state.ready)
        steps: list[Step] = []
        unplaced = total = sum(pl is None for pl in state.placements)
        wave_bounds, fresh = None, 0
        while (top := pool.top())[0] >= 0:
            if unplaced == pool.count >= WAVE_MIN and not explain:  # every task left is ready
                td, dur = pool.td[:, :pool.hi], pool.dur[:, :pool.hi]  # holes: C NaN, no task
                if wave_bounds is None or unplaced <= fresh - max(BLOCK, fresh // 8):
                    # now and then (the bounds loosen as tasks leave), every gap against every task
                    wave_bounds, fresh = bounds(td, dur), unplaced
                    now_settled = settled_exactly(slots, td, dur)
                else:
                    now_settled = settled(slots, *wave_bounds)
                if now_settled:
                    _last_wave(pool, state, slots)
                    break
            check(late, total - unplaced, total)
            p, r = top
            v = int(pool.task[p])
            slot, start = slots.choose(r, float(pool.td[r, p]), float(pool.dur[r, p]))
            if explain:
                steps.append(_step(pool, p, r, start))
            booked = state.lanes[r][slot].tail, float(slots.gap_end[r])  # before the booking
            newly = state.place(v, r, slot, start)
            unplaced -= 1
            finish = start + float(pool.dur[r, p])
            pool.remove(p)
            slots.refresh(r)
            pool.group_later(r, start, finish, slots, booked)
            _add(pool, state, slots, base, dur, newly)
        return Plan(NAME, state.result(), steps)


def _last_wave(pool: ReadyPool, state: PlanState, slots: GroupSlots) -> None:
    """Every task left is ready and every group settled (wave.py): place them all."""
    # the tasks in position order, without holes: copies of the rows the wave needs, not a compaction
    # of all five (on a 20,000-leaf fan-out that is 160 MB moved)
    m = pool.hi
    cols = slice(0, m) if m == pool.count else (pool.task[:m] != NO_TASK).nonzero()[0]
    wave = LastWave(pool.task[cols].copy(), pool.base[:, cols].copy(), slots)
    td, dur = pool.td[:, cols].copy(), pool.dur[:, cols].copy()
    while (top := wave.top())[0] >= 0:
        p, r = top
        slot, start = slots.choose(r, float(td[r, p]), float(dur[r, p]))
        state.place(int(wave.task[p]), r, slot, start)
        slots.refresh(r)
        wave.placed(p, r)


def _add(pool: ReadyPool, state: PlanState, slots: GroupSlots, base: np.ndarray, dur: np.ndarray,
         tasks: list[int]) -> None:
    if tasks:
        td = np.empty((len(tasks), state.c.n_groups))
        td.fill(state.now)  # tasks without inputs: ready now (not np.full: its Python wrapper costs more)
        for i, v in enumerate(tasks):
            if state.c.preds[v]:
                td[i] = state.arrival(v)
        cost = dur[tasks]
        pool.add(tasks, base[tasks], td, cost, slots.start_matrix(td, cost))


def _step(pool: ReadyPool, p: int, r: int, start: float) -> Step:
    """The chosen pair and the best other pair (the task's second-best group or another task)."""
    v, hi = int(pool.task[p]), pool.hi
    mdl = pool.mdl[:, :hi].copy()
    score = float(mdl[r, p])
    mdl[r, p] = -np.inf
    m = mdl.max()
    if m == -np.inf:
        return Step(v, r, score, start)
    rows, cols = np.nonzero(mdl == m)
    alt_v, alt_r = min(zip(pool.task[cols].tolist(), rows.tolist(), strict=True))
    return Step(v, r, score, start, alt_v, alt_r, float(m))

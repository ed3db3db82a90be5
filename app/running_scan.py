"""POST /schedule's running jobs read straight from the body's bytes into columns, and checked there.

A 10,000-node snapshot carries ~60,000 running jobs: 11 of its 14 MB. Parsed by pydantic, each
becomes a dict with a list of dicts, then a record; that was most of the parse and check time. Here
a compiled scan reads the `running` array into arrays (ids and node names as byte spans, times,
amounts), and the rest of the body goes through pydantic with `"running": []` in its place.

The fast path accepts only what it fully checks: plain JSON (no escapes, ASCII strings), the keys and
bounds of `RunningJobIn` / `NodeAllocIn`, known nodes, no repeats. Anything else, valid or not, gives
`Fallback`, and the caller parses and checks the body the ordinary way, which names every problem
exactly as before (the errors come from one place). Floats are read exactly: a number of at most
15 significant digits and a power of ten within 22 (Clinger's fast path: one correctly rounded
operation) in the scan, any other by Python's `float` of its text.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

import numpy as np
from numba import njit

from app.sched.running import RunningColumns
from schemas.common import MAX_CPU, MAX_GPU, MAX_MEM_MIB, TIME_BOUND


class Fallback(Exception):  # noqa: N818 -- a signal, not an error: "take the ordinary path"
    """The fast path does not vouch for this body: parse and check it the ordinary way."""


_SEED = np.uint64(secrets.randbits(64))  # the names' hashes: see _hash
_POW10 = np.array([10.0 ** k for k in range(23)])
_KEY = np.frombuffer(b"running", dtype=np.uint8)
# the keys of a running job and of one allocation, each as its bytes
_JOB_KEYS = (b"id", b"queue", b"allocation", b"start_time", b"walltime_s", b"migrated")
_ALLOC_KEYS = (b"node", b"cpu", b"mem_mib", b"gpu")
_TRUE = np.frombuffer(b"true", dtype=np.uint8)
_FALSE = np.frombuffer(b"false", dtype=np.uint8)


def _keys(names: tuple[bytes, ...]) -> tuple[np.ndarray, np.ndarray]:
    return (np.frombuffer(b"".join(names), dtype=np.uint8),
            np.cumsum([0] + [len(k) for k in names]).astype(np.int64))


_JK, _JO = _keys(_JOB_KEYS)
_AK, _AO = _keys(_ALLOC_KEYS)
SEEN_REQUIRED = (1 << 0) | (1 << 2) | (1 << 3) | (1 << 4)  # id, allocation, start_time, walltime_s


@njit(cache=True, nogil=True)
def _ws(b: np.ndarray, i: int) -> int:
    n = len(b)
    while i < n and (b[i] == 32 or b[i] == 10 or b[i] == 13 or b[i] == 9):
        i += 1
    return i


@njit(cache=True, nogil=True)
def _skip_string(b: np.ndarray, i: int) -> tuple[int, bool]:
    """From just after an opening quote: (index of the closing quote or -1, whether it escapes)."""
    n = len(b)
    escaped = False
    while i < n:
        c = b[i]
        if c == 34:
            return i, escaped
        if c == 92:
            escaped = True
            i += 1
        i += 1
    return -1, escaped


@njit(cache=True, nogil=True)
def _skip_value(b: np.ndarray, i: int) -> int:
    """The index just after the JSON value starting at i (loose: pydantic checks it), or -1."""
    n = len(b)
    if i >= n:
        return -1
    c = b[i]
    if c == 34:
        end, _ = _skip_string(b, i + 1)
        return -1 if end < 0 else end + 1
    if c == 123 or c == 91:
        depth = 0
        while i < n:
            c = b[i]
            if c == 34:
                end, _ = _skip_string(b, i + 1)
                if end < 0:
                    return -1
                i = end
            elif c == 123 or c == 91:
                depth += 1
            elif c == 125 or c == 93:
                depth -= 1
                if depth == 0:
                    return i + 1
            i += 1
        return -1
    while i < n and b[i] != 44 and b[i] != 125 and b[i] != 93 and b[i] != 32 and b[i] != 10 \
            and b[i] != 13 and b[i] != 9:
        i += 1
    return i


@njit(cache=True, nogil=True)
def _same(b: np.ndarray, s: int, e: int, lit: np.ndarray, ls: int, le: int) -> bool:
    if e - s != le - ls:
        return False
    for k in range(e - s):
        if b[s + k] != lit[ls + k]:
            return False
    return True


@njit(cache=True, nogil=True)
def _split(b: np.ndarray, key: np.ndarray, jkeys: np.ndarray, joff: np.ndarray, akeys: np.ndarray,
           aoff: np.ndarray, pow10: np.ndarray, true_: np.ndarray, false_: np.ndarray,
           spans: np.ndarray, times: np.ndarray, exact: np.ndarray, migrated: np.ndarray,
           ent_job: np.ndarray, node_span: np.ndarray,
           amounts: np.ndarray) -> tuple[int, int, int, int]:
    """The body's top-level object walked once: the value of `key` read by `_scan` into the columns,
    the others skipped. (its start, its end, jobs, entries); start -1 when the body is not an
    object the walk can read, any top-level key is escaped, or `key` is absent, repeated or not a
    list `_scan` reads."""
    i = _ws(b, 0)
    if i >= len(b) or b[i] != 123:
        return -1, -1, 0, 0
    i = _ws(b, i + 1)
    if i < len(b) and b[i] == 125:
        return -1, -1, 0, 0
    start = end = -1
    jobs = ents = 0
    while True:
        if i >= len(b) or b[i] != 34:
            return -1, -1, 0, 0
        ks = i + 1
        ke, escaped = _skip_string(b, ks)
        if ke < 0 or escaped:
            return -1, -1, 0, 0
        i = _ws(b, ke + 1)
        if i >= len(b) or b[i] != 58:
            return -1, -1, 0, 0
        vs = _ws(b, i + 1)
        if _same(b, ks, ke, key, 0, len(key)):
            if start >= 0:
                return -1, -1, 0, 0
            jobs, ents, ve = _scan(b, vs, len(b), jkeys, joff, akeys, aoff, pow10, true_, false_, spans,
                                   times, exact, migrated, ent_job, node_span, amounts)
            start, end = vs, ve
        else:
            ve = _skip_value(b, vs)
        if ve < 0:
            return -1, -1, 0, 0
        i = _ws(b, ve)
        if i < len(b) and b[i] == 44:
            i = _ws(b, i + 1)
        elif i < len(b) and b[i] == 125:
            return start, end, jobs, ents
        else:
            return -1, -1, 0, 0


@njit(cache=True, nogil=True)
def _plain_string(b: np.ndarray, i: int) -> int:
    """From just after an opening quote: the index of the closing quote of a non-empty string of
    printable ASCII without escapes, or -1 (anything else)."""
    s = i
    n = len(b)
    while i < n:
        c = b[i]
        if c == 34:
            return i if i > s else -1
        if c < 32 or c >= 127 or c == 92:
            return -1
        i += 1
    return -1


@njit(cache=True, nogil=True)
def _digits(b: np.ndarray, i: int, mant: int, digits: int) -> tuple[int, int, int, int]:
    """The decimal digits from i added to mant, up to 18 significant ones: (their end, mant,
    significant digits seen, digits added)."""
    added = 0
    while i < len(b) and 48 <= b[i] <= 57:
        if mant > 0 or b[i] != 48:
            digits += 1
        if digits <= 18:
            mant = mant * 10 + (b[i] - 48)
            added += 1
        i += 1
    return i, mant, digits, added


@njit(cache=True, nogil=True)
def _number(b: np.ndarray, i: int, pow10: np.ndarray) -> tuple[int, bool, int, float, bool]:
    """A JSON number at i: (end or -1, integral (no fraction, no exponent), its value as an int when
    integral and short, as a float when exact, whether the float is exact (else: read its text))."""
    n = len(b)
    neg = False
    if i < n and b[i] == 45:
        neg = True
        i += 1
    if i >= n or b[i] < 48 or b[i] > 57:
        return -1, False, 0, 0.0, False
    if b[i] == 48 and i + 1 < n and 48 <= b[i + 1] <= 57:
        return -1, False, 0, 0.0, False  # a leading zero
    i, mant, digits, _ = _digits(b, i, 0, 0)
    integral = True
    frac = 0
    if i < n and b[i] == 46:
        integral = False
        if i + 1 >= n or b[i + 1] < 48 or b[i + 1] > 57:
            return -1, False, 0, 0.0, False
        i, mant, digits, frac = _digits(b, i + 1, mant, digits)
    exp = 0
    if i < n and (b[i] == 101 or b[i] == 69):
        integral = False
        i += 1
        eneg = False
        if i < n and (b[i] == 43 or b[i] == 45):
            eneg = b[i] == 45
            i += 1
        if i >= n or b[i] < 48 or b[i] > 57:
            return -1, False, 0, 0.0, False
        while i < n and 48 <= b[i] <= 57:
            if exp < 100000:
                exp = exp * 10 + (b[i] - 48)
            i += 1
        if eneg:
            exp = -exp
    value = -mant if neg else mant
    if digits > 15 or mant >= (1 << 53):
        return i, integral and digits <= 18, value, 0.0, False
    e10 = exp - frac
    if e10 < -22 or e10 > 22:
        return i, integral and digits <= 18, value, 0.0, False
    f = float(mant) * pow10[e10] if e10 >= 0 else float(mant) / pow10[-e10]
    if neg:
        f = -f
    return i, integral and digits <= 18, value, f, True


@njit(cache=True, nogil=True)
def _key_index(b: np.ndarray, s: int, e: int, keys: np.ndarray, offsets: np.ndarray) -> int:
    for k in range(len(offsets) - 1):
        if _same(b, s, e, keys, offsets[k], offsets[k + 1]):
            return k
    return -1


@njit(cache=True, nogil=True)
def _allocation(b: np.ndarray, i: int, j: int, ent: int, akeys: np.ndarray, aoff: np.ndarray,
                pow10: np.ndarray, ent_job: np.ndarray, node_span: np.ndarray,
                amounts: np.ndarray) -> tuple[int, int]:
    """The allocation list at i (just after its `[`): (index after its `]` or -1, entries now)."""
    i = _ws(b, i)
    if i < len(b) and b[i] == 93:
        return -1, ent  # empty: min_length=1
    while True:
        if ent >= len(ent_job) or i >= len(b) or b[i] != 123:
            return -1, ent
        i = _ws(b, i + 1)
        seen = 0
        amounts[ent, 0] = amounts[ent, 1] = amounts[ent, 2] = 0
        while True:
            if i >= len(b) or b[i] != 34:
                return -1, ent
            ke = _plain_string(b, i + 1)
            if ke < 0:
                return -1, ent
            k = _key_index(b, i + 1, ke, akeys, aoff)
            if k < 0 or seen & (1 << k):
                return -1, ent
            seen |= 1 << k
            i = _ws(b, ke + 1)
            if i >= len(b) or b[i] != 58:
                return -1, ent
            i = _ws(b, i + 1)
            if k == 0:
                if i >= len(b) or b[i] != 34:
                    return -1, ent
                se = _plain_string(b, i + 1)
                if se < 0:
                    return -1, ent
                node_span[ent, 0] = i + 1
                node_span[ent, 1] = se
                i = se + 1
            else:
                end, integral, v, _, _ = _number(b, i, pow10)
                if end < 0 or not integral:
                    return -1, ent
                amounts[ent, k - 1] = v
                i = end
            i = _ws(b, i)
            if i < len(b) and b[i] == 44:
                i = _ws(b, i + 1)
            elif i < len(b) and b[i] == 125:
                break
            else:
                return -1, ent
        if not seen & 1:
            return -1, ent
        ent_job[ent] = j
        ent += 1
        i = _ws(b, i + 1)
        if i < len(b) and b[i] == 44:
            i = _ws(b, i + 1)
        elif i < len(b) and b[i] == 93:
            return i + 1, ent
        else:
            return -1, ent


@njit(cache=True, nogil=True)
def _scan(b: np.ndarray, s: int, e: int, jkeys: np.ndarray, joff: np.ndarray, akeys: np.ndarray,
          aoff: np.ndarray, pow10: np.ndarray, true_: np.ndarray, false_: np.ndarray,
          spans: np.ndarray, times: np.ndarray, exact: np.ndarray, migrated: np.ndarray,
          ent_job: np.ndarray, node_span: np.ndarray, amounts: np.ndarray) -> tuple[int, int, int]:
    """The running array at b[s], before e, into the given columns: (jobs, entries, the index just
    after it), or (-1, -1, -1).
    spans: per job, id (start, end), queue (start, end; -1 when absent), start_time's and
    walltime_s's text (start, end). times: start_time, walltime_s. exact: whether each was read
    exactly here (else read from its text)."""
    i = _ws(b, s)
    if i >= e or b[i] != 91:
        return -1, -1, -1
    i = _ws(b, i + 1)
    j = ent = 0
    if i < e and b[i] == 93:
        return 0, 0, i + 1
    while True:
        if j >= len(migrated) or i >= e or b[i] != 123:
            return -1, -1, -1
        i = _ws(b, i + 1)
        seen = 0
        spans[j, 2] = spans[j, 3] = -1
        migrated[j] = False
        while True:
            if i >= e or b[i] != 34:
                return -1, -1, -1
            ke = _plain_string(b, i + 1)
            if ke < 0:
                return -1, -1, -1
            k = _key_index(b, i + 1, ke, jkeys, joff)
            if k < 0 or seen & (1 << k):
                return -1, -1, -1
            seen |= 1 << k
            i = _ws(b, ke + 1)
            if i >= e or b[i] != 58:
                return -1, -1, -1
            i = _ws(b, i + 1)
            if k == 0 or k == 1:  # id, queue
                if i >= e or b[i] != 34:
                    return -1, -1, -1
                se = _plain_string(b, i + 1)
                if se < 0:
                    return -1, -1, -1
                spans[j, 2 * k] = i + 1
                spans[j, 2 * k + 1] = se
                i = se + 1
            elif k == 2:  # allocation
                if i >= e or b[i] != 91:
                    return -1, -1, -1
                i, ent = _allocation(b, i + 1, j, ent, akeys, aoff, pow10, ent_job, node_span, amounts)
                if i < 0:
                    return -1, -1, -1
            elif k == 3 or k == 4:  # start_time, walltime_s
                end, _, _, f, ok = _number(b, i, pow10)
                if end < 0:
                    return -1, -1, -1
                times[j, k - 3] = f
                exact[j, k - 3] = ok
                spans[j, 2 * k - 2] = i
                spans[j, 2 * k - 1] = end
                i = end
            else:  # migrated
                if _same(b, i, i + 4, true_, 0, 4):
                    migrated[j] = True
                    i += 4
                elif _same(b, i, i + 5, false_, 0, 5):
                    i += 5
                else:
                    return -1, -1, -1
            i = _ws(b, i)
            if i < e and b[i] == 44:
                i = _ws(b, i + 1)
            elif i < e and b[i] == 125:
                break
            else:
                return -1, -1, -1
        if seen & 29 != 29:  # id, allocation, start_time, walltime_s
            return -1, -1, -1
        j += 1
        i = _ws(b, i + 1)
        if i < e and b[i] == 44:
            i = _ws(b, i + 1)
        elif i < e and b[i] == 93:
            return j, ent, i + 1
        else:
            return -1, -1, -1


@njit(cache=True, nogil=True)
def _hash(b: np.ndarray, s: int, e: int, seed: np.uint64) -> np.uint64:
    """FNV-1a from a secret seed, then mixed (murmur3's finalizer): a body cannot pick names whose
    hashes meet, to make the table's lookups slow."""
    h = np.uint64(14695981039346656037) ^ seed
    for k in range(s, e):
        h = (h ^ np.uint64(b[k])) * np.uint64(1099511628211)
    h ^= h >> np.uint64(33)
    h *= np.uint64(0xFF51AFD7ED558CCD)
    h ^= h >> np.uint64(33)
    return h


@njit(cache=True, nogil=True)
def span_hashes(b: np.ndarray, spans: np.ndarray, seed: np.uint64) -> np.ndarray:
    out = np.empty(len(spans), dtype=np.uint64)
    for k in range(len(spans)):
        out[k] = _hash(b, spans[k, 0], spans[k, 1], seed)
    return out


@njit(cache=True, nogil=True)
def _node_indices(b: np.ndarray, node_span: np.ndarray, names: np.ndarray, offsets: np.ndarray,
                  hashes: np.ndarray, seed: np.uint64) -> np.ndarray:
    """The index of each span's node among `names` (their bytes joined, cut at offsets), -1 when
    none; an open-addressing table of the names' hashes."""
    n = len(offsets) - 1
    size = 1
    while size < 2 * n + 2:
        size *= 2
    mask = np.uint64(size - 1)
    table = np.full(size, -1, dtype=np.int64)
    for x in range(n):
        slot = hashes[x] & mask
        while table[slot] >= 0:
            slot = (slot + np.uint64(1)) & mask
        table[slot] = x
    out = np.empty(len(node_span), dtype=np.int64)
    for k in range(len(node_span)):
        s, e = node_span[k, 0], node_span[k, 1]
        slot = _hash(b, s, e, seed) & mask
        out[k] = -1
        while table[slot] >= 0:
            x = table[slot]
            if _same(b, s, e, names, offsets[x], offsets[x + 1]):
                out[k] = x
                break
            slot = (slot + np.uint64(1)) & mask
    return out


@njit(cache=True, nogil=True)
def _held_sums(node_of: np.ndarray, amounts: np.ndarray, first: np.ndarray,
               n_nodes: int) -> tuple[np.ndarray, np.ndarray, bool]:
    """(what the jobs hold on each node (n, 3), entries per node, whether a job lists a node
    twice)."""
    held = np.zeros((n_nodes, 3), dtype=np.int64)
    count = np.zeros(n_nodes, dtype=np.int64)
    last = np.full(n_nodes, -1, dtype=np.int64)  # the last job seen on each node
    twice = False
    for j in range(len(first) - 1):
        for a in range(first[j], first[j + 1]):
            x = node_of[a]
            if last[x] == j:
                twice = True
            last[x] = j
            count[x] += 1
            for r in range(3):
                held[x, r] += amounts[a, r]
    return held, count, twice


@dataclass(frozen=True, slots=True)
class Scanned:
    """The running array as read from the body: spans into `raw`, and the values."""

    raw: bytes
    buf: np.ndarray  # raw as uint8, no copy
    spans: np.ndarray  # (J, 8): id, queue (-1 absent), start_time's text, walltime_s's text
    start: np.ndarray
    walltime: np.ndarray
    migrated: np.ndarray
    ent_job: np.ndarray  # the job of each allocation entry, ascending
    node_span: np.ndarray  # (E, 2)
    amounts: np.ndarray  # (E, 3) cpu, mem_mib, gpu

    def __len__(self) -> int:
        return len(self.start)

    def ids(self) -> list[str]:
        raw = self.raw
        return [raw[s:e].decode() for s, e in self.spans[:, :2].tolist()]

    def queues(self) -> list[str]:
        raw = self.raw
        return ["default" if s < 0 else raw[s:e].decode() for s, e in self.spans[:, 2:4].tolist()]


def split(body: bytes) -> tuple[bytes, Scanned] | None:
    """(the body with `"running": []`, its running jobs scanned), or None when it lists none.
    Raises Fallback when the scan cannot vouch for them (or finds no `running` to read)."""
    buf = np.frombuffer(body, dtype=np.uint8)
    most = int(np.count_nonzero(buf == 123))  # `{`: at least one per job and per entry
    spans = np.empty((most, 8), dtype=np.int64)
    times = np.empty((most, 2), dtype=np.float64)
    exact = np.empty((most, 2), dtype=np.bool_)
    migrated = np.empty(most, dtype=np.bool_)
    ent_job = np.empty(most, dtype=np.int64)
    node_span = np.empty((most, 2), dtype=np.int64)
    amounts = np.empty((most, 3), dtype=np.int64)
    s, e, jobs, ents = _split(buf, _KEY, _JK, _JO, _AK, _AO, _POW10, _TRUE, _FALSE, spans, times, exact,
                              migrated, ent_job, node_span, amounts)
    if s < 0:
        raise Fallback
    if not jobs:
        return None
    times, exact, spans = times[:jobs], exact[:jobs], spans[:jobs]
    for j, k in zip(*np.nonzero(~exact), strict=True):  # the few numbers not read exactly above
        times[j, k] = float(body[spans[j, 4 + 2 * k]:spans[j, 5 + 2 * k]])
    start, walltime = times[:, 0].copy(), times[:, 1].copy()
    amounts = amounts[:ents]
    if not (_within(start, -TIME_BOUND, TIME_BOUND) and _within(walltime, 0.0, TIME_BOUND)
            and bool((walltime > 0).all()) and _amounts_within(amounts)):
        raise Fallback
    scanned = Scanned(body, buf, spans, start, walltime, migrated[:jobs].copy(), ent_job[:ents],
                      node_span[:ents], amounts)
    return body[:s] + b"[]" + body[e:], scanned


def _within(x: np.ndarray, low: float, high: float) -> bool:
    return bool(((x >= low) & (x <= high)).all())  # False for NaN too


def _amounts_within(amounts: np.ndarray) -> bool:
    if not len(amounts):
        return True
    least = amounts.min(axis=0)
    most = amounts.max(axis=0)
    return bool((least >= 0).all() and most[0] <= MAX_CPU and most[1] <= MAX_MEM_MIB and most[2] <= MAX_GPU)


def _joined(names: list[str]) -> tuple[np.ndarray, np.ndarray]:
    encoded = [n.encode() for n in names]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum([len(x) for x in encoded], out=offsets[1:])
    return np.frombuffer(b"".join(encoded) or b"\0", dtype=np.uint8), offsets


def _hashes(joined: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    return span_hashes(joined, np.stack([offsets[:-1], offsets[1:]], axis=1), _SEED)


def columns(scanned: Scanned, node_ids: list[str], pending_ids: list[str]
            ) -> tuple[dict[str, list[int]], RunningColumns]:
    """What the running jobs hold per node (as `check_snapshot` gives it) and their columns, once
    checked: every node known and listed once per job, ids unique and not also pending. Raises
    Fallback otherwise (the ordinary checks then name the problem)."""
    names, offsets = _joined(node_ids)
    node_of = _node_indices(scanned.buf, scanned.node_span, names, offsets, _hashes(names, offsets),
                            _SEED)
    if len(node_of) and node_of.min() < 0:
        raise Fallback
    first = np.searchsorted(scanned.ent_job, np.arange(len(scanned) + 1))
    held, count, twice = _held_sums(node_of, scanned.amounts, first, len(node_ids))
    if twice or _ids_clash(scanned, pending_ids):
        raise Fallback
    at = np.flatnonzero(count).tolist()
    by_node = dict(zip([node_ids[x] for x in at], held[at].tolist(), strict=True))
    cols = RunningColumns(node_ids, first, node_of, scanned.amounts, scanned.start, scanned.walltime,
                          scanned.migrated, lambda: (scanned.ids(), scanned.queues()))
    return by_node, cols


def _ids_clash(scanned: Scanned, pending_ids: list[str]) -> bool:
    """Whether two running jobs share an id, or a pending job has a running job's id (hashes first,
    the texts compared only where hashes meet)."""
    mine = span_hashes(scanned.buf, scanned.spans[:, :2], _SEED)
    ordered = np.sort(mine)
    if len(ordered) > 1 and bool((ordered[1:] == ordered[:-1]).any()):
        ids = scanned.ids()
        if len(set(ids)) < len(ids):
            return True
    if not pending_ids:
        return False
    joined, offsets = _joined(pending_ids)
    theirs = _hashes(joined, offsets)
    at = np.minimum(np.searchsorted(ordered, theirs), len(ordered) - 1)
    if bool((ordered[at] == theirs).any()):  # np.isin hashes both anew: ten times slower
        return bool(set(pending_ids).intersection(scanned.ids()))
    return False


def warm() -> None:
    """Compile the scan (cached on disk after the first time)."""
    body = (b'{"nodes": [], "running": [{"id": "r", "queue": "q", "start_time": 1.5, "walltime_s": 60,'
            b' "migrated": false, "allocation": [{"node": "n", "cpu": 1, "mem_mib": 2, "gpu": 0}]}]}')
    _, scanned = split(body) or (b"", None)
    if scanned is not None:
        columns(scanned, ["n"], ["p"])

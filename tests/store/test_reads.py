"""Consistent reads on a real Redis: a read interleaved by a writer notices it before using a mix of
versions, the atomic copy a busy reader falls back to answers exactly what the round trips answer,
and a PUT that fails leaves nothing behind for good."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
import redis

from app.errors import InputError, StoreUnavailableError, VersionConflictError
from app.sched.model import Window
from app.sched.narrow import narrow
from app.store import index, reads
from app.store.index import ClusterCache, Edit, IndexSource, Keys
from app.store.kv import RedisKv, index_kv
from app.store.reads import Lease, Moved, RedisReadTx
from tests.store.test_index import nodes, patch, started


def redis_cache(url: str) -> ClusterCache:
    return ClusterCache(RedisKv(redis.Redis.from_url(url, decode_responses=True)))


def test_a_read_interleaved_by_a_writer_stops_before_using_a_mix(redis_url: str) -> None:
    """The round trip after a writer's commit raises Moved; alone, a read goes through."""
    cache = redis_cache(redis_url)
    version = cache.put("t:m", nodes(4), [])
    k = Keys("t:m")
    tx = RedisReadTx(cache.kv.r, k.meta)  # type: ignore[union-attr]
    assert tx.hget(k.meta, "version") == str(version)
    assert tx.hlen(k.at(tx.hget(k.meta, "gen") or "").node) == 4
    patch(cache, "t:m", version, started("j", {"n000": (8, 0, 0)}))
    with pytest.raises(Moved):
        tx.hlen(k.node)


def answers(cache: ClusterCache, key: str) -> tuple[object, ...]:
    from bench.workload import pending

    jobs = pending(200)

    def passed(tx, k):  # noqa: ANN001, ANN202
        src = IndexSource(tx, k)
        found = narrow(src, jobs)
        return src.version, src.snapshot(0.0, found), found.examined

    version, whole, running, windows = cache.whole_with_windows(key)
    by_id = lambda x: x.id  # noqa: E731
    return (cache.summary(key), cache.read(key, index.summary_read),
            (version, sorted(whole, key=by_id), sorted(running, key=by_id), windows),
            cache.read(key, passed))


def test_the_atomic_copy_answers_what_the_round_trips_answer(redis_url: str,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """GET's summary (one script) equals the summary read by round trips; that, a whole read and an
    index pass, read by round trips and from the copy a reader falls back to under heavy writes, are
    equal (and the copy path really runs)."""
    from bench.workload import cluster

    cache = redis_cache(redis_url)
    snap = cluster(600)
    windows = [Window("maint", (snap.nodes[0].id, snap.nodes[1].id), 1e9, 1e9 + 3600)]
    cache.put("t:copy", snap.nodes, snap.running, windows)
    direct = answers(cache, "t:copy")
    assert direct[2][3] == windows
    assert direct[0] == direct[1] and direct[0][0] == 1 and len(direct[0][3]) >= 3
    copies = []
    real_copy = index.copy_generation
    def moved(*_: object) -> None:  # as if writers kept landing, even under the lease
        raise Moved("t:copy")
    monkeypatch.setattr(ClusterCache, "_read_once", moved)
    monkeypatch.setattr(index, "copy_generation", lambda *a: copies.append(a) or real_copy(*a))
    assert answers(cache, "t:copy") == direct
    assert len(copies) == 3  # the round-trip summary, the whole read, the pass


def staged_keys(client: redis.Redis) -> dict[str, int]:
    return {k: client.ttl(k) for k in client.scan_iter("hpcsched:cl:*")}


def test_a_put_leaves_no_expiry_and_a_failed_one_leaves_nothing_for_good(
        redis_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """After a PUT every key is permanent; a PUT whose switch fails removes its copy; one whose
    writer dies before it can clean up leaves keys that expire (never a forever-orphan)."""
    cache = redis_cache(redis_url)
    client = cache.kv.r  # type: ignore[union-attr]
    cache.put("t:p", nodes(5), [])
    kept = staged_keys(client)
    assert kept and set(kept.values()) == {-1}

    def dead(*_: object) -> None:
        raise StoreUnavailableError("the cache went away")
    monkeypatch.setattr(ClusterCache, "_switch", dead)
    with pytest.raises(StoreUnavailableError):
        cache.put("t:p", nodes(9), [])
    assert staged_keys(client) == kept  # the copy was removed
    monkeypatch.setattr(ClusterCache, "_forget", lambda self, keys: None)  # died: no clean-up
    with pytest.raises(StoreUnavailableError):
        cache.put("t:p", nodes(9), [])
    left = {k: ttl for k, ttl in staged_keys(client).items() if k not in kept}
    assert left and all(0 < ttl <= index.STAGING_TTL_S for ttl in left.values())
    assert sorted(n.id for n in cache.whole("t:p")[1]) == [n.id for n in nodes(5)]  # the last PUT


def test_a_writer_whose_reads_were_mixed_gets_a_conflict_not_its_error(redis_url: str) -> None:
    """An error raised on what a PATCH read while another writer landed is a 409 (read again),
    not the 422 or 500 the mix made it look like; with nobody in between the error stands."""
    cache, other = redis_cache(redis_url), redis_cache(redis_url)
    version = cache.put("t:w", nodes(3), [])

    def apply(interleave: bool) -> Callable[[Edit], None]:
        def edit(e: Edit) -> None:
            e.node("n000")
            if interleave:
                patch(other, "t:w", version, started("x", {"n001": (8, 0, 0)}))
            raise InputError.single(("body", "changes", 0, "job_id"), "no such job")
        return edit

    with pytest.raises(InputError):
        cache.patch("t:w", version, apply(False))
    with pytest.raises(VersionConflictError):
        cache.patch("t:w", version, apply(True))


def test_a_leased_reader_holds_writers_back_until_it_is_done(redis_url: str,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """While a reader holds its lease a PATCH waits (nothing lands under the reader); given back,
    the PATCH lands. A lease left by a reader that died lapses by itself."""
    monkeypatch.setattr(reads, "WRITER_WAIT_S", 60.0)  # the writer waits for the lease, not a clock
    cache = redis_cache(redis_url)
    version = cache.put("t:l", nodes(3), [])
    k = Keys("t:l")
    landed: list[int] = []
    writer = threading.Thread(target=lambda: landed.append(
        patch(redis_cache(redis_url), "t:l", version, started("x", {"n000": (8, 0, 0)}))))
    with Lease(cache.kv.r, k.readers):  # type: ignore[union-attr]
        writer.start()
        writer.join(timeout=0.5)
        assert writer.is_alive() and cache.summary("t:l")[0] == version
    writer.join(timeout=30)
    assert landed == [version + 1] and cache.summary("t:l")[0] == version + 1
    client = cache.kv.r  # type: ignore[union-attr]
    client.zadd(k.readers, {"died": 1})  # a lease that lapsed long ago
    assert patch(cache, "t:l", version + 1, started("y", {"n001": (8, 0, 0)})) == version + 2


def test_the_service_client_reads_and_writes_redis_through_hiredis(redis_url: str) -> None:
    """The cache's client parses replies and packs commands with hiredis (a dependency): a pass on
    a 160,000-node cluster sends ~80,000 keys and reads as many replies, which redis-py's pure
    Python parser and packer made the largest part of the read (bench/README.md, nineteenth session)."""
    kv = index_kv(redis_url)
    assert isinstance(kv, RedisKv)
    conn = kv.r.connection_pool.get_connection()
    try:
        assert type(conn._parser).__name__ == "_HiredisParser"
        assert type(conn._command_packer).__name__ == "HiredisRespSerializer"
        conn.send_command("PING")
        assert conn.read_response() in ("PONG", b"PONG")
    finally:
        kv.r.connection_pool.release(conn)

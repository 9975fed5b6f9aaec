"""A database that hangs instead of failing must not hold admissions: PostgreSQL's own timeouts
cancel a write that waits on a lock, and the store's watchdog spools what waits on a writer stuck
on a server that stopped answering. Nothing is lost, nothing is written twice."""

from __future__ import annotations

import threading
import time
from concurrent.futures import wait
from pathlib import Path

import psycopg
import pytest
from sqlalchemy import func, select

from gpupolicy.provenance import open_store
from gpupolicy.provenance.engines import postgres_connect_args
from gpupolicy.provenance.schema import records
from gpupolicy.provenance.spool import Spool
from gpupolicy.provenance.store import ProvenanceStore
from tests.provenance.relay import DatabaseRelay
from tests.provenance.samples import MakeRecord

# Liveness bounds (a hang fails the test instead of blocking the suite), not performance figures.
SETTLE_SECONDS = 30


def db_uids(store: ProvenanceStore) -> list[str]:
    with store.engine.connect() as conn:
        return list(conn.execute(select(records.c.uid).order_by(records.c.uid)).scalars())


def db_rows(store: ProvenanceStore) -> int:
    with store.engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(records)).scalar_one())


def spooled(spool_dir: Path) -> set[str]:
    return {str(item["uid"]) for item in Spool(spool_dir).waiting()}


def test_postgres_sessions_carry_timeouts_that_bound_every_wait() -> None:
    args = postgres_connect_args("tenant_a", connect_timeout=2.0, write_timeout=1.5)
    assert args["options"] == "-c statement_timeout=750 -c lock_timeout=750 -c search_path=tenant_a"
    assert args["tcp_user_timeout"] == 1500
    assert args["keepalives"] == 1 and args["keepalives_count"] >= 1
    with pytest.raises(ValueError, match="invalid schema name"):
        postgres_connect_args("a; DROP TABLE x", connect_timeout=2.0, write_timeout=1.0)


def test_a_write_waiting_on_a_lock_is_cancelled_spooled_and_replayed_once(
    pg_schema: tuple[str, str], tmp_path: Path, make_record: MakeRecord
) -> None:
    url, schema = pg_schema
    spool_dir = tmp_path / "spool"
    with open_store(
        url, spool_dir=spool_dir, schema=schema, start_replayer=False, retry_seconds=0, write_timeout=1.0
    ) as store:
        store.record(make_record("uid-before"))
        with psycopg.connect(url) as locker:  # another client holds the table for as long as it likes
            locker.execute(f'LOCK TABLE "{schema}".{records.name} IN ACCESS EXCLUSIVE MODE')
            started = time.monotonic()
            assert store.submit(make_record("uid-locked")).result(timeout=SETTLE_SECONDS) == "uid-locked"
            waited = time.monotonic() - started
            assert spooled(spool_dir) == {"uid-locked"}
            # The server cancelled the write (after half the write timeout): the watchdog had no work.
            assert "QueryCanceled" in (store.counters.last_error or "")
            assert store.counters.rescued == 0
            locker.rollback()
        assert waited < SETTLE_SECONDS
        assert store.replayer.try_replay() == 1
        assert db_uids(store) == ["uid-before", "uid-locked"]
        assert spooled(spool_dir) == set()


def test_a_database_that_stops_answering_does_not_hold_admissions(
    relayed_path: tuple[str, str, DatabaseRelay], tmp_path: Path, make_record: MakeRecord
) -> None:
    url, schema, proxy = relayed_path
    spool_dir = tmp_path / "spool"
    store = open_store(
        url, spool_dir=spool_dir, schema=schema, start_replayer=False, retry_seconds=3600, write_timeout=0.5
    )
    try:
        store.record(make_record("uid-00"))
        proxy.relaying.clear()  # the server stops answering mid-stream
        futures = [store.submit(make_record(f"uid-{index:02d}")) for index in range(1, 6)]
        done, not_done = wait(futures, timeout=SETTLE_SECONDS)
        assert not not_done, "admissions waited on a database that stopped answering"
        assert sorted(future.result() for future in done) == [f"uid-{index:02d}" for index in range(1, 6)]
        assert spooled(spool_dir) == {f"uid-{index:02d}" for index in range(1, 6)}
        assert store.counters.rescued == 5
        assert "StoreStalled" in (store.counters.last_error or "")
        # Answered while the writer still waits: later admissions are not held either.
        assert store.submit(make_record("uid-06")).result(timeout=SETTLE_SECONDS) == "uid-06"
        proxy.relaying.set()  # the server answers again: the stuck batch commits
        store.database._down_until = 0.0  # end the backoff now rather than in an hour
        assert store.replayer.try_replay() >= 0
        assert db_uids(store) == [f"uid-{index:02d}" for index in range(7)]
        assert db_rows(store) == 7  # the stuck batch committed and was replayed: written once
        assert spooled(spool_dir) == set()
    finally:
        proxy.relaying.set()
        store.close()


def test_health_checks_never_pile_up_on_a_database_that_stopped_answering(
    relayed_path: tuple[str, str, DatabaseRelay], tmp_path: Path, make_record: MakeRecord
) -> None:
    url, schema, proxy = relayed_path
    store = open_store(
        url, spool_dir=tmp_path / "spool", schema=schema, start_replayer=False, retry_seconds=0
    )
    try:
        store.record(make_record("uid-00"))
        assert store.health()["reachable"] is True
        proxy.relaying.clear()
        first = threading.Thread(target=store.health, daemon=True)
        first.start()  # waits on the frozen server, holding its thread
        time.sleep(0.5)
        assert first.is_alive()
        connections = proxy.accepted
        for _ in range(3):  # the next probes answer without waiting on the database themselves
            assert store.health()["reachable"] is False
        assert proxy.accepted == connections  # not one more connection attempt
        proxy.relaying.set()
        first.join(SETTLE_SECONDS)
        assert not first.is_alive()
        assert store.health()["reachable"] is True
    finally:
        proxy.relaying.set()
        store.close()


def test_closing_on_a_database_that_stopped_answering_does_not_hang(
    relayed_path: tuple[str, str, DatabaseRelay], tmp_path: Path, make_record: MakeRecord
) -> None:
    """`close()` (the webhook's shutdown) waits for a writer stuck on the database for
    `2 x write_timeout + 1 s` at most: what it held is spooled by then. It used to wait for ever."""
    url, schema, proxy = relayed_path
    spool_dir = tmp_path / "spool"
    store = open_store(
        url, spool_dir=spool_dir, schema=schema, start_replayer=False, retry_seconds=3600, write_timeout=0.5
    )
    try:
        store.record(make_record("uid-00"))
        proxy.relaying.clear()  # the server stops answering with a write in flight
        future = store.submit(make_record("uid-01"))
        closing = threading.Thread(target=store.close)
        closing.start()
        closing.join(SETTLE_SECONDS)
        assert not closing.is_alive(), "close() waited on a database that stopped answering"
        assert future.result(timeout=0) == "uid-01"
        assert spooled(spool_dir) == {"uid-01"}
    finally:
        proxy.relaying.set()


def test_options_in_the_url_are_kept_beside_the_stores_timeouts(pg_schema: tuple[str, str]) -> None:
    from urllib.parse import quote

    from sqlalchemy import text

    from gpupolicy.provenance.engines import create_store_engine

    url, schema = pg_schema
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f'CREATE SCHEMA "{schema}"')
    engine = create_store_engine(f"{url}?options={quote(f'-csearch_path={schema}')}", write_timeout=1.0)
    try:
        with engine.connect() as conn:
            assert conn.execute(text("SHOW search_path")).scalar_one() == schema
            assert conn.execute(text("SHOW statement_timeout")).scalar_one() == "500ms"
    finally:
        engine.dispose()

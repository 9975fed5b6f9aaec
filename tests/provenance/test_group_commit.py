"""Group commit: one writer thread, one transaction (and one fsync) per batch of concurrent
records, each future resolved only once its record is durable; outages mid-batch, a full queue
and a dead writer. Commits are counted with SQLAlchemy's `commit` event and fsyncs with a spy,
never inferred from timing: the writer is held at a gate while the test queues records.

The writer commits through the dialect's `do_commit` (its INSERT runs on the DBAPI connection,
not through SQLAlchemy's `Connection`, so the engine's `commit` event does not fire for it):
commits are counted, and made to fail, there."""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select
from sqlalchemy.exc import OperationalError

from gpupolicy.core.immutable import replace
from gpupolicy.provenance import ProvenanceRecord, StoreOverloaded, WriterStopped
from gpupolicy.provenance.schema import records
from gpupolicy.provenance.spool import Spool
from gpupolicy.provenance.store import ProvenanceStore, StoreUnavailable, open_reader
from tests.provenance.samples import Backend, MakeRecord

WAIT = 60  # seconds: a liveness bound for a stuck test, not a performance threshold


class Gate:
    """Holds the writer inside its first database write until `release()`."""

    def __init__(self, writer: object, monkeypatch: pytest.MonkeyPatch, method: str) -> None:
        self.entered = threading.Event()
        self.opened = threading.Event()
        original: Callable[..., Any] = getattr(writer, method)

        def gated(*args: Any, **kwargs: Any) -> Any:
            self.entered.set()
            assert self.opened.wait(WAIT), "the test never opened the gate"
            return original(*args, **kwargs)

        monkeypatch.setattr(writer, method, gated)

    def wait_entered(self) -> None:
        assert self.entered.wait(WAIT), "the writer never reached the gate"

    def release(self) -> None:
        self.opened.set()


def on_commit(store: ProvenanceStore, before: Callable[[Any], None]) -> None:
    """Call `before(pooled_connection)` ahead of every COMMIT of the store's engine (the writer's
    and SQLAlchemy's own both go through the dialect's `do_commit`)."""
    dialect = store.engine.dialect
    real_commit = dialect.do_commit

    def do_commit(dbapi_connection: Any) -> None:
        before(dbapi_connection)
        real_commit(dbapi_connection)

    dialect.do_commit = do_commit  # type: ignore[method-assign]  # this engine's dialect only


def count_commits(store: ProvenanceStore) -> list[int]:
    """Every transaction the store's engine commits from now on (one element each)."""
    commits: list[int] = []
    on_commit(store, lambda _connection: commits.append(1))
    return commits


def spy_fsync(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    synced: list[str] = []
    real_fsync = os.fsync

    def spy(fd: int) -> None:
        synced.append(str(Path(f"/proc/self/fd/{fd}").readlink()))
        real_fsync(fd)

    monkeypatch.setattr("gpupolicy.provenance.spool.os.fsync", spy)
    return synced


def db_uids(backend: Backend) -> list[str]:
    """The uids in the database, read through a connection of its own (not the store's)."""
    reader = open_reader(backend.url, schema=backend.schema)
    try:
        with reader.engine.connect() as conn:
            return list(conn.execute(select(records.c.uid).order_by(records.c.uid)).scalars())
    finally:
        reader.close()


def row_count(backend: Backend) -> int:
    reader = open_reader(backend.url, schema=backend.schema)
    try:
        with reader.engine.connect() as conn:
            return int(conn.execute(select(func.count()).select_from(records)).scalar_one())
    finally:
        reader.close()


@pytest.fixture
def uids() -> list[str]:
    return [f"uid-{index:03d}" for index in range(40)]


@pytest.fixture
def store_of(backend: Backend) -> Iterator[Callable[..., ProvenanceStore]]:
    opened: list[ProvenanceStore] = []

    def open_(**options: Any) -> ProvenanceStore:
        store: ProvenanceStore = backend.open(**options)
        opened.append(store)
        return store

    yield open_
    for store in opened:
        store.close()


def submit_from_threads(store: ProvenanceStore, batch: list[ProvenanceRecord]) -> list[Future[str]]:
    """Submit from 8 threads at once, as concurrent admissions do."""
    futures: list[Future[str]] = []
    lock = threading.Lock()

    def submit(part: list[ProvenanceRecord]) -> None:
        for record in part:
            future = store.submit(record)
            with lock:
                futures.append(future)

    threads = [threading.Thread(target=submit, args=(batch[index::8],)) for index in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT)
    return futures


def test_concurrent_submits_are_all_durable_in_fewer_commits(
    backend: Backend,
    store_of: Callable[..., ProvenanceStore],
    make_record: MakeRecord,
    monkeypatch: pytest.MonkeyPatch,
    uids: list[str],
) -> None:
    store = store_of()
    commits = count_commits(store)
    gate = Gate(store.writer, monkeypatch, "_insert_rows")
    first = store.submit(make_record("uid-first"))
    gate.wait_entered()  # the writer holds a batch of one; everything below queues behind it
    futures = submit_from_threads(store, [make_record(uid) for uid in uids])
    assert not any(future.done() for future in [first, *futures])  # nothing is durable yet
    gate.release()
    assert sorted(future.result(WAIT) for future in futures) == uids
    assert first.result(WAIT) == "uid-first"
    assert db_uids(backend) == sorted(["uid-first", *uids])  # durable: another connection sees them
    assert len(commits) == 2 < len(uids) + 1  # the gated batch, then all 40 together
    assert store.counters.commits == 2 and store.counters.batches == 2
    assert store.counters.writes == len(uids) + 1 and store.counters.spooled == 0


def test_a_future_is_resolved_only_after_the_commit(
    tmp_path: Path, make_record: MakeRecord, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = Backend("sqlite", f"sqlite:///{tmp_path / 'provenance.db'}", None, tmp_path / "spool")
    store = backend.open()
    try:
        seen_at_commit: list[bool] = []
        future_box: list[Future[str]] = []
        on_commit(store, lambda _connection: seen_at_commit.extend(future.done() for future in future_box))

        future_box.append(store.submit(make_record("uid-1")))
        assert future_box[0].result(WAIT) == "uid-1"
        assert seen_at_commit == [False]  # still pending while the commit ran
    finally:
        store.close()


def test_max_batch_bounds_each_transaction(
    tmp_path: Path, make_record: MakeRecord, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = Backend("sqlite", f"sqlite:///{tmp_path / 'provenance.db'}", None, tmp_path / "spool")
    store = backend.open(max_batch=10)
    try:
        commits = count_commits(store)
        sizes: list[int] = []
        original = store.writer._insert_rows

        def sized(rows: list[dict[str, Any]]) -> None:
            sizes.append(len(rows))
            original(rows)

        monkeypatch.setattr(store.writer, "_insert_rows", sized)
        gate = Gate(store.writer, monkeypatch, "_insert_rows")
        first = store.submit(make_record("uid-first"))
        gate.wait_entered()
        futures = [store.submit(make_record(f"uid-{index:02d}")) for index in range(35)]
        gate.release()
        assert [future.result(WAIT) for future in futures] == [f"uid-{index:02d}" for index in range(35)]
        assert first.result(WAIT) == "uid-first"
        assert sizes == [1, 10, 10, 10, 5] and len(commits) == 5
        assert row_count(backend) == 36
    finally:
        store.close()


def test_a_full_queue_refuses_submit_and_makes_record_wait(
    tmp_path: Path, make_record: MakeRecord, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = Backend("sqlite", f"sqlite:///{tmp_path / 'provenance.db'}", None, tmp_path / "spool")
    store = backend.open(max_queue=3)
    try:
        gate = Gate(store.writer, monkeypatch, "_insert_rows")
        first = store.submit(make_record("uid-first"))
        gate.wait_entered()  # taken by the writer: the queue is empty again
        queued = [store.submit(make_record(f"uid-{index}")) for index in range(3)]
        with pytest.raises(StoreOverloaded):
            store.submit(make_record("uid-refused"))
        waited: list[str] = []
        blocked = threading.Thread(target=lambda: waited.append(store.record(make_record("uid-waits"))))
        blocked.start()
        gate.release()
        blocked.join(WAIT)
        assert waited == ["uid-waits"]
        assert [future.result(WAIT) for future in [first, *queued]] == [
            "uid-first",
            "uid-0",
            "uid-1",
            "uid-2",
        ]
        assert sorted(db_uids(backend)) == ["uid-0", "uid-1", "uid-2", "uid-first", "uid-waits"]
    finally:
        store.close()


class CommitFailure:
    """Make the database fail while a batch is being written: after its INSERT, at COMMIT."""

    def __init__(self, backend: Backend, store: ProvenanceStore) -> None:
        self.armed = False
        self.tripped = 0

        def before_commit(dbapi_connection: Any) -> None:
            if not self.armed:
                return
            self.tripped += 1
            if backend.name == "postgresql":  # the server ends the session: COMMIT cannot arrive
                _terminate(backend.url, dbapi_connection.dbapi_connection.info.backend_pid)
            else:
                raise sqlite3.OperationalError("disk I/O error")  # as the driver raises it

        on_commit(store, before_commit)


def _terminate(url: str, pid: int) -> None:
    import time

    import psycopg

    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        deadline = time.monotonic() + WAIT
        while admin.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone():
            assert time.monotonic() < deadline, "the backend outlived pg_terminate_backend"
            time.sleep(0.01)


def test_database_down_mid_batch_spools_the_whole_batch_and_replays_it_once(
    backend: Backend,
    store_of: Callable[..., ProvenanceStore],
    make_record: MakeRecord,
    monkeypatch: pytest.MonkeyPatch,
    uids: list[str],
) -> None:
    store = store_of(retry_seconds=0)
    failure = CommitFailure(backend, store)
    synced = spy_fsync(monkeypatch)
    gate = Gate(store.writer, monkeypatch, "_write_batch")
    first = store.submit(make_record("uid-first"))
    gate.wait_entered()
    futures = submit_from_threads(store, [make_record(uid) for uid in uids])
    failure.armed = True
    gate.release()
    # Every caller is told "durable": the records are in the spool, fsync'ed ...
    assert first.result(WAIT) == "uid-first"
    assert sorted(future.result(WAIT) for future in futures) == uids
    assert failure.tripped == 2  # both batches reached COMMIT, and both commits failed
    assert db_uids(backend) == []  # ... and nothing of either batch in the database
    spooled = [str(item["uid"]) for item in Spool(backend.spool_dir).waiting()]
    assert sorted(spooled) == sorted(["uid-first", *uids])
    assert synced.count(str(backend.spool_dir / "pending.jsonl")) == 2  # one fsync per batch
    assert store.counters.spooled == len(uids) + 1 and store.counters.writes == 0

    failure.armed = False  # the database is back
    assert store.replayer.replay_spool() == len(uids) + 1
    assert db_uids(backend) == sorted(["uid-first", *uids])
    assert store.replayer.replay_spool() == 0 and row_count(backend) == len(uids) + 1
    assert store.health()["spool_backlog"] == 0


def test_a_commit_whose_outcome_is_unknown_is_spooled_and_still_written_once(
    backend: Backend,
    store_of: Callable[..., ProvenanceStore],
    make_record: MakeRecord,
    monkeypatch: pytest.MonkeyPatch,
    uids: list[str],
) -> None:
    """The COMMIT reached the database, but the answer was lost: the batch is in the database
    *and* spooled; the replay's ON CONFLICT DO NOTHING keeps one row per uid."""
    store = store_of(retry_seconds=0)
    dialect = store.engine.dialect
    real_commit = dialect.do_commit
    lost_answers: list[int] = []

    def commit_then_fail(dbapi_connection: Any) -> None:
        real_commit(dbapi_connection)
        lost_answers.append(1)
        raise OperationalError("COMMIT", {}, Exception("server closed the connection unexpectedly"))

    gate = Gate(store.writer, monkeypatch, "_insert_rows")
    first = store.submit(make_record("uid-first"))
    gate.wait_entered()
    futures = submit_from_threads(store, [make_record(uid) for uid in uids])
    monkeypatch.setattr(dialect, "do_commit", commit_then_fail)
    gate.release()
    assert sorted(future.result(WAIT) for future in [first, *futures]) == sorted(["uid-first", *uids])
    monkeypatch.setattr(dialect, "do_commit", real_commit)
    assert len(lost_answers) == 2
    assert db_uids(backend) == sorted(["uid-first", *uids])  # committed after all
    assert len(Spool(backend.spool_dir).waiting()) == len(uids) + 1  # and spooled
    assert store.replayer.replay_spool() == 0  # nothing new: nothing written twice
    assert row_count(backend) == len(uids) + 1 and store.health()["spool_backlog"] == 0


def test_a_record_the_database_refuses_does_not_take_its_batch_with_it(
    pg_schema: tuple[str, str], tmp_path: Path, make_record: MakeRecord, monkeypatch: pytest.MonkeyPatch
) -> None:

    url, schema = pg_schema
    backend = Backend("postgresql", url, schema, tmp_path / "spool")
    store = backend.open()
    try:
        gate = Gate(store.writer, monkeypatch, "_write_batch")
        first = store.submit(make_record("uid-first"))
        gate.wait_entered()
        too_long = replace(make_record("uid-bad"), kind="K" * 300)  # VARCHAR(128)
        futures = [store.submit(record) for record in (make_record("uid-a"), too_long, make_record("uid-b"))]
        gate.release()
        assert [future.result(WAIT) for future in [first, *futures]] == [
            "uid-first",
            "uid-a",
            "uid-bad",
            "uid-b",
        ]
        assert db_uids(backend) == ["uid-a", "uid-b", "uid-first"]
        assert [item["uid"] for item in Spool(backend.spool_dir).waiting()] == ["uid-bad"]
    finally:
        store.close()


def test_a_batch_that_fails_unexpectedly_is_spooled_and_the_writer_carries_on(
    tmp_path: Path, make_record: MakeRecord, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    backend = Backend("sqlite", f"sqlite:///{tmp_path / 'provenance.db'}", None, tmp_path / "spool")
    store = backend.open(retry_seconds=0)
    try:
        entered, opened = threading.Event(), threading.Event()
        real_write_batch = store.writer._write_batch

        def broken_once(batch: list[Any]) -> None:
            if not entered.is_set():
                entered.set()
                assert opened.wait(WAIT)
                raise RuntimeError("a bug in the writer")
            real_write_batch(batch)

        monkeypatch.setattr(store.writer, "_write_batch", broken_once)
        first = store.submit(make_record("uid-first"))
        assert entered.wait(WAIT)
        queued = [store.submit(make_record(f"uid-{index}")) for index in range(3)]
        opened.set()
        assert first.result(WAIT) == "uid-first"  # spooled, not lost
        assert [future.result(WAIT) for future in queued] == ["uid-0", "uid-1", "uid-2"]
        assert store.record(make_record("uid-later")) == "uid-later"
        health = store.health()
        assert health["writer"] == {"running": True, "error": None, "queued": 0, "closed": False}
        assert [item["uid"] for item in Spool(backend.spool_dir).waiting()] == ["uid-first"]
        assert any(
            item.levelname == "ERROR" and "writing a batch failed" in item.message and item.exc_info
            for item in caplog.records
        )
        assert store.replayer.try_replay() == 1
    finally:
        store.close()
    assert db_uids(backend) == ["uid-0", "uid-1", "uid-2", "uid-first", "uid-later"]


class Halt(BaseException):
    """Not an Exception: what ends a thread rather than a batch (SystemExit, KeyboardInterrupt)."""


def test_a_stopped_writer_fails_every_waiting_and_later_record_loudly(
    tmp_path: Path, make_record: MakeRecord, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    backend = Backend("sqlite", f"sqlite:///{tmp_path / 'provenance.db'}", None, tmp_path / "spool")
    store = backend.open()
    try:
        entered, opened = threading.Event(), threading.Event()

        def halted(_batch: object) -> None:
            entered.set()
            assert opened.wait(WAIT)
            raise Halt("the writer thread was stopped")

        monkeypatch.setattr(store.writer, "_write_batch", halted)
        first = store.submit(make_record("uid-first"))
        assert entered.wait(WAIT)
        queued = [store.submit(make_record(f"uid-{index}")) for index in range(3)]
        opened.set()
        for future in [first, *queued]:
            with pytest.raises(WriterStopped, match="Halt: the writer thread was stopped"):
                future.result(WAIT)
        with pytest.raises(WriterStopped, match="writer died"):
            store.submit(make_record("uid-later"))
        with pytest.raises(WriterStopped):
            store.record(make_record("uid-later"))
        health = store.health()
        assert health["writer"]["running"] is False
        assert "the writer thread was stopped" in str(health["writer"]["error"])
        assert any(item.levelname == "CRITICAL" and "writer died" in item.message for item in caplog.records)
    finally:
        store.close()
    assert db_uids(backend) == []


def test_no_spool_and_no_database_fails_the_batch_not_the_writer(
    tmp_path: Path, make_record: MakeRecord
) -> None:
    from gpupolicy.provenance.engines import create_store_engine

    blocked = tmp_path / "db"
    blocked.write_text("a file where the database directory should be")
    store = ProvenanceStore(create_store_engine(f"sqlite:///{blocked / 'p.db'}"), spool=None, retry_seconds=0)
    try:
        with pytest.raises(StoreUnavailable, match="not stored"):
            store.record(make_record("uid-1"))
        assert store.health()["writer"]["running"] is True  # the next record may succeed
        blocked.unlink()
        blocked.mkdir()
        assert store.record(make_record("uid-2")) == "uid-2"
    finally:
        store.close()


def test_close_writes_what_is_queued_then_refuses(
    tmp_path: Path, make_record: MakeRecord, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = Backend("sqlite", f"sqlite:///{tmp_path / 'provenance.db'}", None, tmp_path / "spool")
    store = backend.open()
    gate = Gate(store.writer, monkeypatch, "_insert_rows")
    first = store.submit(make_record("uid-first"))
    gate.wait_entered()
    queued = [store.submit(make_record(f"uid-{index}")) for index in range(5)]
    closer = threading.Thread(target=store.close)
    closer.start()
    gate.release()
    closer.join(WAIT)
    assert [future.result(WAIT) for future in [first, *queued]] == [
        "uid-first",
        *[f"uid-{i}" for i in range(5)],
    ]
    assert row_count(backend) == 6
    with pytest.raises(WriterStopped, match="closed"):
        store.submit(make_record("uid-late"))


def test_a_torn_tail_does_not_swallow_the_next_batch(tmp_path: Path, make_record: MakeRecord) -> None:
    spool = Spool(tmp_path / "spool")
    spool.append(make_record("uid-0").to_dict())
    with spool.pending_path.open("ab") as handle:
        handle.write(b'{"uid": "uid-torn", "ti')  # a crash in the middle of an append
    spool.append_many([make_record(f"uid-{index}").to_dict() for index in (1, 2)])
    spool.take()
    [batch] = spool.batches()
    assert [item["uid"] for item in batch.records] == ["uid-0", "uid-1", "uid-2"]
    assert batch.torn_lines == 1

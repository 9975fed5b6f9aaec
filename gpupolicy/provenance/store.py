"""The provenance store: SQLAlchemy over SQLite (default) or PostgreSQL, with a durable spool.

Writes go through one writer thread (group commit). `submit(record)` queues the record and
returns a `concurrent.futures.Future` that resolves to the record id only once the record is
durable: committed to the database (SQLite in WAL mode with `synchronous=FULL`; PostgreSQL's
commit), or — when the database cannot be reached — appended and fsync'ed to the spool
(`spool.py`). The writer takes everything queued (at most `max_batch` records) and writes it in
one transaction, so concurrent admissions share one commit and one fsync; when the database
fails — whichever way: refused, reset, a role that may not log in, a read-only database, a full
disk, an error the driver raises outside SQLAlchemy's wrapping, even a bug in the batch's
handling — the whole batch goes to the spool with one write and one fsync, its futures
resolve, and the writer carries on with the next batch. After a failure no pooled connection
is used again (one opened during the outage may stay read-only or point at a server that is
gone). `record(record)` is the synchronous form (`submit(record).result()`). Only if the
writer thread itself is stopped (a `BaseException`), every waiting future fails with
`WriterStopped` and so does every later `submit`: loudly, never silently.

A background replayer (and `open_store`, at startup) moves spooled records into the database.
Inserts are idempotent by the admission request uid (primary key + `ON CONFLICT DO NOTHING`),
so a replay cut short by a crash and run again writes nothing twice, and a batch whose commit
failed half-way (its outcome unknown) may be spooled and replayed without a duplicate.

A database that hangs instead of failing (a lock held elsewhere, a network path that drops
packets, a server that stopped answering) must not hold admissions either. PostgreSQL sessions
carry a `statement_timeout` and `lock_timeout` (the server cancels a write that waits) and
TCP keepalives and `tcp_user_timeout` (the client drops a connection whose packets go
unanswered). Whatever the cause, a watchdog thread spools what waits for a writer stuck in one
batch for longer than `write_timeout`: those records go to the spool with one fsync and their
futures resolve; the stuck batch may still commit later, and the uid key keeps its replay from
writing anything twice.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, and_, create_engine, event, func, or_, select, text, update
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import DataError, DBAPIError, IntegrityError, SQLAlchemyError
from sqlalchemy.sql import ColumnElement

from gpupolicy.provenance.filters import Cursor, RecordFilter
from gpupolicy.provenance.locations import DB_FILE
from gpupolicy.provenance.record import (
    STATUS_ADMITTED,
    STATUSES,
    ProvenanceRecord,
)
from gpupolicy.provenance.schema import LATEST, current_version, migrate, records
from gpupolicy.provenance.spool import Spool

log = logging.getLogger("gpupolicy.provenance")

MAX_PAGE = 1000


class StoreUnavailable(RuntimeError):
    """The database cannot be reached (and, for writes, there is no spool to fall back on)."""


class WriterStopped(StoreUnavailable):
    """The store's writer thread is not running (it died, or the store was closed): nothing
    submitted now can be made durable."""


class StoreStalled(StoreUnavailable):
    """The database took a write and has not answered within `write_timeout`."""


class StoreOverloaded(StoreUnavailable):
    """`max_queue` records are already waiting for the writer."""


def normalise_url(url: str) -> URL:
    """`postgresql://` and `postgres://` use the psycopg 3 driver; `sqlite:///path` stays."""
    if url.startswith("postgres://"):
        url = "postgresql://" + url[len("postgres://") :]
    parsed = make_url(url)
    if parsed.drivername == "postgresql":
        parsed = parsed.set(drivername="postgresql+psycopg")
    if parsed.get_backend_name() not in ("sqlite", "postgresql"):
        raise ValueError(
            f"unsupported provenance database {parsed.drivername!r}: use sqlite:/// or postgresql://"
        )
    return parsed


def default_url(data_dir: Path) -> str:
    return f"sqlite:///{data_dir / DB_FILE}"


def create_store_engine(
    url: str, *, schema: str | None = None, connect_timeout: float = 2.0, write_timeout: float = 2.0
) -> Engine:
    """The store's engine. Its errors never quote the statement's parameters (`hide_parameters`):
    they are a record's content, and errors are logged."""
    parsed = normalise_url(url)
    if parsed.get_backend_name() == "sqlite":
        # A busy database (another process writing) waits at most `connect_timeout`, then the
        # record goes to the spool: an admission request must not hang on a lock.
        busy_ms = max(100, int(connect_timeout * 1000))
        engine = create_engine(parsed, connect_args={"timeout": busy_ms / 1000}, hide_parameters=True)

        @event.listens_for(engine, "connect")
        def _sqlite_connect(dbapi_connection: Any, _record: Any) -> None:
            # Let SQLAlchemy emit BEGIN itself (pysqlite's implicit transactions skip DDL), then
            # ask for durability: WAL, and fsync at every commit.
            dbapi_connection.isolation_level = None
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=FULL")
            cursor.execute(f"PRAGMA busy_timeout={busy_ms}")
            cursor.close()

        @event.listens_for(engine, "begin")
        def _sqlite_begin(conn: Any) -> None:
            immediate = conn.get_execution_options().get("sqlite_immediate")
            conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

        return engine
    return create_engine(
        parsed,
        connect_args=_postgres_connect_args(schema, connect_timeout, write_timeout),
        pool_pre_ping=True,
        hide_parameters=True,
    )


def _postgres_connect_args(
    schema: str | None, connect_timeout: float, write_timeout: float
) -> dict[str, Any]:
    """libpq parameters that bound every wait: https://www.postgresql.org/docs/current/libpq-connect.html
    (connect_timeout, keepalives*, tcp_user_timeout) and, sent as session settings in `options`,
    https://www.postgresql.org/docs/current/runtime-config-client.html (statement_timeout,
    lock_timeout: the server cancels a write that waits past them)."""
    timeout_ms = max(100, int(write_timeout * 1000))
    # The server cancels first, cleanly, in half the time; the store's watchdog is for a server
    # that cannot cancel anything any more.
    server_ms = max(50, timeout_ms // 2)
    options = [f"-c statement_timeout={server_ms}", f"-c lock_timeout={server_ms}"]
    if schema is not None:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,62}", schema):
            raise ValueError(f"invalid schema name {schema!r}")
        options.append(f"-c search_path={schema}")
    return {
        "connect_timeout": max(1, round(connect_timeout)),
        "options": " ".join(options),
        # A peer that vanished (node lost, network partition) is noticed in seconds, not after
        # the kernel's ~15 minutes of retransmissions.
        "keepalives": 1,
        "keepalives_idle": 5,
        "keepalives_interval": 2,
        "keepalives_count": 3,
        "tcp_user_timeout": timeout_ms,
    }


def _row(record: ProvenanceRecord) -> dict[str, Any]:
    return {
        "uid": record.uid,
        "recorded_at": record.time,
        "operation": record.operation,
        "username": record.user.get("username"),
        "object_uid": record.object_uid,
        "kind": record.kind,
        "namespace": record.namespace,
        "name": record.name,
        "generation": record.generation,
        "experiment": record.experiment,
        "arm": record.arm,
        "policy_version": record.policy_version,
        "policy_digest": record.policy_digest,
        "template_hash": record.template_hash,
        "status": record.status,
        "status_changed_at": record.status_changed_at,
        "git_revision": record.git_revision,
        "body": record.body_json(),
    }


def _from_row(row: Any) -> ProvenanceRecord:
    data = json.loads(row.body)
    data["status"] = row.status
    data["status_changed_at"] = row.status_changed_at
    return ProvenanceRecord.from_dict(data)


@dataclass(frozen=True, slots=True)
class _Pending:
    record: ProvenanceRecord
    future: Future[str]


def _start(future: Future[str]) -> None:
    """PENDING -> RUNNING (no longer cancellable); a future already running or settled is left
    (asked anyway, `set_running_or_notify_cancel` logs a CRITICAL "unexpected state" line)."""
    if future.running() or future.done():
        return
    with contextlib.suppress(InvalidStateError, RuntimeError):  # taken by the other thread meanwhile
        future.set_running_or_notify_cancel()


def _settle(future: Future[str], *, result: str | None = None, error: BaseException | None = None) -> None:
    """Resolve a future the writer took (RUNNING: a caller can no longer cancel it) or one still
    queued; a future cancelled before the writer took it has nobody waiting for it."""
    with contextlib.suppress(InvalidStateError):  # cancelled meanwhile (only while still queued)
        if future.cancelled():
            return
        if error is not None:
            future.set_exception(error)
        else:
            assert result is not None
            future.set_result(result)


class DbapiInsert:
    """The writer's `INSERT … ON CONFLICT (uid) DO NOTHING`, compiled once by SQLAlchemy for the
    engine's dialect, run with the DBAPI's `executemany` on a pooled connection and committed
    through the dialect's `do_commit` (as SQLAlchemy's own commits are):
    https://docs.sqlalchemy.org/en/20/core/connections.html#working-with-the-dbapi-cursor-directly
    Each admission waits for its batch's commit, and SQLAlchemy's execution path (events,
    transaction bookkeeping, result set-up) cost the writer more CPU than the INSERT and COMMIT
    themselves, while holding the GIL the event loop needs. Errors come out as SQLAlchemy's
    exceptions (IntegrityError, DataError, OperationalError …) as from `Connection.execute`, and
    a connection the driver reports broken is invalidated, not returned to the pool."""

    def __init__(self, statement: Any, engine: Engine) -> None:
        compiled = statement.compile(
            dialect=engine.dialect, column_keys=[column.name for column in records.columns]
        )
        self.sql = str(compiled)
        self._order: tuple[str, ...] | None = (
            tuple(compiled.positiontup or ()) if compiled.positional else None
        )
        self._engine = engine
        # pysqlite opens no transaction itself here (isolation_level None, see create_store_engine)
        self._begin = "BEGIN" if engine.dialect.name == "sqlite" else None

    def parameters(self, rows: Sequence[dict[str, Any]]) -> Sequence[Any]:
        order = self._order
        return rows if order is None else [tuple(row[name] for name in order) for row in rows]

    def __call__(self, rows: Sequence[dict[str, Any]]) -> None:
        dialect = self._engine.dialect
        try:
            # The pool connects (or reconnects after its ping found the session gone) here, and
            # raises the DBAPI's own error: a refused connection, a role that may not log in.
            connection = self._engine.raw_connection()
        except dialect.loaded_dbapi.Error as exc:
            raise DBAPIError.instance(None, None, exc, dialect.loaded_dbapi.Error, dialect=dialect) from exc
        try:
            cursor = connection.cursor()
            try:
                if self._begin is not None:
                    cursor.execute(self._begin)
                cursor.executemany(self.sql, self.parameters(rows))
                dialect.do_commit(connection)  # the pooled connection, as SQLAlchemy passes it
            finally:
                cursor.close()
        except dialect.loaded_dbapi.Error as exc:
            _rollback_quietly(connection)
            broken = dialect.is_disconnect(exc, connection.dbapi_connection, None)
            if broken:
                connection.invalidate(exc)
            raise DBAPIError.instance(
                self.sql,
                None,
                exc,
                dialect.loaded_dbapi.Error,
                connection_invalidated=broken,
                dialect=dialect,
            ) from exc
        except BaseException:
            _rollback_quietly(connection)
            raise
        finally:
            connection.close()  # back to the pool (or discarded, when invalidated)


def _rollback_quietly(connection: Any) -> None:
    with contextlib.suppress(Exception):  # the connection may be gone: the pool discards it
        connection.rollback()


@dataclass(frozen=True, slots=True)
class Page:
    items: list[ProvenanceRecord]
    next_cursor: str | None


@dataclass(slots=True)
class Counters:
    writes: int = 0  # committed straight to the database
    spooled: int = 0  # appended to the spool instead
    replayed: int = 0  # spooled records inserted by a replay (duplicates not counted)
    failures: int = 0  # database errors seen (each one sent a record to the spool or failed a replay)
    torn_spool_lines: int = 0
    commits: int = 0  # transactions the writer committed (one per batch when all goes well)
    rescued: int = 0  # spooled by the watchdog while the writer was stuck on the database
    batches: int = 0  # batches the writer took from its queue
    last_error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class ProvenanceStore:
    def __init__(
        self,
        engine: Engine,
        *,
        spool: Spool | None,
        schema: str | None = None,
        retry_seconds: float = 5.0,
        replay_interval: float = 5.0,
        max_batch: int = 256,
        max_queue: int = 4096,
        write_timeout: float = 2.0,
    ) -> None:
        if max_batch < 1 or max_queue < 1:
            raise ValueError("max_batch and max_queue must be at least 1")
        if write_timeout <= 0:
            raise ValueError("write_timeout must be positive")
        self.engine = engine
        self.write_timeout = write_timeout
        self.max_batch = max_batch
        self.max_queue = max_queue
        self.schema = schema
        self.spool = spool
        self.retry_seconds = retry_seconds
        self.replay_interval = replay_interval
        self.counters = Counters()
        self._schema_version: int | None = None
        self._down_until = 0.0
        self._state_lock = threading.Lock()
        self._replay_lock = threading.Lock()
        self._health_check = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        # The write queue and its writer thread (started by the first submit).
        self._queue: deque[_Pending] = deque()
        self._queue_changed = threading.Condition()
        self._writer: threading.Thread | None = None
        self._writer_error: str | None = None
        self._closing = False
        # The batch the writer is writing and since when (None between batches), for the watchdog.
        self._in_flight: list[_Pending] = []
        self._in_flight_since: float | None = None
        self._watchdog: threading.Thread | None = None
        # SQLite has one writer at a time: threads of this process queue here instead of
        # spending the busy timeout (kept for other processes) against each other.
        self._write_lock: contextlib.AbstractContextManager[Any] = (
            threading.Lock() if engine.dialect.name == "sqlite" else contextlib.nullcontext()
        )
        dialect = engine.dialect.name
        if dialect == "postgresql":
            from sqlalchemy.dialects.postgresql import insert as pg_insert

            self._insert = pg_insert(records).on_conflict_do_nothing(index_elements=["uid"])
        else:
            from sqlalchemy.dialects.sqlite import insert as sqlite_insert

            self._insert = sqlite_insert(records).on_conflict_do_nothing(index_elements=["uid"])  # type: ignore[assignment]
        self._dbapi_insert = DbapiInsert(self._insert, engine)

    @property
    def backend(self) -> str:
        return self.engine.dialect.name

    # -- availability ----------------------------------------------------------------------
    def _mark_down(self, exc: BaseException) -> None:
        with self._state_lock:
            self.counters.failures += 1
            self.counters.last_error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            self._down_until = time.monotonic() + self.retry_seconds
        log.warning("provenance database unavailable: %s", self.counters.last_error)
        # No pooled session outlives a failure: one opened during it may stay unusable when the
        # database is back (read-only: a primary demoted to a standby, SQLite opened on a
        # read-only file system; or connected to a server that is gone). Connections in use
        # (a writer stuck on a hanging server) are left to their holder.
        self.engine.dispose()

    def _mark_up(self) -> None:
        with self._state_lock:
            self._down_until = 0.0
            self.counters.last_error = None

    def _in_backoff(self) -> bool:
        return time.monotonic() < self._down_until

    def ensure_schema(self) -> int:
        """Migrate to the latest schema (once per store; retried after a failure)."""
        if self._schema_version is None:
            if self.schema is not None and self.backend == "postgresql":
                with self.engine.begin() as conn:
                    conn.execute(text(f'CREATE SCHEMA IF NOT EXISTS "{self.schema}"'))
            self._schema_version = migrate(self.engine)
        return self._schema_version

    # -- writes ----------------------------------------------------------------------------
    def record(self, record: ProvenanceRecord) -> str:
        """Store `record`; durable when this returns. Returns the record id (the request uid).
        Waits for room when the queue is full; raises what `submit` and the future raise."""
        return self.submit(record, block=True).result()

    def submit(self, record: ProvenanceRecord, *, block: bool = False) -> Future[str]:
        """Queue `record` for the writer. The future resolves to the record id once the record
        is durable (committed, or fsync'ed to the spool), or fails with `StoreUnavailable` when
        neither took it (no spool, or the spool's disk failed) or with `WriterStopped`.

        Raises `WriterStopped` at once when the writer is dead or the store closed, and
        `StoreOverloaded` when `max_queue` records are waiting (`block=True` waits for room
        instead: for callers that may block, never the event loop)."""
        future: Future[str] = Future()
        with self._queue_changed:
            while True:
                self._check_writer()
                if len(self._queue) < self.max_queue:
                    break
                if not block:
                    raise StoreOverloaded(
                        f"provenance: {len(self._queue)} records already wait for the writer"
                    )
                self._queue_changed.wait()
            if self._writer is None:
                self._writer = threading.Thread(
                    target=self._write_loop, name="provenance-writer", daemon=True
                )
                self._writer.start()
                if self.spool is not None:
                    self._watchdog = threading.Thread(
                        target=self._watch_writer, name="provenance-watchdog", daemon=True
                    )
                    self._watchdog.start()
            self._queue.append(_Pending(record, future))
            self._queue_changed.notify_all()
        return future

    def _check_writer(self) -> None:
        """Under `_queue_changed`: raise unless the writer runs (or may be started)."""
        if self._writer_error is not None:
            raise WriterStopped(f"provenance writer died: {self._writer_error}")
        if self._closing:
            raise WriterStopped("the provenance store is closed")
        if self._writer is not None and not self._writer.is_alive():
            raise WriterStopped("provenance writer is not running")

    def _write_loop(self) -> None:
        batch: list[_Pending] = []
        try:
            while True:
                with self._queue_changed:
                    while not self._queue and not self._closing:
                        self._queue_changed.wait()
                    if not self._queue:
                        return  # closing, and everything queued is written
                    batch = [self._queue.popleft() for _ in range(min(self.max_batch, len(self._queue)))]
                    self._in_flight, self._in_flight_since = batch, time.monotonic()
                    self._queue_changed.notify_all()  # room for a blocked record()
                for item in batch:
                    # RUNNING: no longer cancellable (a cancelled one is still written, unanswered)
                    _start(item.future)
                try:
                    self._write_batch(batch)
                except Exception as exc:  # whatever failed, the batch is spooled and answered
                    self._batch_failed(batch, exc)
                with self._queue_changed:
                    self._in_flight, self._in_flight_since = [], None
                batch = []
        except BaseException as exc:  # not an Exception (interpreter exit): never leave a caller waiting
            self._writer_died(exc, batch)

    def _watch_writer(self) -> None:
        """Spool what waits on a writer stuck in one batch for longer than `write_timeout`."""
        interval = min(0.25, self.write_timeout / 4)
        while not self._stop.wait(interval):
            with self._queue_changed:
                if self._writer_error is not None or (
                    self._closing and not self._queue and self._in_flight_since is None
                ):
                    return  # nothing left to watch (a batch in flight may still get stuck)
                since = self._in_flight_since
                if since is None or time.monotonic() - since < self.write_timeout:
                    continue
                waiting = [item for item in self._in_flight if not item.future.done()]
                waiting += self._queue
                self._queue.clear()
                self._queue_changed.notify_all()
            if waiting:
                self._rescue(waiting, stalled_for=time.monotonic() - since)

    def _rescue(self, waiting: list[_Pending], *, stalled_for: float) -> None:
        """Spool records the stuck writer holds or would take next, and answer their callers."""
        self._mark_down(StoreStalled(f"a write has waited {stalled_for:.1f} s for the database"))
        for item in waiting:
            _start(item.future)
        if self._spool_and_settle(waiting):
            with self._state_lock:
                self.counters.rescued += len(waiting)

    def _batch_failed(self, batch: list[_Pending], exc: Exception) -> None:
        """A batch failed in a way `_write_batch` did not foresee (a driver raising an error of its
        own, a bug): its records still go to the spool and its callers are answered; the writer
        carries on with the next batch."""
        log.error("provenance: writing a batch failed; its records go to the spool", exc_info=exc)
        self._mark_down(exc)
        self._spool_and_settle([item for item in batch if not item.future.done()])

    def _spool_and_settle(self, items: list[_Pending]) -> bool:
        """Append `items` to the spool with one fsync and resolve their futures to the record
        ids; when that fails too (no spool, its disk failed), fail them with StoreUnavailable.
        True when they were spooled."""
        if not items:
            return True
        try:
            if self.spool is None:
                raise StoreUnavailable(f"provenance database unavailable: {self.counters.last_error}")
            self.spool.append_many([item.record.to_dict() for item in items])
        except Exception as exc:  # OSError, or no spool: the caller decides (the webhook admits)
            log.error("provenance: %d records could not be stored: %s", len(items), exc)
            for item in items:
                error = StoreUnavailable(f"provenance record {item.record.uid} not stored: {exc}")
                error.__cause__ = exc
                _settle(item.future, error=error)
            return False
        with self._state_lock:
            self.counters.spooled += len(items)
        for item in items:
            _settle(item.future, result=item.record.uid)
        return True

    def _writer_died(self, exc: BaseException, batch: list[_Pending]) -> None:
        log.critical("provenance writer died; records can no longer be stored", exc_info=exc)
        reason = f"{type(exc).__name__}: {exc}"
        with self._queue_changed:
            self._writer_error = reason
            waiting = [*batch, *self._queue]
            self._queue.clear()
            self._queue_changed.notify_all()
        with self._state_lock:
            self.counters.last_error = f"writer died: {reason}"
        for item in waiting:
            error = WriterStopped(f"provenance writer died: {reason}")
            error.__cause__ = exc
            _settle(item.future, error=error)

    def _write_batch(self, batch: list[_Pending]) -> None:
        """Make every record of `batch` durable (one commit, or one spool append), then settle
        its futures: never before."""
        with self._state_lock:
            self.counters.batches += 1
        leftover = {id(record) for record in self._commit([item.record for item in batch])}
        self._spool_and_settle([item for item in batch if id(item.record) in leftover])
        for item in batch:
            if id(item.record) not in leftover:
                _settle(item.future, result=item.record.uid)

    def _commit(self, records: list[ProvenanceRecord]) -> list[ProvenanceRecord]:
        """Insert `records` in one transaction; returns those the database did not take (all
        of them when it is unreachable or in backoff), for the spool."""
        if self._in_backoff():
            return records
        try:
            self.ensure_schema()
            self._insert_rows([_row(record) for record in records])
        except (DataError, IntegrityError) as exc:  # a record's content, not the database
            if len(records) == 1:
                self._refused(records[0], exc)
                return records
            return self._commit_one_by_one(records)
        except Exception as exc:  # the database failed, whichever way: the batch goes to the spool
            self._mark_down(exc)
            return records
        self._mark_up()
        with self._state_lock:
            self.counters.writes += len(records)
        return []

    def _commit_one_by_one(self, records: list[ProvenanceRecord]) -> list[ProvenanceRecord]:
        """A batch the database refused for one record's content: the others still go in."""
        leftover: list[ProvenanceRecord] = []
        for index, record in enumerate(records):
            try:
                self._insert_rows([_row(record)])
            except (DataError, IntegrityError) as exc:
                self._refused(record, exc)
                leftover.append(record)
            except Exception as exc:
                self._mark_down(exc)
                return leftover + records[index:]
            else:
                with self._state_lock:
                    self.counters.writes += 1
        return leftover

    def _refused(self, record: ProvenanceRecord, exc: Exception) -> None:
        log.error("provenance: record %s refused by the database, spooled: %s", record.uid, exc)
        with self._state_lock:
            self.counters.failures += 1

    def _insert_rows(self, rows: list[dict[str, Any]]) -> None:
        """One transaction (one commit, one fsync) for `rows`."""
        with self._write_lock:
            self._dbapi_insert(rows)
        with self._state_lock:
            self.counters.commits += 1

    def writer_status(self) -> dict[str, Any]:
        with self._queue_changed:
            running = self._writer is not None and self._writer.is_alive()
            return {
                "running": running,
                "error": self._writer_error,
                "queued": len(self._queue),
                "closed": self._closing,
            }

    def replay_spool(
        self, *, batch_size: int = 200, after_commit: Callable[[int], None] | None = None
    ) -> int:
        """Insert every spooled record (exactly once) and delete the spool files that held them.
        Returns how many records were new to the database. Raises SQLAlchemyError when the
        database fails; whatever was not committed stays spooled. `after_commit(n)` is called
        after each committed chunk (tests use it to crash a replay half-way)."""
        if self.spool is None:
            return 0
        with self._replay_lock:
            # Reach the database before taking a batch: a long outage must not leave one batch
            # file per replay attempt behind.
            self.ensure_schema()
            with self.engine.connect() as conn:
                conn.execute(text("SELECT 1"))
            self.spool.take()
            batches = self.spool.batches()
            if not batches:
                return 0
            inserted = 0
            for batch in batches:
                with self._state_lock:
                    self.counters.torn_spool_lines += batch.torn_lines
                for start in range(0, len(batch.records), batch_size):
                    count = self._replay_chunk(batch.records[start : start + batch_size])
                    inserted += count
                    with self._state_lock:
                        self.counters.replayed += count
                    if after_commit is not None:
                        after_commit(len(batch.records[start : start + batch_size]))
                self.spool.remove(batch)
            self._mark_up()
            if inserted:
                log.info("provenance: replayed %d spooled records", inserted)
            return inserted

    def _replay_chunk(self, items: Sequence[dict[str, Any]]) -> int:
        """Insert one chunk; a record the database refuses for what it holds (too long a value,
        a missing field) is moved to the spool's `rejected.jsonl` so it cannot block the rest."""
        chunk: list[ProvenanceRecord] = []
        rejected: list[tuple[dict[str, Any], str]] = []
        for item in items:
            try:
                chunk.append(ProvenanceRecord.from_dict(item))
            except (TypeError, ValueError) as exc:
                rejected.append((item, f"{type(exc).__name__}: {exc}"))
        try:
            inserted = self._insert_new(chunk)
        except (DataError, IntegrityError):
            inserted = 0
            for record in chunk:
                try:
                    inserted += self._insert_new([record])
                except (DataError, IntegrityError) as exc:
                    rejected.append((record.to_dict(), f"{type(exc).__name__}: {str(exc).splitlines()[0]}"))
        assert self.spool is not None
        for item, error in rejected:
            log.error("provenance: spooled record %s rejected by the database: %s", item.get("uid"), error)
            self.spool.reject(item, error)
        return inserted

    def _insert_new(self, chunk: Sequence[ProvenanceRecord]) -> int:
        """Insert a chunk in one transaction; returns how many uids were not there before."""
        uids = [record.uid for record in chunk]
        with self._write_lock, self.engine.begin() as conn:
            existing = set(conn.execute(select(records.c.uid).where(records.c.uid.in_(uids))).scalars())
            conn.execute(self._insert, [_row(record) for record in chunk])
        return len(set(uids) - existing)

    def set_status(self, uid: str, status: str, *, at: str) -> bool:
        """Move an `admitted` record to `status`; a record is confirmed or abandoned only once."""
        if status not in STATUSES:
            raise ValueError(f"unknown status {status!r}")
        self.ensure_schema()
        with self._write_lock, self.engine.begin() as conn:
            result = conn.execute(
                update(records)
                .where(records.c.uid == uid, records.c.status == STATUS_ADMITTED)
                .values(status=status, status_changed_at=at)
            )
        return bool(result.rowcount)

    # -- reads -----------------------------------------------------------------------------
    def _conditions(self, flt: RecordFilter) -> list[ColumnElement[bool]]:
        conditions: list[ColumnElement[bool]] = []
        for column, value in (
            (records.c.experiment, flt.experiment),
            (records.c.namespace, flt.namespace),
            (records.c.kind, flt.kind),
            (records.c.name, flt.name),
            (records.c.status, flt.status),
        ):
            if value is not None:
                conditions.append(column == value)
        if flt.since is not None:
            conditions.append(records.c.recorded_at >= flt.since)
        if flt.until is not None:
            conditions.append(records.c.recorded_at < flt.until)
        return conditions

    def query(self, flt: RecordFilter | None = None, *, limit: int = 100, cursor: str | None = None) -> Page:
        """One page of records, oldest first, ordered by (time, uid); `next_cursor` continues."""
        flt = flt or RecordFilter()
        limit = max(1, min(limit, MAX_PAGE))
        conditions = self._conditions(flt)
        if cursor is not None:
            after = Cursor.decode(cursor)
            conditions.append(
                or_(
                    records.c.recorded_at > after.time,
                    and_(records.c.recorded_at == after.time, records.c.uid > after.uid),
                )
            )
        statement = (
            select(records).where(*conditions).order_by(records.c.recorded_at, records.c.uid).limit(limit + 1)
        )
        rows = self._read(statement)
        items = [_from_row(row) for row in rows[:limit]]
        next_cursor = Cursor(items[-1].time, items[-1].uid).encode() if len(rows) > limit else None
        return Page(items, next_cursor)

    def iter_records(
        self, flt: RecordFilter | None = None, *, page_size: int = 500
    ) -> Iterator[ProvenanceRecord]:
        cursor: str | None = None
        while True:
            page = self.query(flt, limit=page_size, cursor=cursor)
            yield from page.items
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    def count(self, flt: RecordFilter | None = None) -> int:
        rows = self._read(
            select(func.count()).select_from(records).where(*self._conditions(flt or RecordFilter()))
        )
        return int(rows[0][0])

    def get(self, uid: str) -> ProvenanceRecord | None:
        rows = self._read(select(records).where(records.c.uid == uid))
        return _from_row(rows[0]) if rows else None

    def admitted(self, *, limit: int = 1000) -> list[ProvenanceRecord]:
        """Records still waiting for the reconciler, oldest first."""
        statement = (
            select(records)
            .where(records.c.status == STATUS_ADMITTED)
            .order_by(records.c.recorded_at, records.c.uid)
            .limit(limit)
        )
        return [_from_row(row) for row in self._read(statement)]

    def _read(self, statement: Any) -> list[Any]:
        try:
            self.ensure_schema()
            with self.engine.connect() as conn:
                return list(conn.execute(statement).all())
        except SQLAlchemyError as exc:
            raise StoreUnavailable(f"provenance database unavailable: {type(exc).__name__}: {exc}") from exc

    # -- lifecycle -------------------------------------------------------------------------
    def start_replayer(self) -> None:
        if self._thread is not None or self.spool is None:
            return
        self._thread = threading.Thread(target=self._replay_loop, name="provenance-replayer", daemon=True)
        self._thread.start()

    def _replay_loop(self) -> None:
        while not self._stop.wait(self.replay_interval):
            self.try_replay()

    def try_replay(self) -> int:
        """One replay attempt that never raises (the background replayer, startup)."""
        if self.spool is None or self.spool.backlog() == 0:
            return 0
        try:
            return self.replay_spool()
        except SQLAlchemyError as exc:
            self._mark_down(exc)
            return 0
        except Exception:  # a bug must not kill the replayer thread; the records stay spooled
            log.exception("provenance: replay failed")
            return 0

    def health(self) -> dict[str, Any]:
        """State for /readyz, /metrics and `gpupolicy provenance`: never raises. One database
        check at a time: while one waits on a server that stopped answering, the others report
        the database unreachable at once instead of each holding a thread (/readyz runs every
        few seconds; its threads would run out)."""
        reachable = False
        if not self._in_backoff() and self._health_check.acquire(blocking=False):
            try:
                reachable = self._check_database()
            finally:
                self._health_check.release()
        with self._state_lock:
            counters = self.counters
            return {
                "backend": self.backend,
                "database": self.engine.url.render_as_string(hide_password=True),
                "reachable": reachable,
                "schema_version": self._schema_version,
                "latest_schema_version": LATEST,
                "spool_dir": str(self.spool.directory) if self.spool else None,
                "spool_backlog": self.spool.backlog() if self.spool else 0,
                "writes": counters.writes,
                "spooled": counters.spooled,
                "replayed": counters.replayed,
                "failures": counters.failures,
                "torn_spool_lines": counters.torn_spool_lines,
                "commits": counters.commits,
                "batches": counters.batches,
                "rescued": counters.rescued,
                "writer": self.writer_status(),
                "rejected": self.spool.rejected_count() if self.spool else 0,
                "last_error": counters.last_error,
            }

    def _check_database(self) -> bool:
        try:
            self.ensure_schema()
            with self.engine.connect() as conn:
                conn.execute(text("SELECT 1"))
                version = current_version(conn)
        except SQLAlchemyError as exc:
            self._mark_down(exc)
            return False
        self._schema_version = version
        return True

    def close(self) -> None:
        """Write what is queued, stop the writer and the replayer, release the connections.

        Bounded when the database stopped answering: a thread stuck on it is waited for
        `close_wait` seconds at most (the watchdog, still running meanwhile, spools what the
        writer holds after `write_timeout`), then left behind (daemon threads: they end with
        the process). A webhook shutting down on SIGTERM must not hang on its database."""
        with self._queue_changed:
            self._closing = True
            self._queue_changed.notify_all()
            writer = self._writer
        if writer is not None:
            writer.join(self.close_wait)
            if writer.is_alive():
                log.warning(
                    "provenance: the database did not answer the last write within %.1f s; closing "
                    "without waiting for it (what it held is spooled)",
                    self.close_wait,
                )
        self._stop.set()
        for thread in (self._watchdog, self._thread):
            if thread is not None:
                thread.join(self.close_wait)
        self._thread = None
        self.engine.dispose()

    @property
    def close_wait(self) -> float:
        """How long `close` waits for each thread: the watchdog's delay, twice, and a second."""
        return 2 * self.write_timeout + 1.0

    def __enter__(self) -> ProvenanceStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def open_store(
    url: str | None,
    *,
    spool_dir: Path,
    schema: str | None = None,
    start_replayer: bool = True,
    retry_seconds: float = 5.0,
    replay_interval: float = 5.0,
    connect_timeout: float = 2.0,
    write_timeout: float = 2.0,
    max_batch: int = 256,
    max_queue: int = 4096,
) -> ProvenanceStore:
    """Open (and migrate) the store; replay whatever the spool holds; start the replayer.

    `url` None: SQLite at `<spool_dir's parent>/provenance.db`. A database that is unreachable
    at open is not an error: records spool until it comes back. `schema` (PostgreSQL) puts the
    tables in that schema (created if missing)."""
    if url is None:
        spool_dir.parent.mkdir(parents=True, exist_ok=True)
        url = default_url(spool_dir.parent)
    engine = create_store_engine(
        url, schema=schema, connect_timeout=connect_timeout, write_timeout=write_timeout
    )
    store = ProvenanceStore(
        engine,
        spool=Spool(spool_dir),
        schema=schema,
        retry_seconds=retry_seconds,
        replay_interval=replay_interval,
        max_batch=max_batch,
        max_queue=max_queue,
        write_timeout=write_timeout,
    )
    try:
        store.ensure_schema()
    except SQLAlchemyError as exc:
        store._mark_down(exc)
    else:
        store.try_replay()
    if start_replayer:
        store.start_replayer()
    return store


def open_reader(url: str, *, schema: str | None = None) -> ProvenanceStore:
    """A store for queries only (the CLI): no spool, no replayer; migrated on first use."""
    return ProvenanceStore(create_store_engine(url, schema=schema), spool=None, schema=schema)

"""The store's database: its engine and schema, whether it is up (a failure starts a backoff),
and the statements the other units run: the writer's batch insert, the replay's insert of a
chunk, the reconciler's status change, and reads. Every insert is `INSERT … ON CONFLICT (uid)
DO NOTHING`: the request uid is the primary key, so writing a record twice leaves one row."""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Engine, select, text, update
from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from gpupolicy.provenance.counters import Counters
from gpupolicy.provenance.errors import StoreUnavailable
from gpupolicy.provenance.record import STATUS_ADMITTED, STATUSES, ProvenanceRecord
from gpupolicy.provenance.schema import current_version, migrate, records

log = logging.getLogger("gpupolicy.provenance")


def record_row(record: ProvenanceRecord) -> dict[str, Any]:
    """The columns of a record's row (`body` is the record as canonical JSON)."""
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


def record_of(row: Any) -> ProvenanceRecord:
    data = json.loads(row.body)
    data["status"] = row.status
    data["status_changed_at"] = row.status_changed_at
    return ProvenanceRecord.from_dict(data)


def _on_conflict_do_nothing(dialect: str) -> Any:
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        return pg_insert(records).on_conflict_do_nothing(index_elements=["uid"])
    from sqlalchemy.dialects.sqlite import insert as sqlite_insert

    return sqlite_insert(records).on_conflict_do_nothing(index_elements=["uid"])


class Database:
    def __init__(
        self, engine: Engine, *, schema: str | None, retry_seconds: float, counters: Counters
    ) -> None:
        self.engine = engine
        self.schema = schema
        self.retry_seconds = retry_seconds
        self.counters = counters
        self.schema_version: int | None = None
        self._down_until = 0.0  # one float, assigned whole: no lock needed
        # SQLite has one writer at a time: threads of this process queue here instead of
        # spending the busy timeout (kept for other processes) against each other.
        self._write_lock: contextlib.AbstractContextManager[Any] = (
            threading.Lock() if engine.dialect.name == "sqlite" else contextlib.nullcontext()
        )
        self._insert = _on_conflict_do_nothing(engine.dialect.name)
        self._dbapi_insert = DbapiInsert(self._insert, engine)

    @property
    def backend(self) -> str:
        return self.engine.dialect.name

    # -- availability ----------------------------------------------------------------------
    def mark_down(self, exc: BaseException) -> None:
        error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        self.counters.failed(error)
        self._down_until = time.monotonic() + self.retry_seconds
        log.warning("provenance database unavailable: %s", error)
        # No pooled session outlives a failure: one opened during it may stay unusable when the
        # database is back (read-only: a primary demoted to a standby, SQLite opened on a
        # read-only file system; or connected to a server that is gone). Connections in use
        # (a writer stuck on a hanging server) are left to their holder.
        self.engine.dispose()

    def mark_up(self) -> None:
        self._down_until = 0.0
        self.counters.set_last_error(None)

    def in_backoff(self) -> bool:
        return time.monotonic() < self._down_until

    def ensure_schema(self) -> int:
        """Migrate to the latest schema (once per store; retried after a failure)."""
        if self.schema_version is None:
            if self.schema is not None and self.backend == "postgresql":
                with self.engine.begin() as conn:
                    conn.execute(text(f'CREATE SCHEMA IF NOT EXISTS "{self.schema}"'))
            self.schema_version = migrate(self.engine)
        return self.schema_version

    def ping(self) -> None:
        """Reach the database (raises SQLAlchemyError when it cannot be reached)."""
        self.ensure_schema()
        with self.engine.connect() as conn:
            conn.execute(text("SELECT 1"))

    def check(self) -> bool:
        """Whether the database answers now (a failure starts the backoff); refreshes the
        schema version it reports."""
        try:
            self.ensure_schema()
            with self.engine.connect() as conn:
                conn.execute(text("SELECT 1"))
                version = current_version(conn)
        except SQLAlchemyError as exc:
            self.mark_down(exc)
            return False
        self.schema_version = version
        return True

    # -- statements ------------------------------------------------------------------------
    def insert_rows(self, rows: list[dict[str, Any]]) -> None:
        """One transaction (one commit, one fsync) for `rows`, through the DBAPI."""
        with self._write_lock:
            self._dbapi_insert(rows)

    def insert_new(self, chunk: Sequence[ProvenanceRecord]) -> int:
        """Insert a chunk in one transaction; returns how many uids were not there before."""
        uids = [record.uid for record in chunk]
        with self._write_lock, self.engine.begin() as conn:
            existing = set(conn.execute(select(records.c.uid).where(records.c.uid.in_(uids))).scalars())
            conn.execute(self._insert, [record_row(record) for record in chunk])
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

    def read(self, statement: Any) -> list[Any]:
        try:
            self.ensure_schema()
            with self.engine.connect() as conn:
                return list(conn.execute(statement).all())
        except SQLAlchemyError as exc:
            raise StoreUnavailable(f"provenance database unavailable: {type(exc).__name__}: {exc}") from exc


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
        # pysqlite opens no transaction itself here (isolation_level None, see engines.py)
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
            self._execute(connection, rows)
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

    def _execute(self, connection: Any, rows: Sequence[dict[str, Any]]) -> None:
        cursor = connection.cursor()
        try:
            if self._begin is not None:
                cursor.execute(self._begin)
            cursor.executemany(self.sql, self.parameters(rows))
            self._engine.dialect.do_commit(connection)  # the pooled connection, as SQLAlchemy passes it
        finally:
            cursor.close()


def _rollback_quietly(connection: Any) -> None:
    with contextlib.suppress(Exception):  # the connection may be gone: the pool discards it
        connection.rollback()

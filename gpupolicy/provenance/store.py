"""The provenance store as the webhook and the CLI use it: SQLAlchemy over SQLite (default) or
PostgreSQL, with a durable spool. It assembles units that do one job each:

- `database.Database`: the engine and schema, whether the database is up, the statements;
- `writer.GroupCommitWriter` (with its `watchdog.Watchdog`): `submit` / `record`, one
  transaction per batch of concurrent records, the spool (`pending.SpoolFallback`) when the
  database fails or stops answering;
- `replay.SpoolReplayer`: spooled records into the database, exactly once;
- `queries.Queries`: pages of records, filters, cursors;
- `health.HealthCheck`: what /readyz and /metrics report.

A record's future resolves only once the record is durable: committed (SQLite in WAL mode with
`synchronous=FULL`; PostgreSQL's commit) or appended and fsync'ed to the spool (`spool.py`).
Inserts are idempotent by the admission request uid (primary key + `ON CONFLICT DO NOTHING`).
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError

from gpupolicy.provenance.counters import Counters, CounterValues
from gpupolicy.provenance.database import Database
from gpupolicy.provenance.engines import create_store_engine, default_url
from gpupolicy.provenance.errors import StoreOverloaded, StoreStalled, StoreUnavailable, WriterStopped
from gpupolicy.provenance.filters import RecordFilter
from gpupolicy.provenance.health import HealthCheck
from gpupolicy.provenance.pending import SpoolFallback
from gpupolicy.provenance.queries import MAX_PAGE, Page, Queries
from gpupolicy.provenance.record import ProvenanceRecord
from gpupolicy.provenance.replay import SpoolReplayer
from gpupolicy.provenance.spool import Spool
from gpupolicy.provenance.writer import GroupCommitWriter

__all__ = [
    "MAX_PAGE",
    "Page",
    "ProvenanceStore",
    "StoreOverloaded",
    "StoreStalled",
    "StoreUnavailable",
    "WriterStopped",
    "open_reader",
    "open_store",
]


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
        self._counters = Counters()
        self.spool = spool
        self.database = Database(engine, schema=schema, retry_seconds=retry_seconds, counters=self._counters)
        self.writer = GroupCommitWriter(
            self.database,
            SpoolFallback(spool, self._counters),
            self._counters,
            max_batch=max_batch,
            max_queue=max_queue,
            write_timeout=write_timeout,
        )
        self.replayer = SpoolReplayer(self.database, spool, self._counters, interval=replay_interval)
        self.queries = Queries(self.database)
        self._health = HealthCheck(self.database, spool, self.writer, self._counters)
        self.write_timeout = write_timeout

    @property
    def engine(self) -> Engine:
        return self.database.engine

    @property
    def counters(self) -> CounterValues:
        return self._counters.snapshot()

    def ensure_schema(self) -> int:
        return self.database.ensure_schema()

    # -- writes (the webhook, the reconciler) ---------------------------------------------
    def submit(self, record: ProvenanceRecord, *, block: bool = False) -> Future[str]:
        """Queue `record`; the future resolves once it is durable (see `GroupCommitWriter.submit`)."""
        return self.writer.submit(record, block=block)

    def record(self, record: ProvenanceRecord) -> str:
        """Store `record`; durable when this returns."""
        return self.writer.record(record)

    def set_status(self, uid: str, status: str, *, at: str) -> bool:
        return self.database.set_status(uid, status, at=at)

    # -- reads (the CLI, GET /provenance, the reconciler) ----------------------------------
    def query(self, flt: RecordFilter | None = None, *, limit: int = 100, cursor: str | None = None) -> Page:
        return self.queries.query(flt, limit=limit, cursor=cursor)

    def iter_records(
        self, flt: RecordFilter | None = None, *, page_size: int = 500
    ) -> Iterator[ProvenanceRecord]:
        return self.queries.iter_records(flt, page_size=page_size)

    def count(self, flt: RecordFilter | None = None) -> int:
        return self.queries.count(flt)

    def get(self, uid: str) -> ProvenanceRecord | None:
        return self.queries.get(uid)

    def admitted(self, *, limit: int = 1000) -> list[ProvenanceRecord]:
        return self.queries.admitted(limit=limit)

    # -- state and lifecycle ---------------------------------------------------------------
    def health(self) -> dict[str, Any]:
        return self._health.report()

    def close(self) -> None:
        """Write what is queued, stop the writer and the replayer, release the connections.
        Bounded when the database stopped answering: each thread is waited for the watchdog's
        delay, twice, and a second at most (a webhook shutting down on SIGTERM must not hang on
        its database)."""
        wait = 2 * self.write_timeout + 1.0
        self.writer.close(wait)
        self.replayer.stop(wait)
        self.engine.dispose()

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
        store.database.mark_down(exc)
    else:
        store.replayer.try_replay()
    if start_replayer:
        store.replayer.start()
    return store


def open_reader(url: str, *, schema: str | None = None) -> ProvenanceStore:
    """A store for queries only (the CLI): no spool, no replayer; migrated on first use."""
    return ProvenanceStore(create_store_engine(url, schema=schema), spool=None, schema=schema)

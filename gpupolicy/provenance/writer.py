"""Group commit: one writer thread takes everything queued (at most `max_batch` records) and
writes it in one transaction, so concurrent admissions share one commit and one fsync. A future
resolves to its record id only once the record is durable: committed, or — when the database
fails, whichever way — spooled with the rest of its batch (`pending.SpoolFallback`). A batch's
failure never stops the writer; only a `BaseException` does, and then every waiting and later
record fails with `WriterStopped`: loudly, never silently. The watchdog (`watchdog.py`) spools
what waits on a writer stuck on a database that stopped answering."""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from concurrent.futures import Future
from typing import Any

from sqlalchemy.exc import DataError, IntegrityError

from gpupolicy.provenance.counters import Counters
from gpupolicy.provenance.database import Database, record_row
from gpupolicy.provenance.errors import StoreOverloaded, StoreStalled, WriterStopped
from gpupolicy.provenance.pending import Pending, SpoolFallback, settle, start
from gpupolicy.provenance.record import ProvenanceRecord
from gpupolicy.provenance.watchdog import Watchdog

log = logging.getLogger("gpupolicy.provenance")


class GroupCommitWriter:
    def __init__(
        self,
        database: Database,
        fallback: SpoolFallback,
        counters: Counters,
        *,
        max_batch: int,
        max_queue: int,
        write_timeout: float,
    ) -> None:
        if max_batch < 1 or max_queue < 1:
            raise ValueError("max_batch and max_queue must be at least 1")
        if write_timeout <= 0:
            raise ValueError("write_timeout must be positive")
        self.database = database
        self.fallback = fallback
        self.counters = counters
        self.max_batch = max_batch
        self.max_queue = max_queue
        self.write_timeout = write_timeout
        self._queue: deque[Pending] = deque()
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None  # started by the first submit
        self._error: str | None = None
        self._closing = False
        # The batch being written and since when (None between batches), for the watchdog.
        self._in_flight: list[Pending] = []
        self._in_flight_since: float | None = None
        self._watchdog = Watchdog(self, write_timeout) if fallback.spool is not None else None

    # -- callers ---------------------------------------------------------------------------
    def record(self, record: ProvenanceRecord) -> str:
        """Store `record`; durable when this returns. Returns the record id (the request uid).
        Waits for room when the queue is full; raises what `submit` and the future raise."""
        return self.submit(record, block=True).result()

    def submit(self, record: ProvenanceRecord, *, block: bool = False) -> Future[str]:
        """Queue `record`. The future resolves to the record id once the record is durable
        (committed, or fsync'ed to the spool), or fails with `StoreUnavailable` when neither
        took it (no spool, or the spool's disk failed) or with `WriterStopped`.

        Raises `WriterStopped` at once when the writer is dead or closed, and `StoreOverloaded`
        when `max_queue` records are waiting (`block=True` waits for room instead: for callers
        that may block, never the event loop)."""
        future: Future[str] = Future()
        with self._changed:
            while True:
                self._check_running()
                if len(self._queue) < self.max_queue:
                    break
                if not block:
                    raise StoreOverloaded(
                        f"provenance: {len(self._queue)} records already wait for the writer"
                    )
                self._changed.wait()
            if self._thread is None:
                self._start_threads()
            self._queue.append(Pending(record, future))
            self._changed.notify_all()
        return future

    def _check_running(self) -> None:
        """Under `_changed`: raise unless the writer runs (or may be started)."""
        if self._error is not None:
            raise WriterStopped(f"provenance writer died: {self._error}")
        if self._closing:
            raise WriterStopped("the provenance store is closed")
        if self._thread is not None and not self._thread.is_alive():
            raise WriterStopped("provenance writer is not running")

    def _start_threads(self) -> None:
        self._thread = threading.Thread(target=self._write_loop, name="provenance-writer", daemon=True)
        self._thread.start()
        if self._watchdog is not None:
            self._watchdog.start()

    # -- the writer thread -----------------------------------------------------------------
    def _write_loop(self) -> None:
        batch: list[Pending] = []
        try:
            while (taken := self._take_batch()) is not None:
                batch = taken
                for item in batch:
                    # RUNNING: no longer cancellable (a cancelled one is still written, unanswered)
                    start(item.future)
                try:
                    self._write_batch(batch)
                except Exception as exc:  # whatever failed, the batch is spooled and answered
                    self._batch_failed(batch, exc)
                with self._changed:
                    self._in_flight, self._in_flight_since = [], None
                batch = []
        except BaseException as exc:  # not an Exception (interpreter exit): never leave a caller waiting
            self._died(exc, batch)

    def _take_batch(self) -> list[Pending] | None:
        """The next batch (what is queued, up to `max_batch`); None once closing and drained."""
        with self._changed:
            while not self._queue and not self._closing:
                self._changed.wait()
            if not self._queue:
                return None
            batch = [self._queue.popleft() for _ in range(min(self.max_batch, len(self._queue)))]
            self._in_flight, self._in_flight_since = batch, time.monotonic()
            self._changed.notify_all()  # room for a blocked record()
            return batch

    def _write_batch(self, batch: list[Pending]) -> None:
        """Make every record of `batch` durable (one commit, or one spool append), then settle
        its futures: never before."""
        self.counters.add(batches=1)
        leftover = {id(record) for record in self._commit([item.record for item in batch])}
        self.fallback.take([item for item in batch if id(item.record) in leftover])
        for item in batch:
            if id(item.record) not in leftover:
                settle(item.future, result=item.record.uid)

    def _commit(self, records: list[ProvenanceRecord]) -> list[ProvenanceRecord]:
        """Insert `records` in one transaction; returns those the database did not take (all
        of them when it is unreachable or in backoff), for the spool."""
        if self.database.in_backoff():
            return records
        try:
            self.database.ensure_schema()
            self._insert_rows([record_row(record) for record in records])
        except (DataError, IntegrityError) as exc:  # a record's content, not the database
            if len(records) == 1:
                self._refused(records[0], exc)
                return records
            return self._commit_one_by_one(records)
        except Exception as exc:  # the database failed, whichever way: the batch goes to the spool
            self.database.mark_down(exc)
            return records
        self.database.mark_up()
        self.counters.add(writes=len(records))
        return []

    def _commit_one_by_one(self, records: list[ProvenanceRecord]) -> list[ProvenanceRecord]:
        """A batch the database refused for one record's content: the others still go in."""
        leftover: list[ProvenanceRecord] = []
        for index, record in enumerate(records):
            try:
                self._insert_rows([record_row(record)])
            except (DataError, IntegrityError) as exc:
                self._refused(record, exc)
                leftover.append(record)
            except Exception as exc:
                self.database.mark_down(exc)
                return leftover + records[index:]
            else:
                self.counters.add(writes=1)
        return leftover

    def _refused(self, record: ProvenanceRecord, exc: Exception) -> None:
        log.error("provenance: record %s refused by the database, spooled: %s", record.uid, exc)
        self.counters.add(failures=1)

    def _insert_rows(self, rows: list[dict[str, Any]]) -> None:
        """One transaction (one commit, one fsync) for `rows`."""
        self.database.insert_rows(rows)
        self.counters.add(commits=1)

    def _batch_failed(self, batch: list[Pending], exc: Exception) -> None:
        """A batch failed in a way `_write_batch` did not foresee (a driver raising an error of its
        own, a bug): its records still go to the spool and its callers are answered; the writer
        carries on with the next batch."""
        log.error("provenance: writing a batch failed; its records go to the spool", exc_info=exc)
        self.database.mark_down(exc)
        self.fallback.take([item for item in batch if not item.future.done()])

    def _died(self, exc: BaseException, batch: list[Pending]) -> None:
        log.critical("provenance writer died; records can no longer be stored", exc_info=exc)
        reason = f"{type(exc).__name__}: {exc}"
        with self._changed:
            self._error = reason
            waiting = [*batch, *self._queue]
            self._queue.clear()
            self._changed.notify_all()
        self.counters.set_last_error(f"writer died: {reason}")
        for item in waiting:
            error = WriterStopped(f"provenance writer died: {reason}")
            error.__cause__ = exc
            settle(item.future, error=error)

    # -- the watchdog's side ---------------------------------------------------------------
    def watched(self) -> bool:
        """Whether there is anything left for the watchdog to watch (a batch in flight may still
        get stuck while closing)."""
        with self._changed:
            finished = self._closing and not self._queue and self._in_flight_since is None
            return self._error is None and not finished

    def take_stalled(self) -> tuple[list[Pending], float] | None:
        """When the batch in flight has waited longer than `write_timeout`: what it still holds
        and everything queued behind it (taken from the queue), and for how long it has waited."""
        with self._changed:
            since = self._in_flight_since
            if since is None or time.monotonic() - since < self.write_timeout:
                return None
            waiting = [item for item in self._in_flight if not item.future.done()]
            waiting += self._queue
            self._queue.clear()
            self._changed.notify_all()
        return (waiting, time.monotonic() - since) if waiting else None

    def rescue(self, waiting: list[Pending], *, stalled_for: float) -> None:
        """Spool records the stuck writer holds or would take next, and answer their callers."""
        self.database.mark_down(StoreStalled(f"a write has waited {stalled_for:.1f} s for the database"))
        for item in waiting:
            start(item.future)
        if self.fallback.take(waiting):
            self.counters.add(rescued=len(waiting))

    # -- state and shutdown ----------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        with self._changed:
            return {
                "running": self._thread is not None and self._thread.is_alive(),
                "error": self._error,
                "queued": len(self._queue),
                "closed": self._closing,
            }

    def close(self, wait: float) -> None:
        """Write what is queued, then stop: the writer thread is waited for `wait` seconds at
        most (the watchdog, still running meanwhile, spools what it holds after
        `write_timeout`), then left behind (a daemon thread: it ends with the process)."""
        with self._changed:
            self._closing = True
            self._changed.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join(wait)
            if thread.is_alive():
                log.warning(
                    "provenance: the database did not answer the last write within %.1f s; closing "
                    "without waiting for it (what it held is spooled)",
                    wait,
                )
        if self._watchdog is not None:
            self._watchdog.stop(wait)

"""The spool's replayer: moves spooled records into the database — at `open_store`, every
`interval` seconds in a background thread, or when asked (`replay_spool`). A batch file is
deleted only after all its records are committed, and inserts are idempotent by the request uid,
so a replay cut short by a crash (even SIGKILL) and run again loses nothing and writes nothing
twice. A record the database refuses for its content is moved to `rejected.jsonl`."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy.exc import DataError, IntegrityError, SQLAlchemyError

from gpupolicy.provenance.counters import Counters
from gpupolicy.provenance.database import Database
from gpupolicy.provenance.record import ProvenanceRecord
from gpupolicy.provenance.spool import Spool, SpoolBatch

log = logging.getLogger("gpupolicy.provenance")


class SpoolReplayer:
    def __init__(
        self, database: Database, spool: Spool | None, counters: Counters, *, interval: float
    ) -> None:
        self.database = database
        self.spool = spool
        self.counters = counters
        self.interval = interval
        self._lock = threading.Lock()  # one replay at a time in this process (flock between processes)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def replay_spool(
        self, *, batch_size: int = 200, after_commit: Callable[[int], None] | None = None
    ) -> int:
        """Insert every spooled record (exactly once) and delete the spool files that held them.
        Returns how many records were new to the database. Raises SQLAlchemyError when the
        database fails; whatever was not committed stays spooled. `after_commit(n)` is called
        after each committed chunk (tests use it to crash a replay half-way)."""
        if self.spool is None:
            return 0
        with self._lock:
            # Reach the database before taking a batch: a long outage must not leave one batch
            # file per replay attempt behind.
            self.database.ping()
            self.spool.take()
            batches = self.spool.batches()
            if not batches:
                return 0
            inserted = sum(self._replay_batch(batch, batch_size, after_commit) for batch in batches)
            self.database.mark_up()
            if inserted:
                log.info("provenance: replayed %d spooled records", inserted)
            return inserted

    def _replay_batch(
        self, batch: SpoolBatch, batch_size: int, after_commit: Callable[[int], None] | None
    ) -> int:
        assert self.spool is not None
        self.counters.add(torn_spool_lines=batch.torn_lines)
        inserted = 0
        for start in range(0, len(batch.records), batch_size):
            chunk = batch.records[start : start + batch_size]
            count = self._replay_chunk(chunk)
            inserted += count
            self.counters.add(replayed=count)
            if after_commit is not None:
                after_commit(len(chunk))
        self.spool.remove(batch)
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
            inserted = self.database.insert_new(chunk)
        except (DataError, IntegrityError):
            inserted = 0
            for record in chunk:
                try:
                    inserted += self.database.insert_new([record])
                except (DataError, IntegrityError) as exc:
                    rejected.append((record.to_dict(), f"{type(exc).__name__}: {str(exc).splitlines()[0]}"))
        assert self.spool is not None
        for item, error in rejected:
            log.error("provenance: spooled record %s rejected by the database: %s", item.get("uid"), error)
            self.spool.reject(item, error)
        return inserted

    def try_replay(self) -> int:
        """One replay attempt that never raises (the background replayer, startup)."""
        if self.spool is None or self.spool.backlog() == 0:
            return 0
        try:
            return self.replay_spool()
        except SQLAlchemyError as exc:
            self.database.mark_down(exc)
            return 0
        except Exception:  # a bug must not kill the replayer thread; the records stay spooled
            log.exception("provenance: replay failed")
            return 0

    def start(self) -> None:
        if self._thread is not None or self.spool is None:
            return
        self._thread = threading.Thread(target=self._run, name="provenance-replayer", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.try_replay()

    def stop(self, wait: float) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(wait)
        self._thread = None

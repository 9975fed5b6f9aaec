"""How the route records provenance of an admission it allows, before it answers — one of two
ways (`Provenance.record`):

- through the admission journal (`gpupolicy serve`'s default): the body as received and its
  decision (records.journal_frame) are appended to the local journal, and the answer waits for
  that one fsync, shared with the admissions answered meanwhile; the replayer's process
  (provenance_replayer.py) makes the record and stores it later;
- directly (`--provenance-writes direct`, and the tests' fake stores): the record is built
  here (records.provenance_record) and the route waits until the store holds it.

Either way a failure to record admits the request (the webhook never blocks the cluster over
provenance), is logged (`provenance record lost`, with the uid) and counted.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
from dataclasses import dataclass
from typing import Any, Protocol

from fastapi.concurrency import run_in_threadpool

from gpupolicy.kube.inventory import Inventory
from gpupolicy.provenance.errors import StoreUnavailable
from gpupolicy.webhook.logs import LOGGER, excerpt, log
from gpupolicy.webhook.records import JournalRecordBuilder, RecordBuilder, journal_frame, provenance_record
from gpupolicy.webhook.review import Decision, ReviewEngine

_log = logging.getLogger(LOGGER)


class ProvenanceStore(Protocol):
    """`record()` returns once the record is durable. A store may also have
    `submit(record) -> concurrent.futures.Future[str]` (gpupolicy.provenance's has): the route
    then awaits the future, so the event loop serves other requests meanwhile and concurrent
    admissions share one commit."""

    def record(self, record: Any) -> str: ...

    def close(self) -> None: ...


class AdmissionJournal(Protocol):
    """Where admitted bodies and their decisions wait for the replayer (gpupolicy.provenance's
    JournalAppender): `append` resolves once the frame is on disk."""

    def append(self, frame: bytes, policy: Any) -> asyncio.Future[None]: ...

    def status(self) -> dict[str, Any]: ...

    def close(self, wait: float = ...) -> None: ...


class Replayer(Protocol):
    """The process that turns the journal into records (provenance_replayer.ReplayerProcess)."""

    def status(self) -> dict[str, Any]: ...

    def stop(self, wait: float = ...) -> None: ...


# What /readyz reports of the replayer's store: where records are written (with the journal,
# the webhook's own store only reads).
_WRITTEN_BY_THE_REPLAYER = (
    "spool_dir", "spool_backlog", "writes", "spooled", "replayed", "failures", "torn_spool_lines",
    "commits", "batches", "rescued", "writer", "rejected",
)  # fmt: skip


@dataclass(slots=True)
class Provenance:
    """The provenance store and how to make a record (gpupolicy.provenance, or a test's fake).
    With a `journal`, the route journals admissions instead of building records, and the
    `replayer` makes the records; the store then serves the reads (the API, the reconciler)."""

    store: ProvenanceStore
    build_record: RecordBuilder
    not_recordable: type[Exception] = ValueError
    router: Any = None  # a fastapi.APIRouter serving GET /provenance (on its own port: see server.py)
    journal: AdmissionJournal | None = None
    replayer: Replayer | None = None
    frame: JournalRecordBuilder = journal_frame

    async def record(
        self,
        decision: Decision,
        engine: ReviewEngine,
        inventory: Inventory | None,
        body: bytes,
        *,
        in_threadpool: bool,
    ) -> str:
        """Record an admission `should_record` keeps: "recorded", "skipped" or "failed"."""
        if self.journal is not None:
            return await self._journal(self.journal, decision, engine, inventory, body)
        return await self._store(decision, engine, inventory, in_threadpool=in_threadpool)

    async def _journal(
        self,
        journal: AdmissionJournal,
        decision: Decision,
        engine: ReviewEngine,
        inventory: Inventory | None,
        body: bytes,
    ) -> str:
        """On disk in the journal before the response is sent; a full journal (the replayer is
        behind) or a failing disk admits anyway, and says so."""
        try:
            frame = self.frame(decision, engine.policy, inventory, body, now_ns=time.time_ns())
        except self.not_recordable:
            return "skipped"
        try:
            await journal.append(frame, engine.policy)
        except StoreUnavailable as exc:  # full, or its disk failed: a known state, one line each
            log(
                _log,
                logging.ERROR,
                "provenance record lost",
                uid=excerpt(decision.uid),
                reason=str(exc)[:300],
            )
            return "failed"
        except Exception:
            _log.exception("provenance record lost", extra={"fields": {"uid": excerpt(decision.uid)}})
            return "failed"
        return "recorded"

    async def _store(
        self, decision: Decision, engine: ReviewEngine, inventory: Inventory | None, *, in_threadpool: bool
    ) -> str:
        """Durable before the response is sent (the store commits or fsyncs its spool). A store
        failure (writer dead, queue full, database and disk both failing) admits anyway, and
        says so loudly."""
        inputs = (decision, engine.policy, inventory, self.build_record)
        try:
            if in_threadpool:
                record = await run_in_threadpool(provenance_record, *inputs)
            else:
                record = provenance_record(*inputs)  # CPU only, like review(): no thread hop
        except self.not_recordable:
            return "skipped"
        try:
            submit = getattr(self.store, "submit", None)
            if submit is not None:
                future: concurrent.futures.Future[str] = submit(record)
                await asyncio.wrap_future(future)
            else:
                await run_in_threadpool(self.store.record, record)
        except Exception:  # disk and database both failing: admit (never block the cluster), say so loudly
            _log.exception("provenance record lost", extra={"fields": {"uid": excerpt(decision.uid)}})
            return "failed"
        return "recorded"

    def health(self) -> dict[str, Any] | None:
        """What /readyz reports (None for a store that reports nothing). With the journal: the
        store's reachability from here, the replayer's store as it last reported it (its
        writer, spool and counters), the journal and the replayer's process."""
        health = getattr(self.store, "health", None)
        detail: dict[str, Any] | None = health() if callable(health) else None
        if self.journal is None or self.replayer is None:
            return detail
        replayer = self.replayer.status()
        written = (replayer.get("report") or {}).get("store") or {}
        detail = {
            **(detail or {}),
            **{key: written[key] for key in _WRITTEN_BY_THE_REPLAYER if key in written},
        }
        detail["journal"] = self.journal.status()
        detail["replayer"] = replayer
        return detail

    def journal_health(self) -> dict[str, Any] | None:
        """The journal's and the replayer's state, for /metrics (no database check on a scrape)."""
        if self.journal is None or self.replayer is None:
            return None
        return {"journal": self.journal.status(), "replayer": self.replayer.status()}

    def close(self) -> None:
        """The journal first (what is queued is written), then the replayer (it replays what is
        left, for a while), then the store."""
        if self.journal is not None:
            self.journal.close()
        if self.replayer is not None:
            self.replayer.stop()
        self.store.close()

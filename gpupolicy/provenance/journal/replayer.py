"""The journal's replayer: entries to records, records to the store, exactly once.

`replay_once()` reads what follows the checkpoint (at most `batch` admissions), builds each
record (`build(admission, policy)`: what the webhook would have built at the answer), submits
them all to the store and waits until each one is durable there — committed, or spooled when
the database cannot take it — and only then moves the checkpoint past them and deletes the
segments now wholly behind it. A crash anywhere in between leaves the checkpoint where it was:
those entries are replayed again, and the store's primary key (the request uid) turns their
second insert into nothing. An entry that cannot be a record (`NotRecordable`, or a bug in
building it) is logged and counted, never retried: one bad entry cannot stop the journal.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from gpupolicy.policy.loading import Policy
from gpupolicy.provenance.errors import WriterStopped
from gpupolicy.provenance.journal import segments
from gpupolicy.provenance.journal.entries import Admission
from gpupolicy.provenance.journal.reader import MAX_POLICIES, JournalReader
from gpupolicy.provenance.journal.segments import Position
from gpupolicy.provenance.record import NotRecordable, ProvenanceRecord

log = logging.getLogger("gpupolicy.provenance")

RecordBuilder = Callable[[Admission, Policy], ProvenanceRecord]
STORE_WAIT_SECONDS = 120.0  # far past the store's own bounds (write timeout, watchdog): a liveness bound


class RecordSink(Protocol):
    """What the replayer needs of the store (`ProvenanceStore` has it)."""

    def submit(self, record: ProvenanceRecord, *, block: bool = False) -> Future[str]: ...


@dataclass(slots=True)
class ReplayCounts:
    stored: int = 0  # records the store made durable (a replayed duplicate counts again)
    unrecordable: int = 0
    torn_segments: int = 0
    malformed: int = 0
    batches: int = 0
    segments_removed: int = 0


class JournalReplayer:
    def __init__(self, directory: Path, store: RecordSink, build: RecordBuilder, *, batch: int = 256) -> None:
        self.directory = directory
        self.store = store
        self.build = build
        self.batch = batch
        self.reader = JournalReader(directory)
        self.position = segments.read_checkpoint(directory)
        self.counts = ReplayCounts()
        self.last_admitted_ns: int | None = None  # the admission time of the last entry replayed
        self._policies: dict[str, Policy] = {}

    def replay_once(self, *, after_store: Callable[[int], None] | None = None) -> int:
        """Replay what follows the checkpoint (one batch); how many admissions it held.
        Raises what the store's futures raise (`StoreUnavailable`): the checkpoint stays.
        `after_store(n)` runs once the batch is in the store, before the checkpoint moves
        (tests use it to crash a replay there)."""
        read = self.reader.read(self.position, limit=self.batch)
        records = [record for entry, _ in read.admissions if (record := self._record(entry)) is not None]
        futures = [self.store.submit(record, block=True) for record in records]
        for future in futures:
            future.result(timeout=STORE_WAIT_SECONDS)
        if after_store is not None:
            after_store(len(records))
        self._advance(read.end)
        self.counts.stored += len(records)
        self.counts.torn_segments += read.torn
        self.counts.malformed += read.malformed
        if read.admissions:
            self.counts.batches += 1
            self.last_admitted_ns = read.admissions[-1][0].time_ns
        return len(read.admissions)

    def _advance(self, end: Position) -> None:
        if end == self.position:
            return
        # Durable first when segments go with it: a segment is deleted only behind a checkpoint
        # that survives a crash. Else a lost checkpoint only replays a batch again.
        finishes = end.segment > self.position.segment
        segments.write_checkpoint(self.directory, end, durable=finishes)
        self.position = end
        if finishes:
            self.counts.segments_removed += self.reader.remove_before(end)

    def _record(self, entry: Admission) -> ProvenanceRecord | None:
        try:
            return self.build(entry, self._policy(entry.policy_digest))
        except NotRecordable as exc:
            log.warning("provenance: journal entry %s is not recorded: %s", entry.uid[:200], exc)
        except Exception:  # a bug must not stop the journal; this entry is lost, and said so
            log.exception("provenance: journal entry %s could not be made a record", entry.uid[:200])
        self.counts.unrecordable += 1
        return None

    def _policy(self, digest: str) -> Policy:
        """The policy the entry was decided under, built once from its snapshot."""
        policy = self._policies.get(digest)
        if policy is None:
            snapshot = self.reader.policies.get(digest)
            if snapshot is None:
                raise NotRecordable(f"the journal holds no snapshot of policy {digest[:16]}")
            if len(self._policies) >= MAX_POLICIES:
                self._policies.pop(next(iter(self._policies)))
            policy = self._policies[digest] = Policy(json.loads(snapshot.data))
        return policy

    def run(self, stop: threading.Event, *, poll: float = 0.1, retry: float = 1.0) -> None:
        """Replay until `stop` is set: at once after a full batch (a backlog), else every `poll`
        seconds; `retry` seconds after the store failed.

        A batch short of `batch` means the replay has caught up with the webhook: reading again
        at once would find the one or two admissions answered meanwhile, and chase the webhook
        admission by admission, each a batch of its own (the store's commit, the checkpoint, the
        hand-offs): about 6 % of the CPU the webhook's machine spent per recorded admission at
        200 a second (docs/performance.md, "The replayer waits once caught up"). Waiting `poll`
        instead takes what arrives meanwhile as one batch; a record still reaches the store
        within `poll` and a commit."""
        while not stop.is_set():
            try:
                found = self.replay_once()
            except WriterStopped:  # the store can take nothing any more: let the process restart
                raise
            except Exception as exc:  # StoreUnavailable (its disk failed too), or a read error
                log.error("provenance: replaying the journal failed, retrying in %.1f s: %s", retry, exc)
                stop.wait(retry)
                continue
            if found < self.batch:
                stop.wait(poll)

    def drain(self, deadline: float) -> bool:
        """Replay until nothing is left or `deadline` (time.monotonic()) passes; whether the
        journal was drained."""
        while time.monotonic() < deadline:
            try:
                if not self.replay_once():
                    return True
            except Exception as exc:
                log.error("provenance: replaying the journal before exit failed: %s", exc)
                return False
        return False

    def status(self) -> dict[str, Any]:
        counts = self.counts
        return {
            "position": {"segment": self.position.segment, "offset": self.position.offset},
            "stored": counts.stored,
            "unrecordable": counts.unrecordable,
            "torn_segments": counts.torn_segments,
            "malformed": counts.malformed,
            "batches": counts.batches,
            "segments_removed": counts.segments_removed,
            "last_admitted_ns": self.last_admitted_ns,
        }

"""The writer of the admission journal (the webhook's side): group fsync, two at a time.

`append(frame, policy)` queues an admission's frame and returns an asyncio future that resolves
once the frame is on disk. Two writer threads take turns: one takes everything queued, writes it
with one `write()` at the end of the newest segment, then flushes it with one `fdatasync`; while
that flush is in flight, the other takes what arrives meanwhile, writes it after, and flushes
again. A batch is acknowledged once a flush that began after its write has returned (the later
flush covers the earlier batch too: see `acknowledgements.py`), in the order written, with one
call into each event loop waiting on it. Concurrent admissions share one fsync, an admission
that arrives during a slow flush waits for a flush of its own rather than for that one and then
its own, and the event loop does no more than encode the frame and hand it over.

Bounds and failures:
- the journal holds at most `max_bytes` (segments on disk, written or preallocated, and what is
  queued): past it `append` raises `JournalFull` at once. The webhook then admits the request
  unrecorded and counts the loss; the replayer frees room as it replays (deleting finished
  segments), so the journal takes records again as soon as the replayer catches up;
- a write or fsync that fails fails the batch's futures (`JournalUnavailable`), and those of
  every batch of the segment not yet acknowledged, and ends the segment: the next batch starts
  a new one, so no acknowledged frame ever follows a torn one. Each writer thread flushes with
  a descriptor of its own, because Linux reports a write-back error once per descriptor: a flush
  on a shared one could return success after the other flush took the error;
- a segment ends when it is `segment_bytes` long or `segment_seconds` old (finished segments
  are what the replayer may delete: the admitted bodies they hold, unredacted, do not stay
  longer than that once replayed).

With `preallocate`, a segment is filled with zeros before it is used (ahead of need, by
`spares.SpareSegment`): a later write then changes no file size, and its `fdatasync` waits for
the data alone rather than for a journal commit of the file system's metadata as well.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
from collections import deque
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from gpupolicy.provenance.errors import StoreUnavailable
from gpupolicy.provenance.journal import entries, segments
from gpupolicy.provenance.journal.ack_timings import AckTimings, BatchTimes
from gpupolicy.provenance.journal.acknowledgements import Acknowledgements, Settled, Written
from gpupolicy.provenance.journal.segments import DirectoryLock, Position
from gpupolicy.provenance.journal.spares import SpareSegment, fill_with_zeros
from gpupolicy.provenance.spool import fsync_directory

log = logging.getLogger("gpupolicy.provenance")

DEFAULT_MAX_BYTES = 256 * 1024 * 1024
DEFAULT_SEGMENT_BYTES = 4 * 1024 * 1024
DEFAULT_SEGMENT_SECONDS = 10.0
_RESCAN_SECONDS = 0.25  # how often the room freed by the replayer is noticed while it matters
# Writer threads, so flushes in flight at most. Two: an admission that arrives while a flush
# is slow starts its own at once; a third rarely finds work on a disk that flushes in 0.3 ms.
WRITERS = 2


class JournalFull(StoreUnavailable):
    """The journal holds `max_bytes`: the replayer has not kept up."""


class JournalUnavailable(StoreUnavailable):
    """The journal's disk refused a write or an fsync, or the journal is closed."""


class PolicySource(Protocol):
    """What the journal needs of a policy: its digest, and the data it is built from."""

    @property
    def digest(self) -> str: ...

    @property
    def data(self) -> dict[str, Any]: ...


Waiter = asyncio.Future[None] | Future[None]


@dataclass(slots=True)
class _Item:
    frame: bytes
    policy: PolicySource
    waiter: Waiter
    loop: asyncio.AbstractEventLoop | None  # None: a concurrent.futures.Future
    queued: float  # time.perf_counter() at append (ack_timings)


@dataclass(slots=True)
class _Batch:
    items: list[_Item]
    taken: float  # time.perf_counter() readings, for ack_timings
    written: float = 0.0


@dataclass(slots=True)
class _Segment:
    number: int
    fds: list[int]  # one per writer thread, each written and flushed by that thread alone
    capacity: int  # bytes allocated (preallocated, or written when larger)
    created: float
    offset: int = 0
    policies: set[str] = field(default_factory=set)
    users: int = 1  # being the newest, and each flush in flight: its descriptors close at 0


class JournalAppender:
    def __init__(
        self,
        directory: Path,
        *,
        max_bytes: int = DEFAULT_MAX_BYTES,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        segment_seconds: float = DEFAULT_SEGMENT_SECONDS,
        preallocate: bool = True,
    ) -> None:
        if segment_bytes < 4096 or max_bytes < 2 * segment_bytes:
            raise ValueError("the journal needs segment_bytes >= 4096 and max_bytes >= 2 x segment_bytes")
        self.directory = directory
        self.max_bytes = max_bytes
        self.segment_bytes = segment_bytes
        self.segment_seconds = segment_seconds
        self.preallocate = preallocate
        self._lock = DirectoryLock(directory, segments.WRITER_LOCK)
        self._queue: deque[_Item] = deque()
        self._queued_bytes = 0
        self._changed = threading.Condition()  # the queue (taken by the event loop: held briefly)
        self._closing = False
        self._threads: list[threading.Thread] = []
        # Held while a batch is taken and written, a segment started or finished, the directory
        # rescanned: frames land in the order they were taken, one writer thread at a time.
        self._write_lock = threading.Lock()
        # Held while acknowledgements are settled (never around a disk call): in the order written.
        self._ack_lock = threading.Lock()
        self._acks: Acknowledgements[_Batch] = Acknowledgements()
        self._segment_errors: dict[int, JournalUnavailable] = {}  # why a segment's batches failed
        self._running = 0  # writer threads not yet stopped (the last one finishes the segment)
        self._segment: _Segment | None = None
        self._next_number = 1
        self._finished_bytes = 0  # segments on disk other than the one being written
        self._written: dict[int, int] = {}  # segment -> bytes of frames in it (for the backlog)
        self._rescanned = 0.0
        self._written_to = segments.START  # just past the last frame acknowledged (END frames too)
        self._policy_frames: dict[str, bytes] = {}
        self._spare: SpareSegment | None = None
        self.appended = 0
        self.refused = 0
        self.failed = 0
        self.fsyncs = 0
        self.fsync_seconds = 0.0  # spent in the batches' fdatasync: the disk's share of an answer
        self.fsync_longest = 0.0
        self.ack_timings = AckTimings()

    # -- lifecycle -------------------------------------------------------------------------
    def open(self) -> JournalAppender:
        """Take the writer's lock and start the writer threads. Raises `JournalUnavailable` when
        another writer holds the journal (two webhooks on one data directory)."""
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not self._lock.acquire(blocking=False):
            raise JournalUnavailable(f"another process writes the provenance journal in {self.directory}")
        numbers = segments.segment_numbers(self.directory)
        checkpoint = segments.read_checkpoint(self.directory)
        self._next_number = max([checkpoint.segment, *numbers]) + 1
        self._rescan()
        if self.preallocate:
            self._spare = SpareSegment(self.directory, self.segment_bytes, room=self._room_for_spare).start()
        # A segment of its own at once: the ones an earlier writer left are then no longer the
        # newest, so the replayer knows they are finished (this writer never appends to them).
        self._segment = self._new_segment()
        self._running = WRITERS
        self._threads = [
            threading.Thread(
                target=self._run, args=(writer,), name=f"provenance-journal-{writer}", daemon=True
            )
            for writer in range(WRITERS)
        ]
        for thread in self._threads:
            thread.start()
        return self

    def close(self, wait: float = 5.0) -> None:
        """Write what is queued, finish the segment, then stop (the replayer replays the rest)."""
        with self._changed:
            self._closing = True
            self._changed.notify_all()
        deadline = time.monotonic() + wait
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        if any(thread.is_alive() for thread in self._threads):
            log.warning("provenance journal: its disk did not answer within %.1f s; closing anyway", wait)
            return  # a thread still holds the segment: the lock goes with the process
        if self._spare is not None:
            self._spare.close()
        self._lock.release()

    # -- callers ---------------------------------------------------------------------------
    def append(self, frame: bytes, policy: PolicySource) -> asyncio.Future[None]:
        """Queue `frame` (on the running event loop); the future resolves once it is on disk."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        self._enqueue(_Item(frame, policy, future, loop, time.perf_counter()))
        return future

    def submit(self, frame: bytes, policy: PolicySource) -> Future[None]:
        """`append` for a caller without an event loop."""
        future: Future[None] = Future()
        self._enqueue(_Item(frame, policy, future, None, time.perf_counter()))
        return future

    def _enqueue(self, item: _Item) -> None:
        size = len(item.frame)
        with self._changed:
            if self._closing:
                raise JournalUnavailable("the provenance journal is closed")
            if self._used_bytes() + self._queued_bytes + size > self.max_bytes:
                self.refused += 1
                raise JournalFull(
                    f"the provenance journal holds {self._used_bytes() + self._queued_bytes} bytes "
                    f"of at most {self.max_bytes}: the replayer is behind"
                )
            self._queue.append(item)
            self._queued_bytes += size
            self._changed.notify()  # one writer thread: the other may be flushing

    def _used_bytes(self) -> int:
        segment = self._segment
        spare = self._spare.ready_bytes if self._spare is not None else 0
        return self._finished_bytes + spare + (max(segment.capacity, segment.offset) if segment else 0)

    # -- the writer threads ----------------------------------------------------------------
    def _run(self, writer: int) -> None:
        while (work := self._wait_for_work()) is not None:
            flush = self._write_queued(writer) if work else None
            if flush is not None:
                self._flush(writer, *flush)
            elif not work:
                self._when_idle(writer)
            if time.monotonic() - self._rescanned >= _RESCAN_SECONDS:
                with self._write_lock:
                    self._rescan()
        with self._write_lock:
            self._running -= 1
            segment = self._segment if self._running == 0 else None
            if segment is not None:  # closing, and the last one out: what it holds is finished
                self._finish_segment(segment, writer)

    def _wait_for_work(self) -> bool | None:
        """Whether anything is queued (waiting for it at most a rescan's interval); None once
        closing and drained."""
        with self._changed:
            if not self._queue and not self._closing:
                self._changed.wait(_RESCAN_SECONDS)
            if not self._queue:
                return None if self._closing else False
            return True

    def _take(self) -> _Batch | None:
        """What is queued (None: the other writer thread took it first)."""
        with self._changed:
            if not self._queue:
                return None
            batch = _Batch(list(self._queue), time.perf_counter())
            self._queue.clear()
            self._queued_bytes = 0
            return batch

    def _write_queued(self, writer: int) -> tuple[_Segment, int] | None:
        """Take what is queued and write it with one write at the end of the segment: the
        segment and how far it is written, for the flush (None when nothing was left to take,
        or the write failed: the batch then failed)."""
        with self._write_lock:
            batch = self._take()
            if batch is None:
                return None
            try:
                segment = self._current_segment(writer, sum(len(item.frame) for item in batch.items))
                data = b"".join(self._frames(segment, batch.items))
            except OSError as exc:  # no segment to write in (a new one could not be made)
                self._fail_unwritten(batch, exc)
                return None
            return self._write(writer, segment, batch, data)

    def _write(
        self, writer: int, segment: _Segment, batch: _Batch, data: bytes
    ) -> tuple[_Segment, int] | None:
        try:
            written = 0
            while written < len(data):  # a short write on a regular file is rare, not impossible
                written += os.pwrite(
                    segment.fds[writer], memoryview(data)[written:], segment.offset + written
                )
        except OSError as exc:  # what it wrote may be a torn frame: the segment ends here
            with self._ack_lock:
                self._acks.written(Written(segment.number, segment.offset + len(data), batch))
                self._segment_failed(segment, exc)
            self._abandon_segment(segment)
            return None
        batch.written = time.perf_counter()
        segment.offset += len(data)
        segment.capacity = max(segment.capacity, segment.offset)
        with self._ack_lock:
            self._acks.written(Written(segment.number, segment.offset, batch))
            segment.users += 1  # its descriptors stay open until this flush has returned
        return segment, segment.offset

    def _flush(self, writer: int, segment: _Segment, through: int) -> None:
        """One fdatasync, on this thread's own descriptor (outside the locks: the other writer
        thread writes and flushes the next batch meanwhile); then what it acknowledges."""
        began = time.perf_counter()
        try:
            os.fdatasync(segment.fds[writer])
            error: OSError | None = None
        except OSError as exc:
            error = exc
        synced = time.perf_counter()
        with self._ack_lock:
            self.fsyncs += 1
            self.fsync_seconds += synced - began
            self.fsync_longest = max(self.fsync_longest, synced - began)
            if error is None:
                self._settle(self._acks.flushed(segment.number, through), synced)
            else:
                self._segment_failed(segment, error)
            self._release(segment)
        if error is not None:
            with self._write_lock:
                self._abandon_segment(segment)

    def _fail_unwritten(self, batch: _Batch, exc: OSError) -> None:
        """No segment to write the batch in (a new one could not be made): it fails at once
        (it has no place in the journal to keep an order by)."""
        log.error("provenance journal: no segment to write in (%s)", exc)
        with self._ack_lock:
            self.failed += len(batch.items)
            self._resolve(
                batch.items, JournalUnavailable(f"the provenance journal could not be written: {exc}")
            )

    def _segment_failed(self, segment: _Segment, exc: OSError) -> None:
        """A write or flush of `segment` failed: every batch of it not yet acknowledged fails
        (under the acknowledgements' lock)."""
        if segment.number not in self._segment_errors:
            log.error("provenance journal: a write failed (%s); the next batch starts a new segment", exc)
            self._segment_errors[segment.number] = JournalUnavailable(
                f"the provenance journal could not be written: {exc}"
            )
        self._settle(self._acks.failed(segment.number), time.perf_counter())

    def _frames(self, segment: _Segment, items: list[_Item]) -> list[bytes]:
        """The batch's frames, each policy's snapshot before the first admission under it."""
        parts: list[bytes] = []
        for item in items:
            digest = item.policy.digest
            if digest not in segment.policies:
                parts.append(self._policy_frame(item.policy))
                segment.policies.add(digest)
            parts.append(item.frame)
        return parts

    def _policy_frame(self, policy: PolicySource) -> bytes:
        frame = self._policy_frames.get(policy.digest)
        if frame is None:
            if len(self._policy_frames) >= 4:  # policies change rarely: keep the latest few
                self._policy_frames.pop(next(iter(self._policy_frames)))
            frame = self._policy_frames[policy.digest] = entries.encode_policy(policy.digest, policy.data)
        return frame

    # -- segments (under the write lock) ----------------------------------------------------
    def _current_segment(self, writer: int, incoming: int) -> _Segment:
        segment = self._segment
        if segment is not None and self._is_failed(segment):
            self._abandon_segment(segment)  # a flush of it failed: nothing more goes after it
            segment = None
        if segment is not None and segment.offset > 0:
            full = segment.offset + incoming > self.segment_bytes
            old = time.monotonic() - segment.created >= self.segment_seconds
            if (full or old) and self._room_for_segment():
                self._finish_segment(segment, writer)
                segment = None
        if segment is None:
            segment = self._segment = self._new_segment()
        return segment

    def _is_failed(self, segment: _Segment) -> bool:
        with self._ack_lock:
            return self._acks.is_failed(segment.number)

    def _room_for_segment(self) -> bool:
        """A new segment fits under the bound (else the current one grows a batch at a time)."""
        if self._spare is not None and self._spare.ready_bytes:
            return True  # made already, and counted
        return self._used_bytes() + self.segment_bytes <= self.max_bytes

    def _room_for_spare(self) -> bool:
        return self._used_bytes() + self._queued_bytes + self.segment_bytes <= self.max_bytes

    def _new_segment(self) -> _Segment:
        number = self._next_number
        self._next_number += 1
        path = segments.segment_path(self.directory, number)
        fd = self._spare.take_as(path) if self._spare is not None else None
        capacity = self.segment_bytes if fd is not None else 0
        fds: list[int] = []
        try:
            if fd is None:  # no spare ready (or none wanted): made here, the slow way
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
                if self.preallocate:
                    fill_with_zeros(fd, self.segment_bytes)
                    capacity = self.segment_bytes
            fds.append(fd)
            while len(fds) < WRITERS:  # opened before anything is written through either
                fds.append(os.open(path, os.O_RDWR))
            fsync_directory(self.directory)
        except OSError:
            for opened in fds if fds else [fd] if fd is not None else []:
                os.close(opened)
            path.unlink(missing_ok=True)
            raise
        with self._ack_lock:
            self._written[number] = 0
        return _Segment(number, fds, capacity, time.monotonic())

    def _when_idle(self, writer: int) -> None:
        """Finish a segment nothing was written to for `segment_seconds`: once replayed, the
        replayer deletes it, and the bodies it holds with it."""
        with self._write_lock:
            segment = self._segment
            if (
                segment is not None
                and segment.offset > 0
                and time.monotonic() - segment.created >= self.segment_seconds
            ):
                self._finish_segment(segment, writer)

    def _finish_segment(self, segment: _Segment, writer: int) -> None:
        """End the segment with an END frame (the replayer may then delete it once replayed).
        Its flush covers every batch of the segment, like any other."""
        self._segment = None
        self._finished_bytes += max(segment.capacity, segment.offset)
        if self._is_failed(segment):
            self._release_locked(segment)
            return
        through = segment.offset
        try:
            os.pwrite(segment.fds[writer], entries.END_FRAME, segment.offset)
            os.fdatasync(segment.fds[writer])
            segment.offset += len(entries.END_FRAME)
        except OSError as exc:  # the replayer sees it finished when a newer segment exists
            log.error(
                "provenance journal: the end of segment %d could not be written: %s", segment.number, exc
            )
            with self._ack_lock:
                self._segment_failed(segment, exc)
                self._release(segment)
            return
        with self._ack_lock:
            self._settle(self._acks.flushed(segment.number, through), time.perf_counter())
            self._written[segment.number] = max(self._written.get(segment.number, 0), segment.offset)
            self._written_to = max(self._written_to, Position(segment.number, segment.offset))
            self._release(segment)

    def _abandon_segment(self, segment: _Segment) -> None:
        """Stop writing to a segment a write or flush failed in (under the write lock)."""
        if self._segment is segment:
            self._segment = None
            self._finished_bytes += max(segment.capacity, segment.offset)
            self._release_locked(segment)

    def _release_locked(self, segment: _Segment) -> None:
        with self._ack_lock:
            self._release(segment)

    def _release(self, segment: _Segment) -> None:
        """One user of the segment less (under the acknowledgements' lock): its descriptors
        close once it is no longer the newest and no flush of it is in flight."""
        segment.users -= 1
        if segment.users == 0:
            for fd in segment.fds:
                with contextlib.suppress(OSError):
                    os.close(fd)

    def _rescan(self) -> None:
        """Room the replayer freed (it deletes finished segments it has replayed)."""
        active = self._segment.number if self._segment else None
        sizes: dict[int, int] = {}
        for number in segments.segment_numbers(self.directory):
            if number != active:
                with contextlib.suppress(FileNotFoundError):
                    sizes[number] = segments.segment_path(self.directory, number).stat().st_size
        with self._changed:
            self._finished_bytes = sum(sizes.values())
        with self._ack_lock:
            for number in [number for number in self._written if number != active and number not in sizes]:
                del self._written[number]
            for number, size in sizes.items():
                self._written.setdefault(number, size)  # left by an earlier run: its size, at most
        self._rescanned = time.monotonic()

    # -- acknowledgements (under the acknowledgements' lock) --------------------------------
    def _settle(self, settled: list[Settled[_Batch]], synced: float) -> None:
        """Settle the batches' futures, in order: one call into each event loop per batch."""
        for done in settled:
            batch, written = done.written.batch, done.written
            if done.durable:
                self.appended += len(batch.items)
                self._written[written.segment] = max(self._written.get(written.segment, 0), written.end)
                self._written_to = max(self._written_to, Position(written.segment, written.end))
                outcome: BatchTimes | JournalUnavailable = BatchTimes(batch.taken, batch.written, synced)
            else:
                self.failed += len(batch.items)
                outcome = self._segment_errors[written.segment]
            self._resolve(batch.items, outcome)

    def _resolve(self, items: list[_Item], outcome: BatchTimes | JournalUnavailable) -> None:
        by_loop: dict[asyncio.AbstractEventLoop, list[_Item]] = {}
        direct: list[_Item] = []
        for item in items:
            if item.loop is None:
                direct.append(item)
            else:
                by_loop.setdefault(item.loop, []).append(item)
        if direct:
            self._settle_all(direct, outcome)
        for loop, on_loop in by_loop.items():
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
                loop.call_soon_threadsafe(self._settle_all, on_loop, outcome)

    def _settle_all(self, items: list[_Item], outcome: BatchTimes | JournalUnavailable) -> None:
        error = outcome if isinstance(outcome, JournalUnavailable) else None
        for item in items:
            _settle(item.waiter, error)
        if not isinstance(outcome, JournalUnavailable):
            self.ack_timings.observe([item.queued for item in items], outcome, time.perf_counter())

    # -- state -------------------------------------------------------------------------------
    def backlog_bytes(self) -> int:
        """Bytes of frames written after the replayer's checkpoint (an upper bound for segments
        an earlier run left)."""
        checkpoint = segments.read_checkpoint(self.directory)
        written = dict(self._written)
        total = 0
        for number, size in written.items():
            if number > checkpoint.segment:
                total += size
            elif number == checkpoint.segment:
                total += max(0, size - checkpoint.offset)
        return total

    def head(self) -> Position | None:
        segment = self._segment
        return Position(segment.number, segment.offset) if segment else None

    def wait_replayed(self, timeout: float) -> bool:
        """Wait until the replayer's checkpoint passes what is written now (every admission
        answered so far is then in the store), `timeout` seconds at most; whether it did. A read
        of the records after an admission then finds it (GET /provenance)."""
        target = self._written_to
        deadline = time.monotonic() + timeout
        while segments.read_checkpoint(self.directory) < target:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.01)
        return True

    def status(self) -> dict[str, Any]:
        with self._changed:
            queued = len(self._queue)
            used = self._used_bytes()
        return {
            "directory": str(self.directory),
            "running": bool(self._threads) and all(thread.is_alive() for thread in self._threads),
            "bytes": used,
            "max_bytes": self.max_bytes,
            "backlog_bytes": self.backlog_bytes(),
            "queued": queued,
            "appended": self.appended,
            "fsyncs": self.fsyncs,
            "fsync_seconds": round(self.fsync_seconds, 6),
            "fsync_longest_seconds": round(self.fsync_longest, 6),
            "refused": self.refused,
            "failed": self.failed,
            "ack_split": self.ack_timings.snapshot(),
        }


def _settle(waiter: Waiter, error: BaseException | None) -> None:
    if waiter.done():  # cancelled: the request went away
        return
    if error is None:
        waiter.set_result(None)
    else:
        waiter.set_exception(error)

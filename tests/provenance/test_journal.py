"""The admission journal on its own: frames, segments, the group fsync, the bound, torn tails
and what a reader makes of each. Real files in tmp_path; fsyncs are counted with a spy and a
failing disk is an fsync that raises, never a timing."""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import threading
import zlib
from collections.abc import Iterator
from concurrent.futures import Future, wait
from pathlib import Path

import pytest

from gpupolicy.policy.loading import Policy
from gpupolicy.provenance.journal import ack_timings, entries, frames, segments
from gpupolicy.provenance.journal.appender import WRITERS, JournalAppender, JournalFull, JournalUnavailable
from gpupolicy.provenance.journal.reader import JournalReader, scan_segment
from gpupolicy.provenance.journal.segments import Position
from tests.provenance.journal_samples import admission_frame

WAIT = 60  # seconds: a liveness bound for a stuck test, not a performance threshold


@pytest.fixture
def journal_dir(tmp_path: Path) -> Path:
    return tmp_path / "journal"


@pytest.fixture
def appender(journal_dir: Path) -> Iterator[JournalAppender]:
    journal = JournalAppender(journal_dir, max_bytes=64 * 1024 * 1024, segment_bytes=256 * 1024).open()
    yield journal
    journal.close()


def append_all(journal: JournalAppender, frames_: list[bytes], policy: Policy) -> None:
    futures: list[Future[None]] = [journal.submit(frame, policy) for frame in frames_]
    done, not_done = wait(futures, timeout=WAIT)
    assert not not_done
    for future in done:
        future.result()


def read_uids(directory: Path, after: Position = segments.START) -> list[str]:
    return [entry.uid for entry, _ in JournalReader(directory).read(after, limit=10_000).admissions]


def test_a_frame_is_whole_or_nothing() -> None:
    frame = frames.encode(entries.ADMISSION, b"payload")
    decoded = frames.decode(frame, 0)
    assert decoded is not None and decoded.payload == b"payload" and decoded.end == len(frame)
    assert frames.decode(frame[:-1], 0) is None  # torn
    flipped = bytearray(frame)
    flipped[-1] ^= 1
    assert frames.decode(bytes(flipped), 0) is None  # the CRC disagrees
    assert frames.decode(bytes(64), 0) is None  # zeros: not written yet


@pytest.mark.parametrize("size", [0, 1, 4095, 4096, 4097, 9000, 70_000])
def test_a_frame_of_parts_is_the_frame_of_their_join(size: int) -> None:
    payload = bytes(range(256)) * (size // 256) + bytes(size % 256)
    cuts = (size // 3, size // 2)
    parts = (payload[: cuts[0]], payload[cuts[0] : cuts[1]], payload[cuts[1] :])
    frame = frames.encode_parts(entries.ADMISSION, *parts)
    assert frame == frames.encode(entries.ADMISSION, payload)
    decoded = frames.decode(frame, 0)
    assert decoded is not None and decoded.payload == payload
    # The CRC is CRC-32 of kind, spare, length and payload, whichever way it was computed.
    assert frame[12:16] == zlib.crc32(frame[4:8] + frame[8:12] + payload).to_bytes(4, "little")


def test_appends_are_read_back_in_order_after_the_policy_they_were_decided_under(
    appender: JournalAppender, journal_dir: Path, gpu_policy: Policy
) -> None:
    uids = [f"uid-{index:03d}" for index in range(50)]
    append_all(appender, [admission_frame(uid, gpu_policy) for uid in uids], gpu_policy)
    reader = JournalReader(journal_dir)
    read = reader.read(segments.START, limit=1000)
    assert [entry.uid for entry, _ in read.admissions] == uids
    assert list(reader.policies) == [gpu_policy.digest]
    assert Policy(json.loads(reader.policies[gpu_policy.digest].data)).digest == gpu_policy.digest
    positions = [position for _, position in read.admissions]
    assert positions == sorted(positions) and read.end == positions[-1]  # the writer's segment: not finished
    assert read.torn == 0 and read.malformed == 0


WRITER_THREADS = frozenset(f"provenance-journal-{writer}" for writer in range(WRITERS))


class ScriptedFlushes:
    """`os.fdatasync` as the journal's writer threads see it: the first `scripted` flushes each
    wait until the test lets them go, then return or raise what the test says (later ones, and
    every other thread's, are the real call). Flushes are numbered from 0 in the order begun."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, scripted: int) -> None:
        self.began = [threading.Event() for _ in range(scripted)]
        self._outcome: list[Future[None]] = [Future() for _ in range(scripted)]
        self._count = 0
        self._lock = threading.Lock()
        self._real = os.fdatasync
        monkeypatch.setattr("gpupolicy.provenance.journal.appender.os.fdatasync", self)

    def __call__(self, fd: int) -> None:
        if threading.current_thread().name not in WRITER_THREADS:
            return self._real(fd)  # the spare segment's thread
        with self._lock:
            number, self._count = self._count, self._count + 1
        self._real(fd)
        if number < len(self.began):
            self.began[number].set()
            self._outcome[number].result(WAIT)  # raises what `fail` set

    def wait_began(self, number: int) -> None:
        assert self.began[number].wait(WAIT), f"flush {number} never began"

    def succeed(self, number: int) -> None:
        self._outcome[number].set_result(None)

    def fail(self, number: int) -> None:
        self._outcome[number].set_exception(OSError(errno.EIO, "Input/output error"))

    def release_all(self) -> None:
        for outcome in self._outcome:
            if not outcome.done():
                outcome.set_result(None)


@contextlib.contextmanager
def scripted_journal(
    journal_dir: Path, monkeypatch: pytest.MonkeyPatch, *, scripted: int
) -> Iterator[tuple[JournalAppender, ScriptedFlushes]]:
    """An open journal whose next `scripted` fdatasyncs wait for the test (opened first: its
    spare segment's flush is not one of them); every flush released and the journal closed after."""
    journal = JournalAppender(journal_dir, segment_bytes=1024 * 1024, max_bytes=8 * 1024 * 1024).open()
    flushes = ScriptedFlushes(monkeypatch, scripted=scripted)
    try:
        yield journal, flushes
    finally:
        flushes.release_all()
        journal.close()


def flushing(
    journal: JournalAppender, flushes: ScriptedFlushes, uid: str, policy: Policy, flush: int
) -> Future[None]:
    """Submit an admission, and wait until its writer thread's flush (number `flush`) has begun."""
    future = journal.submit(admission_frame(uid, policy), policy)
    flushes.wait_began(flush)
    return future


def test_concurrent_appends_share_one_fsync(
    journal_dir: Path, gpu_policy: Policy, monkeypatch: pytest.MonkeyPatch
) -> None:
    with scripted_journal(journal_dir, monkeypatch, scripted=2) as (journal, flushes):
        first = flushing(journal, flushes, "uid-first", gpu_policy, 0)
        # both writer threads flushing: what comes now waits in the queue
        second = flushing(journal, flushes, "uid-second", gpu_policy, 1)
        rest = [journal.submit(admission_frame(f"uid-{i:02d}", gpu_policy), gpu_policy) for i in range(30)]
        assert not any(future.done() for future in [first, second, *rest])  # nothing is durable yet
        flushes.release_all()
        for future in [first, second, *rest]:
            future.result(WAIT)
        assert journal.fsyncs == 3  # the first batch, the second, then the thirty together
    assert read_uids(journal_dir) == ["uid-first", "uid-second", *[f"uid-{i:02d}" for i in range(30)]]


def test_a_later_flush_acknowledges_an_earlier_batch_whose_flush_is_slow(
    journal_dir: Path, gpu_policy: Policy, monkeypatch: pytest.MonkeyPatch
) -> None:
    with scripted_journal(journal_dir, monkeypatch, scripted=1) as (journal, flushes):
        slow = flushing(journal, flushes, "uid-slow", gpu_policy, 0)  # and held there
        later = journal.submit(admission_frame("uid-later", gpu_policy), gpu_policy)
        # The second flush began after both writes: both are on disk once it returns.
        later.result(WAIT)
        assert slow.done() and slow.exception() is None
    assert read_uids(journal_dir) == ["uid-slow", "uid-later"]


def test_acknowledgements_follow_the_order_written(
    journal_dir: Path, gpu_policy: Policy, monkeypatch: pytest.MonkeyPatch
) -> None:
    order: list[str] = []
    with scripted_journal(journal_dir, monkeypatch, scripted=2) as (journal, flushes):
        first = flushing(journal, flushes, "uid-first", gpu_policy, 0)  # held: not done yet
        first.add_done_callback(lambda _: order.append("uid-first"))
        second = flushing(journal, flushes, "uid-second", gpu_policy, 1)
        second.add_done_callback(lambda _: order.append("uid-second"))
        flushes.succeed(1)  # the later flush returns first: it covers both, the first settled first
        second.result(WAIT)
        assert first.done() and order == ["uid-first", "uid-second"]
        flushes.succeed(0)


def test_a_failing_second_flush_fails_every_batch_of_its_segment_not_yet_acknowledged(
    journal_dir: Path, gpu_policy: Policy, monkeypatch: pytest.MonkeyPatch
) -> None:
    with scripted_journal(journal_dir, monkeypatch, scripted=3) as (journal, flushes):
        a = flushing(journal, flushes, "uid-a", gpu_policy, 0)
        b = flushing(journal, flushes, "uid-b", gpu_policy, 1)
        flushes.succeed(0)  # covers a alone: b was written after it began
        a.result(WAIT)
        assert not b.done()
        c = flushing(journal, flushes, "uid-c", gpu_policy, 2)  # after b, same segment
        assert not c.done()
        flushes.fail(1)  # b's flush: the disk lost pages of the segment
        for lost in (b, c):
            with pytest.raises(JournalUnavailable, match="Input/output error"):
                lost.result(WAIT)
        flushes.succeed(2)  # c's own flush returns without error, too late: c stays failed
        after = journal.submit(admission_frame("uid-after", gpu_policy), gpu_policy)
        after.result(WAIT)
        status = journal.status()
        assert status["failed"] == 2 and status["appended"] == 2
        assert sum(status["ack_split"]["total"]) == 2
        assert len(segments.segment_numbers(journal_dir)) == 2  # uid-after in a segment of its own
    uids = read_uids(journal_dir)  # b and c were written: a replay may record them (counted failed)
    assert uids[0] == "uid-a" and uids[-1] == "uid-after"


def test_segments_roll_over_and_a_closed_journal_is_finished(journal_dir: Path, gpu_policy: Policy) -> None:
    journal = JournalAppender(journal_dir, segment_bytes=64 * 1024, max_bytes=64 * 1024 * 1024).open()
    uids = [f"uid-{index:03d}" for index in range(40)]
    for uid in uids:  # one at a time: each batch is one frame, and segments fill up
        journal.submit(admission_frame(uid, gpu_policy), gpu_policy).result(WAIT)
    journal.close()
    numbers = segments.segment_numbers(journal_dir)
    assert len(numbers) > 3
    assert not (journal_dir / ".spare").exists()  # segments were made from spares; the last one went
    reader = JournalReader(journal_dir)
    read = reader.read(segments.START, limit=1000)
    assert [entry.uid for entry, _ in read.admissions] == uids
    assert read.end == Position(numbers[-1] + 1, 0)  # every segment ended with its END frame
    assert reader.remove_before(read.end) == len(numbers)
    assert segments.segment_numbers(journal_dir) == []
    # A new writer starts after what the replayer checkpointed: numbers are never reused.
    segments.write_checkpoint(journal_dir, read.end)
    again = JournalAppender(journal_dir, segment_bytes=64 * 1024, max_bytes=64 * 1024 * 1024).open()
    try:
        again.submit(admission_frame("uid-next", gpu_policy), gpu_policy).result(WAIT)
    finally:
        again.close()
    assert segments.segment_numbers(journal_dir) == [read.end.segment + 1]
    assert read_uids(journal_dir, read.end) == ["uid-next"]


def test_every_segment_carries_the_policies_it_needs(journal_dir: Path, gpu_policy: Policy) -> None:
    journal = JournalAppender(journal_dir, segment_bytes=64 * 1024, max_bytes=64 * 1024 * 1024).open()
    for index in range(20):
        journal.submit(admission_frame(f"uid-{index:02d}", gpu_policy), gpu_policy).result(WAIT)
    journal.close()
    for number in segments.segment_numbers(journal_dir):
        scan = scan_segment(segments.segment_path(journal_dir, number), 0, limit=1000)
        kinds = [frame.kind for frame, _ in scan.frames]
        assert kinds[0] == entries.POLICY and kinds.count(entries.POLICY) == 1
        # Read from the middle of the segment, a new reader still knows the policy.
        second = Position(number, scan.frames[1][1])
        reader = JournalReader(journal_dir)
        reader.read(second, limit=1)
        assert list(reader.policies) == [gpu_policy.digest]


def test_a_torn_tail_left_by_a_crash_is_skipped_and_counted(journal_dir: Path, gpu_policy: Policy) -> None:
    journal = JournalAppender(journal_dir, segment_bytes=1024 * 1024, max_bytes=64 * 1024 * 1024).open()
    append_all(journal, [admission_frame(f"uid-{i}", gpu_policy) for i in range(3)], gpu_policy)
    [number] = segments.segment_numbers(journal_dir)
    head = journal.head()
    assert head is not None
    journal.close()
    # What a crash in the middle of a write leaves: half a frame where the next one began, no
    # END frame after it (the bytes written over it), and no writer holding the journal.
    torn = admission_frame("uid-torn", gpu_policy)
    fd = os.open(segments.segment_path(journal_dir, number), os.O_WRONLY)
    os.pwrite(fd, torn[: len(torn) // 2], head.offset)
    os.close(fd)
    read = JournalReader(journal_dir).read(segments.START, limit=100)
    assert [entry.uid for entry, _ in read.admissions] == ["uid-0", "uid-1", "uid-2"]
    assert read.torn == 1 and read.end == Position(number + 1, 0)
    # The webhook restarts: its writer starts a segment of its own, read after the torn one.
    again = JournalAppender(journal_dir, segment_bytes=1024 * 1024, max_bytes=64 * 1024 * 1024).open()
    try:
        append_all(again, [admission_frame("uid-after", gpu_policy)], gpu_policy)
    finally:
        again.close()
    assert read_uids(journal_dir) == ["uid-0", "uid-1", "uid-2", "uid-after"]


def test_the_writers_segment_is_read_as_far_as_it_is_written(
    appender: JournalAppender, journal_dir: Path, gpu_policy: Policy
) -> None:
    append_all(appender, [admission_frame("uid-a", gpu_policy)], gpu_policy)
    reader = JournalReader(journal_dir)
    first = reader.read(segments.START)
    assert [entry.uid for entry, _ in first.admissions] == ["uid-a"]
    assert reader.read(first.end).admissions == []  # zeros after it: not yet written
    append_all(appender, [admission_frame("uid-b", gpu_policy)], gpu_policy)
    assert [entry.uid for entry, _ in reader.read(first.end).admissions] == ["uid-b"]


def test_a_read_waits_until_the_replayer_passes_what_was_answered(
    appender: JournalAppender, journal_dir: Path, gpu_policy: Policy
) -> None:
    """GET /provenance waits (`wait_replayed`) for the replayer's checkpoint to pass every
    admission answered before it: at most its timeout, then it says it did not."""
    assert appender.wait_replayed(0.0)  # nothing written: nothing to wait for
    append_all(appender, [admission_frame(f"uid-{index}", gpu_policy) for index in range(3)], gpu_policy)
    assert not appender.wait_replayed(0.05)  # no replayer: the checkpoint stays behind
    read = JournalReader(journal_dir).read(segments.START, limit=100)
    replayed = threading.Timer(0.2, segments.write_checkpoint, (journal_dir, read.end))
    replayed.start()
    try:
        assert appender.wait_replayed(WAIT)
    finally:
        replayed.join()


def test_a_full_journal_refuses_at_once_and_takes_again_once_replayed(
    journal_dir: Path, gpu_policy: Policy
) -> None:
    frame = admission_frame("uid-0", gpu_policy)
    journal = JournalAppender(
        journal_dir, segment_bytes=64 * 1024, max_bytes=256 * 1024, segment_seconds=3600
    ).open()
    try:
        accepted = 0
        with pytest.raises(JournalFull):
            while True:
                journal.submit(frame, gpu_policy).result(WAIT)
                accepted += 1
        assert accepted > 0 and journal.status()["refused"] == 1
        assert sum(p.stat().st_size for p in journal_dir.glob("*.seg")) <= 256 * 1024
        # The replayer catches up: it checkpoints and deletes the finished segments.
        reader = JournalReader(journal_dir)
        read = reader.read(segments.START, limit=100_000)
        segments.write_checkpoint(journal_dir, read.end)
        assert reader.remove_before(read.end) > 0
        journal._rescan()  # as the writer thread does every quarter of a second
        journal.submit(frame, gpu_policy).result(WAIT)
    finally:
        journal.close()


def test_a_failing_disk_fails_the_batch_and_the_next_one_starts_a_new_segment(
    journal_dir: Path, gpu_policy: Policy, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal = JournalAppender(journal_dir, segment_bytes=1024 * 1024, max_bytes=64 * 1024 * 1024).open()
    try:
        journal.submit(admission_frame("uid-before", gpu_policy), gpu_policy).result(WAIT)
        real = os.fdatasync
        failures = [OSError(errno.EIO, "Input/output error")]

        def failing(fd: int) -> None:
            if failures:
                raise failures.pop()
            real(fd)

        monkeypatch.setattr("gpupolicy.provenance.journal.appender.os.fdatasync", failing)
        with pytest.raises(JournalUnavailable, match="Input/output error"):
            journal.submit(admission_frame("uid-lost", gpu_policy), gpu_policy).result(WAIT)
        journal.submit(admission_frame("uid-after", gpu_policy), gpu_policy).result(WAIT)
        assert journal.status()["failed"] == 1
        assert len(segments.segment_numbers(journal_dir)) == 2
    finally:
        journal.close()
    # The failed batch may have reached the disk after all (recorded, though counted failed);
    # what was acknowledged after it is never behind a torn frame.
    uids = read_uids(journal_dir)
    assert uids[0] == "uid-before" and uids[-1] == "uid-after"


def test_one_writer_per_journal(appender: JournalAppender, journal_dir: Path) -> None:
    with pytest.raises(JournalUnavailable, match="another process"):
        JournalAppender(journal_dir).open()
    assert segments.writer_running(journal_dir)


def test_each_acknowledged_admission_is_counted_in_every_phase_of_its_wait(
    appender: JournalAppender, gpu_policy: Policy
) -> None:
    append_all(appender, [admission_frame(f"uid-{i}", gpu_policy) for i in range(5)], gpu_policy)
    split = appender.status()["ack_split"]
    assert split["bounds_ms"] == list(ack_timings.BOUNDS_MS)
    for phase in ack_timings.PHASES:
        assert sum(split[phase]) == 5, phase


def test_a_failed_batch_is_not_counted_as_acknowledged(
    appender: JournalAppender, gpu_policy: Policy, monkeypatch: pytest.MonkeyPatch
) -> None:
    def failing(fd: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr("gpupolicy.provenance.journal.appender.os.fdatasync", failing)
    with pytest.raises(JournalUnavailable):
        appender.submit(admission_frame("uid-lost", gpu_policy), gpu_policy).result(WAIT)
    assert sum(appender.status()["ack_split"]["total"]) == 0


def test_the_wait_is_split_by_phase_into_buckets_read_back_as_percentiles() -> None:
    timings = ack_timings.AckTimings()
    batch = ack_timings.BatchTimes(taken=0.0, written=0.00009, synced=0.00289)  # write 0.09 ms, fsync 2.8
    timings.observe([-0.00035, -0.00085], batch, settled=0.00298)  # queued 0.35 and 0.85 ms
    counts = timings.snapshot()
    bucket = {ms: index for index, ms in enumerate(ack_timings.BOUNDS_MS)}
    assert counts["fsync"][bucket[3.0]] == 2
    assert counts["write"][bucket[0.1]] == 2 and counts["handback"][bucket[0.1]] == 2
    assert counts["queue"][bucket[0.4]] == 1 and counts["queue"][bucket[0.9]] == 1
    assert ack_timings.percentile(counts["total"], 0.5) == 3.5  # 3.33 ms
    assert ack_timings.percentile(counts["total"], 0.99) == 4.0  # 3.83 ms
    assert math.isnan(ack_timings.percentile([0] * (len(ack_timings.BOUNDS_MS) + 1), 0.99))
    past = [0] * len(ack_timings.BOUNDS_MS) + [1]
    assert ack_timings.percentile(past, 0.5) == float("inf")

"""Reading the journal from a position on (the replayer's side).

`read(after, limit)` returns the admissions after `after`, oldest first, each with the position
just past it, across segments. A finished segment (its END frame, a newer segment, or no writer
left) is read to its end, then the next one; the segment being written is read as far as its
whole frames go. A finished segment that stops at a frame that is not whole (a write a crash
cut short: never acknowledged) is counted in `torn` and left behind.

The reader keeps the policy snapshots it has read (`policies`, the latest few): the admissions
after them were decided under them. When it first starts inside a segment it reads the
snapshots before that position too: a replay may start anywhere.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path

from gpupolicy.provenance.journal import entries, frames, segments
from gpupolicy.provenance.journal.entries import Admission, PolicySnapshot
from gpupolicy.provenance.journal.segments import Position

_CHUNK = 64 * 1024  # the writer's segment is mostly zeros past what it wrote: read little of it


MAX_POLICIES = 8  # policies change on a reload or a change of cluster facts: a few at a time


@dataclass(slots=True)
class ReadBatch:
    admissions: list[tuple[Admission, Position]] = field(default_factory=list)
    end: Position = segments.START  # where the next read starts
    torn: int = 0  # finished segments that stop at a frame that is not whole
    malformed: int = 0  # whole frames that are no entry this version knows


@dataclass(slots=True)
class Scan:
    """A segment read from an offset: its whole frames (each with the offset after it), where
    the reading stopped, and why."""

    frames: list[tuple[frames.Frame, int]]
    end: int
    ended: bool = False  # at an END frame: the writer finished the segment
    torn: bool = False  # at bytes that are a frame's start but no whole frame


def scan_segment(path: Path, start: int, *, limit: int, until: int | None = None) -> Scan:
    """The whole frames of a segment from `start`: admissions up to `limit` (and the policy
    snapshots among them), none past `until`."""
    found: list[tuple[frames.Frame, int]] = []
    admissions = 0
    with path.open("rb", buffering=0) as handle:
        reading = _Buffer(handle.fileno(), start)
        while admissions < limit and (until is None or reading.offset < until):
            frame = reading.next_frame()
            if frame is None:
                return Scan(found, reading.offset, torn=reading.torn())
            if frame.kind == entries.END:
                return Scan(found, reading.offset, ended=True)
            found.append((frame, reading.offset))
            admissions += frame.kind != entries.POLICY
    return Scan(found, reading.offset)


class _Buffer:
    """A segment's bytes from an offset on, read a chunk at a time (a frame bigger than a chunk
    is read whole)."""

    def __init__(self, fd: int, offset: int) -> None:
        self.fd = fd
        self.offset = offset  # of the next frame in the file
        self._data = b""  # the file's bytes from `_base`
        self._base = offset

    def next_frame(self) -> frames.Frame | None:
        while True:
            at = self.offset - self._base
            frame = frames.decode(self._data, at)
            if frame is not None:
                self.offset = self._base + frame.end
                return frame
            have = len(self._data) - at
            needed = frames.frame_length(self._data, at)
            if needed is None and have >= frames.HEADER_BYTES:
                return None  # zeros, or bytes that start no frame
            if needed is not None and have >= needed:
                return None  # a frame whose CRC does not agree
            chunk = os.pread(
                self.fd, max(_CHUNK, (needed or frames.HEADER_BYTES) - have), self._base + len(self._data)
            )
            if not chunk:
                return None  # the end of the file
            self._data = self._data[at:] + chunk  # what is consumed goes: one copy per chunk read
            self._base = self.offset

    def torn(self) -> bool:
        """Whether reading stopped at the start of a frame that is not whole (rather than at
        zeros or at the end of the file)."""
        at = self.offset - self._base
        return bool(self._data[at : at + frames.HEADER_BYTES].strip(b"\0"))


class JournalReader:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.policies: dict[str, PolicySnapshot] = {}
        self._read_before: Position | None = None  # where the last read ended

    def read(self, after: Position, *, limit: int = 256) -> ReadBatch:
        batch = ReadBatch(end=after)
        numbers = [number for number in segments.segment_numbers(self.directory) if number >= after.segment]
        if numbers and numbers[0] == after.segment and after.offset > 0 and after != self._read_before:
            self._policies_before(after)
        for index, number in enumerate(numbers):
            # Asked before reading: a segment the writer leaves meanwhile is read again next time.
            finished = index < len(numbers) - 1 or not segments.writer_running(self.directory)
            start = after.offset if number == after.segment else 0
            scan = scan_segment(
                segments.segment_path(self.directory, number), start, limit=limit - len(batch.admissions)
            )
            self._collect(scan, number, batch)
            if not scan.ended and (len(batch.admissions) >= limit or not finished):
                self._read_before = batch.end
                return batch  # more to come: the limit, or the writer's own segment
            batch.torn += int(scan.torn and not scan.ended)
            batch.end = Position(number + 1, 0)
        self._read_before = batch.end
        return batch

    def _collect(self, scan: Scan, number: int, batch: ReadBatch) -> None:
        for frame, end in scan.frames:
            try:
                entry = entries.decode(frame)
            except entries.MalformedEntry:
                batch.malformed += 1
                continue
            if isinstance(entry, PolicySnapshot):
                self._remember(entry)
            elif isinstance(entry, Admission):
                batch.admissions.append((entry, Position(number, end)))
        batch.end = Position(number, scan.end)

    def _policies_before(self, after: Position) -> None:
        path = segments.segment_path(self.directory, after.segment)
        with contextlib.suppress(FileNotFoundError):
            scan = scan_segment(path, 0, limit=1 << 30, until=after.offset)
            for frame, _end in scan.frames:
                if frame.kind == entries.POLICY:
                    with contextlib.suppress(entries.MalformedEntry):  # counted when read in turn
                        entry = entries.decode(frame)
                        if isinstance(entry, PolicySnapshot):
                            self._remember(entry)

    def _remember(self, snapshot: PolicySnapshot) -> None:
        self.policies.pop(snapshot.digest, None)
        self.policies[snapshot.digest] = snapshot  # the latest last
        while len(self.policies) > MAX_POLICIES:
            self.policies.pop(next(iter(self.policies)))

    def remove_before(self, position: Position) -> int:
        """Delete the segments wholly before `position` (replayed, and finished); how many."""
        removed = 0
        for number in segments.segment_numbers(self.directory):
            if number >= position.segment:
                break
            segments.remove_segment(self.directory, number)
            removed += 1
        return removed

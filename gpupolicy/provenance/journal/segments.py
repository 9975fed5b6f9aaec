"""The journal's directory: segments, the checkpoint, and the locks.

    <journal>/0000000000000001.seg   segments, numbered in the order written; only the newest
                                     one is ever appended to, by the one writer
    <journal>/checkpoint             where the replayer has got to: every entry before it is in
                                     the store (committed or spooled)
    <journal>/.writer.lock           flock held by the writer (the webhook) while it runs
    <journal>/.replayer.lock         flock held by the replayer while it runs

A segment is finished once a newer one exists, or once no writer holds the writer's lock: a
writer never appends to a segment it did not create, so a segment left by a crash is finished
too. Numbers only grow: a new writer starts after the newest segment and after the checkpoint
(which may name the segment after a finished one the replayer deleted).

Names are made here from numbers, never from what a request holds.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from dataclasses import dataclass
from pathlib import Path

from gpupolicy.provenance.spool import fsync_directory

SUFFIX = ".seg"
CHECKPOINT = "checkpoint"
WRITER_LOCK = ".writer.lock"
REPLAYER_LOCK = ".replayer.lock"


@dataclass(frozen=True, slots=True, order=True)
class Position:
    """A place in the journal: every entry before `offset` of segment `segment`, and every entry
    of an earlier segment, comes before it."""

    segment: int
    offset: int


START = Position(0, 0)


def segment_path(directory: Path, number: int) -> Path:
    return directory / f"{number:016d}{SUFFIX}"


def segment_numbers(directory: Path) -> list[int]:
    """The segments in the directory, oldest first."""
    numbers = []
    for entry in os.scandir(directory):
        stem, dot, suffix = entry.name.partition(".")
        if dot and "." + suffix == SUFFIX and stem.isdigit() and len(stem) == 16:
            numbers.append(int(stem))
    return sorted(numbers)


def read_checkpoint(directory: Path) -> Position:
    """The replayer's checkpoint (START when there is none, or it cannot be read: replaying from
    the oldest segment again writes nothing twice)."""
    try:
        data = json.loads((directory / CHECKPOINT).read_text(encoding="utf-8"))
        return Position(int(data["segment"]), int(data["offset"]))
    except (OSError, ValueError, KeyError, TypeError):
        return START


def write_checkpoint(directory: Path, position: Position, *, durable: bool = True) -> None:
    """Replace the checkpoint atomically (written, renamed over the old one). `durable`: synced
    first, and the directory after — needed before a segment behind it is deleted; a checkpoint
    lost without that only makes the next replayer start earlier (writing nothing twice)."""
    temporary = directory / f".{CHECKPOINT}.tmp"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, json.dumps({"segment": position.segment, "offset": position.offset}).encode())
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)
    temporary.replace(directory / CHECKPOINT)
    if durable:
        fsync_directory(directory)


class DirectoryLock:
    """An flock on a file of the journal directory, held from `acquire` to `release`."""

    def __init__(self, directory: Path, name: str) -> None:
        self.path = directory / name
        self._fd: int | None = None

    def acquire(self, *, blocking: bool) -> bool:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            os.close(fd)
            return False
        self._fd = fd
        return True

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # releases the flock
            self._fd = None


def writer_running(directory: Path) -> bool:
    """Whether a writer holds the journal now (probed without waiting)."""
    try:
        fd = os.open(directory / WRITER_LOCK, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # a shared lock taken here goes with it
    return False


def remove_segment(directory: Path, number: int) -> None:
    with contextlib.suppress(FileNotFoundError):
        segment_path(directory, number).unlink()

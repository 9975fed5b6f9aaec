"""Which written batches of the journal may be acknowledged, and in what order, while up to two
flushes (`fdatasync`) are in flight.

A batch is written (`pwrite`) at the end of its segment, then waits for a flush of that segment
that *began after its write ended*: such a flush returns only once every page of the file that
was dirty when it began is on disk, the batch's and every earlier batch's alike. So a flush that
began later may acknowledge a batch before the flush its own writer started has returned (on a
disk whose flushes sometimes take milliseconds, the next admission then need not wait for the
slow flush and then its own).

A flush that fails marks its segment failed: every batch of the segment not yet acknowledged
fails with it, whichever flush it was waiting for (a disk's write error is reported to one
flush per descriptor, and which of two flushes in flight the failed pages belonged to cannot be
told), and the writer starts a new segment for the next batch. So no acknowledged frame ever
follows a torn one in its segment.

Batches are settled in the order they were written, failures included: an admission's answer
never overtakes the answer of one journaled before it.

Pure bookkeeping: the appender calls it under its lock, and settles what it returns.
"""

from __future__ import annotations

from collections import deque
from typing import Generic, TypeVar

from gpupolicy.core.immutable import immutable

T = TypeVar("T")


@immutable
class Written(Generic[T]):
    """A batch written at the end of segment `segment`, its last frame ending at `end`."""

    segment: int
    end: int
    batch: T


@immutable
class Settled(Generic[T]):
    written: Written[T]
    durable: bool  # False: failed with its segment


class Acknowledgements(Generic[T]):
    def __init__(self) -> None:
        self._waiting: deque[Written[T]] = deque()  # in the order written
        self._synced: dict[int, int] = {}  # segment -> how far a successful flush has reached
        self._failed: set[int] = set()

    def written(self, written: Written[T]) -> None:
        self._waiting.append(written)

    def flushed(self, segment: int, through: int) -> list[Settled[T]]:
        """A flush of `segment` that began once `through` bytes of it were written returned
        without error: what is settled now, in order."""
        if segment not in self._failed:
            self._synced[segment] = max(self._synced.get(segment, 0), through)
        return self._settle()

    def failed(self, segment: int) -> list[Settled[T]]:
        """A write or flush of `segment` failed: what is settled now, in order."""
        self._failed.add(segment)
        return self._settle()

    def is_failed(self, segment: int) -> bool:
        return segment in self._failed

    def waiting(self) -> int:
        return len(self._waiting)

    def _settle(self) -> list[Settled[T]]:
        settled: list[Settled[T]] = []
        while self._waiting:
            head = self._waiting[0]
            if head.segment in self._failed:
                settled.append(Settled(head, durable=False))
            elif head.end <= self._synced.get(head.segment, 0):
                settled.append(Settled(head, durable=True))
            else:
                break  # its flush is still in flight; what was written after it waits behind it
            self._waiting.popleft()
        self._forget_flushed_segments()
        return settled

    def _forget_flushed_segments(self) -> None:
        """Keep the flush marks of segments still waited on: a flush that returns after its
        segment's batches were settled has nothing left to acknowledge."""
        segments = {written.segment for written in self._waiting}
        for segment in [segment for segment in self._synced if segment not in segments]:
            del self._synced[segment]

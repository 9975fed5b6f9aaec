"""Which written batches a flush acknowledges, and in what order (the appender's bookkeeping,
alone: no threads, no disk)."""

from __future__ import annotations

from gpupolicy.provenance.journal.acknowledgements import Acknowledgements, Settled, Written


def names(settled: list[Settled[str]]) -> list[tuple[str, bool]]:
    return [(done.written.batch, done.durable) for done in settled]


def test_a_flush_acknowledges_what_was_written_before_it_began() -> None:
    acks: Acknowledgements[str] = Acknowledgements()
    acks.written(Written(1, 100, "a"))
    acks.written(Written(1, 200, "b"))
    assert names(acks.flushed(1, 100)) == [("a", True)]  # began between the two writes
    assert acks.waiting() == 1
    assert names(acks.flushed(1, 200)) == [("b", True)]


def test_a_later_flush_returning_first_acknowledges_the_earlier_batches_in_order() -> None:
    acks: Acknowledgements[str] = Acknowledgements()
    acks.written(Written(1, 100, "a"))  # its flush (through 100) is slow
    acks.written(Written(1, 200, "b"))
    assert names(acks.flushed(1, 200)) == [("a", True), ("b", True)]
    assert names(acks.flushed(1, 100)) == []  # the slow one returns: nothing left to do


def test_a_batch_waits_behind_an_earlier_one_of_an_older_segment() -> None:
    acks: Acknowledgements[str] = Acknowledgements()
    acks.written(Written(1, 100, "a"))
    acks.written(Written(2, 50, "b"))  # the segment rolled over
    assert names(acks.flushed(2, 50)) == []
    assert names(acks.flushed(1, 100)) == [("a", True), ("b", True)]


def test_a_failure_fails_every_batch_of_its_segment_not_yet_acknowledged() -> None:
    acks: Acknowledgements[str] = Acknowledgements()
    acks.written(Written(1, 100, "a"))
    assert names(acks.flushed(1, 100)) == [("a", True)]
    acks.written(Written(1, 200, "b"))
    acks.written(Written(1, 300, "c"))
    assert names(acks.failed(1)) == [("b", False), ("c", False)]
    assert acks.is_failed(1)
    acks.written(Written(1, 400, "d"))  # written into it before the writer saw the failure
    assert names(acks.flushed(1, 400)) == [("d", False)]  # a flush succeeding later changes nothing
    acks.written(Written(2, 100, "e"))
    assert names(acks.flushed(2, 100)) == [("e", True)]


def test_a_failure_in_a_newer_segment_leaves_the_older_one_acknowledgeable() -> None:
    acks: Acknowledgements[str] = Acknowledgements()
    acks.written(Written(1, 100, "a"))
    acks.written(Written(2, 100, "b"))
    assert names(acks.failed(2)) == []  # settled in order: b waits behind a
    assert names(acks.flushed(1, 100)) == [("a", True), ("b", False)]

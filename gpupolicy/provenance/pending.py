"""A record waiting to be made durable, with the future its caller waits on; and the fallback
that makes such records durable in the spool when the database cannot take them."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence
from concurrent.futures import Future, InvalidStateError

from gpupolicy.core.immutable import immutable
from gpupolicy.provenance.counters import Counters
from gpupolicy.provenance.errors import StoreUnavailable
from gpupolicy.provenance.record import ProvenanceRecord
from gpupolicy.provenance.spool import Spool

log = logging.getLogger("gpupolicy.provenance")


@immutable
class Pending:
    record: ProvenanceRecord
    future: Future[str]


def start(future: Future[str]) -> None:
    """PENDING -> RUNNING (no longer cancellable); a future already running or settled is left
    (asked anyway, `set_running_or_notify_cancel` logs a CRITICAL "unexpected state" line)."""
    if future.running() or future.done():
        return
    with contextlib.suppress(InvalidStateError, RuntimeError):  # taken by the other thread meanwhile
        future.set_running_or_notify_cancel()


def settle(future: Future[str], *, result: str | None = None, error: BaseException | None = None) -> None:
    """Resolve a future the writer took (RUNNING: a caller can no longer cancel it) or one still
    queued; a future cancelled before the writer took it has nobody waiting for it."""
    with contextlib.suppress(InvalidStateError):  # cancelled meanwhile (only while still queued)
        if future.cancelled():
            return
        if error is not None:
            future.set_exception(error)
        else:
            assert result is not None
            future.set_result(result)


class SpoolFallback:
    """Where records go when the database cannot take them: one append and one fsync for all of
    them, then their futures resolve to the record ids. When that fails too (no spool, its disk
    failed) the futures fail with StoreUnavailable: the caller decides (the webhook admits)."""

    def __init__(self, spool: Spool | None, counters: Counters) -> None:
        self.spool = spool
        self.counters = counters

    def take(self, items: Sequence[Pending]) -> bool:
        """Spool `items` and settle their futures; True when they were spooled."""
        if not items:
            return True
        try:
            if self.spool is None:
                raise StoreUnavailable(f"provenance database unavailable: {self.counters.last_error}")
            self.spool.append_many([item.record.to_dict() for item in items])
        except Exception as exc:  # OSError, or no spool
            log.error("provenance: %d records could not be stored: %s", len(items), exc)
            for item in items:
                error = StoreUnavailable(f"provenance record {item.record.uid} not stored: {exc}")
                error.__cause__ = exc
                settle(item.future, error=error)
            return False
        self.counters.add(spooled=len(items))
        for item in items:
            settle(item.future, result=item.record.uid)
        return True

"""What a store raises when a record cannot be made durable or the database cannot be read
(no SQLAlchemy needed to catch them)."""

from __future__ import annotations


class StoreUnavailable(RuntimeError):
    """The database cannot be reached (and, for writes, there is no spool to fall back on)."""


class WriterStopped(StoreUnavailable):
    """The store's writer thread is not running (it died, or the store was closed): nothing
    submitted now can be made durable."""


class StoreStalled(StoreUnavailable):
    """The database took a write and has not answered within `write_timeout`."""


class StoreOverloaded(StoreUnavailable):
    """`max_queue` records are already waiting for the writer."""

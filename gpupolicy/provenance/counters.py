"""What the store counts, for `health()`, /readyz and /metrics: each unit adds to its own
counters; one lock keeps a reader from seeing half an update."""

from __future__ import annotations

import threading

from gpupolicy.core.immutable import field_names, immutable


@immutable
class CounterValues:
    writes: int = 0  # committed straight to the database
    spooled: int = 0  # appended to the spool instead
    replayed: int = 0  # spooled records inserted by a replay (duplicates not counted)
    failures: int = 0  # database errors seen (each one sent a record to the spool or failed a replay)
    torn_spool_lines: int = 0
    commits: int = 0  # transactions the writer committed (one per batch when all goes well)
    rescued: int = 0  # spooled by the watchdog while the writer was stuck on the database
    batches: int = 0  # batches the writer took from its queue
    last_error: str | None = None


_NAMES = tuple(name for name in field_names(CounterValues) if name != "last_error")


class Counters:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values = dict.fromkeys(_NAMES, 0)
        self._last_error: str | None = None

    def add(self, **amounts: int) -> None:
        with self._lock:
            for name, amount in amounts.items():
                self._values[name] += amount

    def failed(self, error: str) -> None:
        """A database error: counted, and remembered as the last one."""
        with self._lock:
            self._values["failures"] += 1
            self._last_error = error

    def set_last_error(self, error: str | None) -> None:
        with self._lock:
            self._last_error = error

    @property
    def last_error(self) -> str | None:
        return self._last_error

    def snapshot(self) -> CounterValues:
        with self._lock:
            return CounterValues(**self._values, last_error=self._last_error)

"""The writer's watchdog: a database that accepts packets and answers nothing lets no timeout of
its own fire, and the writer then waits inside one batch. Every quarter of a second (at most)
the watchdog asks the writer whether its batch has waited longer than `write_timeout`; if so,
what that batch holds and everything queued behind it go to the spool and their callers are
answered. The stuck batch may still commit later: the uid key keeps its replay from adding a row."""

from __future__ import annotations

import threading
from typing import Protocol

from gpupolicy.provenance.pending import Pending


class Watched(Protocol):
    """What the watchdog asks of the writer (`writer.GroupCommitWriter`)."""

    def watched(self) -> bool: ...

    def take_stalled(self) -> tuple[list[Pending], float] | None: ...

    def rescue(self, waiting: list[Pending], *, stalled_for: float) -> None: ...


class Watchdog:
    def __init__(self, writer: Watched, write_timeout: float) -> None:
        self.writer = writer
        self.interval = min(0.25, write_timeout / 4)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="provenance-watchdog", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            if not self.writer.watched():
                return
            stalled = self.writer.take_stalled()
            if stalled is not None:
                waiting, stalled_for = stalled
                self.writer.rescue(waiting, stalled_for=stalled_for)

    def stop(self, wait: float) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(wait)

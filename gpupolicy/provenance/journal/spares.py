"""A segment file made ahead of need: zero-filled and synced by a thread of its own, so that the
writer starts a segment with a rename (and a directory fsync) instead of writing megabytes of
zeros while admissions wait for their fsync behind it.

The spare is `<journal>/.spare`: not a segment name, so no reader ever takes it for one; the
writer renames it to its segment's name when it starts one, then the next spare is prepared.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger("gpupolicy.provenance")

SPARE = ".spare"
_ZEROS = bytes(1024 * 1024)


def fill_with_zeros(fd: int, size: int) -> None:
    """Write `size` zero bytes from the start of the file and sync them."""
    written = 0
    while written < size:
        written += os.pwrite(fd, _ZEROS[: min(len(_ZEROS), size - written)], written)
    os.fdatasync(fd)


class SpareSegment:
    def __init__(self, directory: Path, size: int, *, room: Callable[[], bool]) -> None:
        self.path = directory / SPARE
        self.size = size
        self._room = room  # whether the journal's bound leaves room for one more segment
        self._fd: int | None = None
        self._changed = threading.Condition()
        self._closing = False
        self._thread = threading.Thread(target=self._run, name="provenance-journal-spare", daemon=True)

    def start(self) -> SpareSegment:
        self.path.unlink(missing_ok=True)  # an earlier run's, half made perhaps
        self._thread.start()
        return self

    @property
    def ready_bytes(self) -> int:
        return self.size if self._fd is not None else 0

    def take_as(self, path: Path) -> int | None:
        """The spare's descriptor, renamed to `path` (the caller fsyncs the directory); None
        when none is ready."""
        with self._changed:  # renamed before the next spare may be made under the same name
            fd, self._fd = self._fd, None
            if fd is None:
                return None
            try:
                self.path.rename(path)
            except OSError:
                os.close(fd)
                raise
            finally:
                self._changed.notify()
        return fd

    def _run(self) -> None:
        while True:
            with self._changed:
                while not self._closing and self._fd is not None:
                    self._changed.wait(0.25)
                if self._closing:
                    return
            if not self._room():
                with self._changed:  # the bound is reached: ask again in a while
                    self._changed.wait(0.25)
                continue
            self._prepare()

    def _prepare(self) -> None:
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        except OSError as exc:
            log.error("provenance journal: no spare segment: %s", exc)
            with self._changed:
                self._changed.wait(1.0)
            return
        try:
            fill_with_zeros(fd, self.size)
        except OSError as exc:  # the writer makes its own segment, the slow way
            os.close(fd)
            self.path.unlink(missing_ok=True)
            log.error("provenance journal: no spare segment: %s", exc)
            with self._changed:
                self._changed.wait(1.0)
            return
        with self._changed:
            self._fd = fd
            self._changed.notify_all()

    def close(self) -> None:
        with self._changed:
            self._closing = True
            self._changed.notify_all()
        self._thread.join(10)
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)
        with contextlib.suppress(OSError):
            self.path.unlink()

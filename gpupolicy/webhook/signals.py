"""Signals made into something a thread can wait on, with no lock taken in the handler.

A Python signal handler runs in the main thread between two bytecodes, wherever that thread is:
inside `threading.Event.wait` too, between taking the lock of the event's condition and
releasing it to sleep. A handler that calls `Event.set()` there waits for that lock, held by the
very thread it runs in: the main thread is deadlocked, and every other thread that sets the
event after it (the replayer's parent watch) with it. It happened: a provenance replayer whose
webhook was SIGKILLed (PR_SET_PDEATHSIG sends it SIGTERM) polled its stop event every 100 ms
and never exited, holding the journal. A second SIGINT arriving inside the first one's handler
does the same to any handler that sets an event.

So the handler only writes a byte to a pipe (`os.write` takes no lock of Python's, and a pipe
that is full already holds a wake-up), and an ordinary thread blocked on the other end does
the rest. See https://docs.python.org/3/library/signal.html#note-on-signal-handlers-and-exceptions
and the `threading` docs: the handler "can be invoked at any point in the main thread".
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterable
from types import FrameType

_WAKE = b"\0"


class SignalPipe:
    """`notify()` is safe in a signal handler; `wait()`, in another thread, returns once it was
    called (True), or once `close()` was (False)."""

    def __init__(self) -> None:
        self._read, self._write = os.pipe()
        os.set_blocking(self._write, False)

    def notify(self) -> None:
        with contextlib.suppress(BlockingIOError, OSError):  # full: a wake-up is there already
            os.write(self._write, _WAKE)

    def wait(self) -> bool:
        try:
            return os.read(self._read, 1) == _WAKE
        except OSError:  # closed under the reader
            return False

    def close(self) -> None:
        """Wakes a waiting `wait()` with False (unless a notification came first)."""
        with contextlib.suppress(OSError):
            os.close(self._write)


def stop_on_signals(stop: threading.Event, signals: Iterable[signal.Signals]) -> SignalPipe:
    """Set `stop` when one of `signals` arrives (call from the main thread, as `signal.signal`
    requires): set by a thread of its own, never by the handler."""
    pipe = SignalPipe()

    def handler(_signum: int, _frame: FrameType | None) -> None:
        pipe.notify()

    def relay() -> None:
        if pipe.wait():
            stop.set()

    for sig in signals:
        signal.signal(sig, handler)
    threading.Thread(target=relay, name="signal-relay", daemon=True).start()
    return pipe

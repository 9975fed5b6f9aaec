"""webhook/signals.py: a signal that lands while the main thread is inside `Event.wait` still
stops the process (a handler calling `Event.set()` itself deadlocks there about half the time
when the main thread does nothing but wait on the event, as the provenance replayer does when
idle)."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time

from gpupolicy.webhook.signals import SignalPipe, stop_on_signals
from tests.webhook.server_process import REPO

# The main thread spends nearly all its time inside Event.wait, most of it holding the
# condition's lock: where the signal lands is the hazard under test.
WAITER = """
import signal, sys, threading
from gpupolicy.webhook.signals import stop_on_signals
stop = threading.Event()
stop_on_signals(stop, (signal.SIGTERM,))
print("ready", flush=True)
while not stop.is_set():
    stop.wait(0)
sys.exit(0)
"""
PROCESSES = 8  # with a handler that sets the event itself, all 8 exit about once in 256 runs


def test_a_signal_inside_event_wait_stops_every_waiter() -> None:
    processes = [
        subprocess.Popen([sys.executable, "-c", WAITER], cwd=REPO, stdout=subprocess.PIPE)
        for _ in range(PROCESSES)
    ]
    try:
        for process in processes:
            assert process.stdout is not None and process.stdout.readline() == b"ready\n"
            process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 20
        hung = []
        for process in processes:
            try:
                process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                hung.append(process.pid)
        assert hung == [], f"{len(hung)} of {PROCESSES} processes did not stop on SIGTERM"
        assert [process.returncode for process in processes] == [0] * PROCESSES
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait(5)


def test_notify_never_blocks_and_wakes_one_wait() -> None:
    pipe = SignalPipe()
    for _ in range(200_000):  # far past a pipe's 64 KiB: a full pipe holds a wake-up already
        pipe.notify()
    assert pipe.wait() is True
    pipe.close()


def test_close_wakes_a_waiting_thread_without_a_signal() -> None:
    pipe = SignalPipe()
    woken: list[bool] = []
    waiter = threading.Thread(target=lambda: woken.append(pipe.wait()))
    waiter.start()
    pipe.close()
    waiter.join(10)
    assert woken == [False]


def test_stop_on_signals_sets_the_event_from_another_thread() -> None:
    stop = threading.Event()
    previous = signal.getsignal(signal.SIGUSR1)
    try:
        stop_on_signals(stop, (signal.SIGUSR1,))
        signal.raise_signal(signal.SIGUSR1)
        assert stop.wait(10)
    finally:
        signal.signal(signal.SIGUSR1, previous)

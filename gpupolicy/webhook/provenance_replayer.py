"""The provenance replayer: a process of its own that turns the admission journal into records.

The webhook answers an admission once its body and decision are in the journal
(gpupolicy/provenance/journal/); building the record (redaction, hashing) and writing it to
the store cost the event loop more than the review itself, so they happen here, in another
process, with the store as before (group commit, the spool when the database is down, the
spool's replay). `ReplayerProcess` starts it from the webhook (`python -m
gpupolicy.webhook.provenance_replayer`), restarts it when it dies, and stops it at shutdown;
`main` is what runs in it.

The process runs at a lower CPU priority than the webhook (`NICE`, and `SCHED_BATCH`: see
`_yield_to_the_webhook`): when both want the CPU, admissions come first and the journal waits
(it is bounded: journal/appender.py). It ends when
the webhook does: on SIGTERM, or when its parent is gone (SIGKILL of the webhook), it replays
what the journal holds for `--drain-seconds` at most, then exits. One replayer at a time holds
the journal (a new one waits for the one before it to finish).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import gc
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gpupolicy.core.immutable import immutable
from gpupolicy.provenance.journal.segments import REPLAYER_LOCK, DirectoryLock
from gpupolicy.provenance.locations import DB_ENV
from gpupolicy.webhook.collector import fewer_collections
from gpupolicy.webhook.logs import configure_logging, log
from gpupolicy.webhook.signals import stop_on_signals

_log = logging.getLogger("gpupolicy.provenance")

NICE = 10  # weight 110 against the webhook's 1024: about a tenth of a contended CPU
STATUS_FILE = "replayer.json"
STATUS_SECONDS = 1.0
DRAIN_SECONDS = 3.0  # inside the webhook's shutdown margin (server.SHUTDOWN_MARGIN_SECONDS)
RESTART_DELAYS = (1.0, 2.0, 5.0, 10.0, 30.0)
HEALTHY_SECONDS = 30.0  # a replayer that ran this long starts its restart delays over
_PR_SET_PDEATHSIG = 1  # prctl(2)


@immutable
class ReplayerSettings:
    journal_dir: Path
    spool_dir: Path
    db: str | None  # None: SQLite beside the spool, as the webhook's store
    timeout: float
    log_level: str = "info"

    def command(self) -> list[str]:
        return [
            sys.executable, "-m", "gpupolicy.webhook.provenance_replayer",
            "--journal", str(self.journal_dir), "--spool", str(self.spool_dir),
            "--db-timeout", str(self.timeout), "--log-level", self.log_level, "--parent", str(os.getpid()),
        ]  # fmt: skip

    def environment(self) -> dict[str, str]:
        """The webhook's environment, with the database URL in it (never in the arguments:
        anyone on the host can list those)."""
        environment = {name: value for name, value in os.environ.items() if name != DB_ENV}
        if self.db is not None:
            environment[DB_ENV] = self.db
        return environment


class ReplayerProcess:
    """The replayer's process, seen from the webhook: started, restarted, stopped, reported."""

    def __init__(self, settings: ReplayerSettings) -> None:
        self.settings = settings
        self.restarts = 0
        self.last_exit: int | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._started = 0.0
        self._lock = threading.Lock()  # a spawn and a stop never cross
        self._stopping = threading.Event()
        self._thread = threading.Thread(
            target=self._supervise, name="provenance-replayer-process", daemon=True
        )

    def start(self) -> ReplayerProcess:
        self._spawn()
        self._thread.start()
        return self

    def _spawn(self) -> None:
        with self._lock:
            if self._stopping.is_set():
                return
            self._process = subprocess.Popen(
                self.settings.command(), env=self.settings.environment(), stdin=subprocess.DEVNULL
            )
            self._started = time.monotonic()

    def _supervise(self) -> None:
        delays = 0
        while self._process is not None:
            code = self._process.wait()
            if self._stopping.is_set():
                return
            delays = 0 if time.monotonic() - self._started >= HEALTHY_SECONDS else delays
            delay = RESTART_DELAYS[min(delays, len(RESTART_DELAYS) - 1)]
            delays += 1
            self.last_exit, self.restarts = code, self.restarts + 1
            log(
                _log,
                logging.ERROR,
                "provenance replayer exited; restarting it",
                code=code,
                delay_seconds=delay,
            )
            if self._stopping.wait(delay):
                return
            try:
                self._spawn()
            except OSError as exc:  # the next round waits again and retries
                log(_log, logging.ERROR, "provenance replayer could not be started", error=str(exc)[:300])

    def stop(self, wait: float = DRAIN_SECONDS + 2.0) -> None:
        """SIGTERM (it replays what is left for DRAIN_SECONDS), then SIGKILL after `wait`."""
        with self._lock:
            self._stopping.set()
            process = self._process
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(wait)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)
        if self._thread.is_alive():
            self._thread.join(5)

    def status(self) -> dict[str, Any]:
        process = self._process
        running = process is not None and process.poll() is None
        return {
            "running": running,
            "pid": process.pid if running and process is not None else None,
            "restarts": self.restarts,
            "last_exit": self.last_exit,
            "report": read_status(self.settings.journal_dir),
        }


def read_status(journal_dir: Path) -> dict[str, Any] | None:
    """What the replayer last reported (None before its first report)."""
    try:
        report: dict[str, Any] = json.loads((journal_dir / STATUS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return report


# -- in the replayer's process ----------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gpupolicy-provenance-replayer", description=__doc__)
    parser.add_argument("--journal", type=Path, required=True)
    parser.add_argument("--spool", type=Path, required=True)
    parser.add_argument("--db-timeout", type=float, default=2.0)
    parser.add_argument("--log-level", default="info")
    parser.add_argument("--parent", type=int, required=True, help="the webhook's pid: exit when it is gone")
    parser.add_argument("--drain-seconds", type=float, default=DRAIN_SECONDS)
    return parser


def _die_with(parent: int) -> None:
    """SIGTERM when the parent dies (Linux' PR_SET_PDEATHSIG); gone already: exit now. The status
    thread checks the parent too, where prctl is not there."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:
        raise SystemExit(0)


class _Reporter:
    """Writes the replayer's status (its replay counts and its store's health) for the webhook's
    /readyz and /metrics, every STATUS_SECONDS; stops the replay when the parent is gone."""

    def __init__(self, path: Path, replayer: Any, store: Any, *, parent: int, stop: threading.Event) -> None:
        self.path, self.replayer, self.store, self.parent, self.stop = path, replayer, store, parent, stop
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="provenance-replayer-status", daemon=True)

    def start(self) -> _Reporter:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._done.wait(STATUS_SECONDS):
            if os.getppid() != self.parent:
                self.stop.set()
            self.write()

    def write(self) -> None:
        report = {
            "pid": os.getpid(),
            "time": time.time(),
            **self.replayer.status(),
            "store": self.store.health(),
        }
        temporary = self.path.with_name(f".{self.path.name}.tmp")
        with contextlib.suppress(OSError):  # a report missed is not worth stopping for
            temporary.write_text(json.dumps(report, default=str), encoding="utf-8")
            temporary.replace(self.path)

    def close(self) -> None:
        self._done.set()
        self._thread.join(STATUS_SECONDS * 5)
        self.write()


def _yield_to_the_webhook() -> None:
    """A lower weight (`NICE`), and no preemption on waking (`SCHED_BATCH`), for this thread and
    the threads it starts: they inherit both.

    The weight alone left the webhook's p99 at 200 admissions a second 1.4 ms higher: the
    replayer wakes ten times a second (its poll), and a task waking from a sleep is placed to
    run soon, so each wake-up took a CPU from an admission in flight. A `SCHED_BATCH` task never
    preempts on waking; it runs when a CPU is free or at the next tick, with the same weight, so
    it still gets its share when the webhook is saturated (unlike `SCHED_IDLE`, which could
    starve it and fill the journal). sched(7); docs/performance.md, "The replayer yields on
    waking"."""
    with contextlib.suppress(OSError):
        os.nice(NICE)
    with contextlib.suppress(OSError, AttributeError):  # AttributeError: not Linux
        os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))


def main(argv: Sequence[str] | None = None) -> int:
    _yield_to_the_webhook()  # first: the threads started below (the log's among them) inherit it
    args = _parser().parse_args(argv)
    configure_logging(args.log_level)
    stop = threading.Event()
    # Not `stop.set()` in the handler: it deadlocks when the signal lands inside `stop.wait()`.
    stop_on_signals(stop, (signal.SIGTERM, signal.SIGINT))
    _die_with(args.parent)
    lock = DirectoryLock(args.journal, REPLAYER_LOCK)
    while not lock.acquire(blocking=False):  # the replayer before this one is still finishing
        if stop.wait(0.2):
            return 0
    try:
        return _replay(args, stop)
    finally:
        lock.release()


def _replay(args: argparse.Namespace, stop: threading.Event) -> int:
    from gpupolicy.provenance.journal.replayer import JournalReplayer
    from gpupolicy.provenance.store import open_store
    from gpupolicy.webhook.records import record_of_admission

    timeout = args.db_timeout
    store = open_store(
        os.environ.get(DB_ENV) or None, spool_dir=args.spool, connect_timeout=timeout, write_timeout=timeout
    )
    replayer = JournalReplayer(args.journal, store, record_of_admission)
    reporter = _Reporter(args.journal / STATUS_FILE, replayer, store, parent=args.parent, stop=stop).start()
    # What start-up loaded (the rules, SQLAlchemy, the store: ~60,000 objects) lives as long as
    # the process: out of the cyclic collector, whose full passes over it took 30-50 ms each,
    # one every two seconds while the replayer keeps up with a busy webhook (as the webhook does).
    gc.collect()
    gc.freeze()
    # A batch of 256 records alive at once was walked by a young pass every 700 objects.
    fewer_collections()
    log(_log, logging.INFO, "provenance replayer started", position=replayer.status()["position"])
    try:
        replayer.run(stop)
        drained = replayer.drain(time.monotonic() + args.drain_seconds)
        log(_log, logging.INFO, "provenance replayer stopping", drained=drained, **replayer.status())
    finally:
        reporter.close()
        store.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

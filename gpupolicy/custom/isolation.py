"""Custom rules evaluated in worker processes, so that a time budget holds.

The Rego and CEL engines are native code that keeps Python's interpreter lock while it runs: a
thread cannot stop waiting for a rule that loops, because no Python code runs until the rule
returns. The webhook therefore evaluates custom rules in a few worker processes: the caller sends
the check (once per worker) and the object, waits at most the budget, and on overrun kills the
worker and starts another — the runaway rule stops using a CPU too. A worker that dies (an engine
crash) is replaced the same way; the server goes on.

`gpupolicy lint` evaluates in-process (no budget): a pre-commit hook or a CI job is not held by
other requests, and in-process evaluation is several times faster.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import queue
import threading
import time
from collections.abc import Mapping, Sequence
from multiprocessing.connection import Connection
from typing import Any

from gpupolicy.custom.definitions import Check, CustomViolation, Review


class WorkerTimeout(Exception):
    """The worker did not answer within the budget (it was stopped)."""


class WorkerFailure(Exception):
    """The check raised in the worker, or the worker died."""


def _serve(connection: Connection) -> None:
    """A worker's loop: "ready" once the engines are imported, then (key, check or None, review,
    parameters) in, ("ok", violations) or ("error", message) out."""
    import gpupolicy.custom.cel_rules
    import gpupolicy.custom.gatekeeper
    import gpupolicy.custom.native_rego  # noqa: F401  (what the checks are made of, before the first)

    for engine in ("regorus", "cel"):
        with contextlib.suppress(ImportError):  # a language no rule of the policy uses may be missing
            __import__(engine)
    connection.send("ready")
    checks: dict[int, Check] = {}
    while True:
        try:
            key, check, review, parameters = connection.recv()
        except (EOFError, OSError):
            return
        if check is not None:
            checks[key] = check
        try:
            connection.send(("ok", list(checks[key](review, parameters))))
        except Exception as exc:  # the rule's error, reported by the caller
            connection.send(("error", f"{type(exc).__name__}: {exc}"))


class _Worker:
    def __init__(self, context: Any) -> None:
        self.connection, child = context.Pipe()
        self.process = context.Process(
            target=_serve, args=(child,), daemon=True, name="gpupolicy-custom-rules"
        )
        self.process.start()
        child.close()
        self.known: set[int] = set()

    def stop(self) -> None:
        self.process.kill()
        self.process.join(5)
        self.connection.close()


START_SECONDS = 60.0


class IsolatedRunner:
    """A pool of worker processes that evaluate checks within a budget (thread-safe)."""

    def __init__(self, workers: int = 2) -> None:
        self._context = multiprocessing.get_context("spawn")  # never fork a threaded server
        self._idle: queue.Queue[_Worker] = queue.Queue()
        self._all: list[_Worker] = []
        self._lock = threading.Lock()
        for _ in range(workers):
            self._add()

    def wait_ready(self, timeout: float) -> bool:
        """Wait until every worker has started (at most `timeout` seconds): a policy load waits,
        so that its trial admission does not spend its budgets on start-up."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                wanted = len(self._all)
            if self._idle.qsize() >= wanted:
                return True
            time.sleep(0.05)
        return False

    def _add(self) -> None:
        """Start a worker; it joins the idle ones once ready (importing the engines takes about a
        second: a waiting caller must not spend its budget on that)."""
        worker = _Worker(self._context)
        with self._lock:
            self._all.append(worker)
        threading.Thread(target=self._when_ready, args=(worker,), daemon=True).start()

    def _when_ready(self, worker: _Worker) -> None:
        try:
            ready = worker.connection.poll(START_SECONDS) and worker.connection.recv() == "ready"
        except (EOFError, OSError):
            ready = False
        if ready:
            self._idle.put(worker)
        else:  # it could not start: another try, unless the pool is closing
            with self._lock:
                closing = worker not in self._all
            if not closing:
                self._replace(worker)

    def _replace(self, worker: _Worker) -> None:
        worker.stop()
        with self._lock:
            self._all.remove(worker)
        self._add()

    def run(
        self, check: Check, review: Review, parameters: Mapping[str, Any], budget: float
    ) -> Sequence[CustomViolation]:
        try:
            worker = self._idle.get(timeout=budget)
        except queue.Empty:
            raise WorkerTimeout("every worker is busy") from None
        key = id(check)
        try:
            worker.connection.send((key, None if key in worker.known else check, review, dict(parameters)))
            worker.known.add(key)
            if not worker.connection.poll(budget):
                self._replace(worker)
                raise WorkerTimeout("no answer within the budget")
            status, payload = worker.connection.recv()
        except (EOFError, OSError, BrokenPipeError) as exc:
            self._replace(worker)
            raise WorkerFailure(f"the worker process stopped ({exc or type(exc).__name__})") from None
        self._idle.put(worker)
        if status != "ok":
            raise WorkerFailure(str(payload))
        result: Sequence[CustomViolation] = payload
        return result

    def close(self) -> None:
        with self._lock:
            workers, self._all = self._all, []
        for worker in workers:
            worker.stop()

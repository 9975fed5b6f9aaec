"""Assemble the webhook from `gpupolicy serve`'s arguments: policy, engine, cluster inventory and
the facts learned from it, provenance store, TLS, and the uvicorn server that runs the app (and, with
`--provenance-api-port`, the provenance API on a port of its own, in the same event loop)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType

import uvicorn
from fastapi import FastAPI

from gpupolicy.webhook.app import WebhookState, create_app, create_provenance_app
from gpupolicy.webhook.cluster_inventory import ClusterInventory
from gpupolicy.webhook.collector import fewer_collections
from gpupolicy.webhook.live_facts import DEFAULT_MIN_INTERVAL_SECONDS, LiveFacts
from gpupolicy.webhook.logs import LOGGER, configure_logging, flush_logs, log
from gpupolicy.webhook.owners import OwnerMetadata
from gpupolicy.webhook.policy_reload import ReloadingPolicy
from gpupolicy.webhook.read_deadline import DEFAULT_READ_TIMEOUT, ReadDeadlineProtocol
from gpupolicy.webhook.recording import Provenance
from gpupolicy.webhook.review import Decision, ReviewEngine, review
from gpupolicy.webhook.settings import Mode
from gpupolicy.webhook.signals import SignalPipe
from gpupolicy.webhook.tls import ReloadingCertificate

_log = logging.getLogger(LOGGER)


def open_provenance(db: str | None, data_dir: Path, *, timeout: float = 2.0) -> Provenance:
    """Provenance written by the request itself (`--provenance-writes direct`)."""
    from gpupolicy.provenance import NotRecordable, build_record, open_store, router

    data_dir.mkdir(parents=True, exist_ok=True)
    # No --db: SQLite (WAL) at <data-dir>/provenance.db, beside the spool.
    store = open_store(db, spool_dir=data_dir / "spool", connect_timeout=timeout, write_timeout=timeout)
    return Provenance(
        store=store, build_record=build_record, not_recordable=NotRecordable, router=router(store)
    )


# GET /provenance waits this long at most for the replayer to store what was admitted before it.
READ_AFTER_WRITE_SECONDS = 2.0


def open_journaled_provenance(
    db: str | None,
    data_dir: Path,
    *,
    timeout: float = 2.0,
    max_bytes: int = 256 * 1024 * 1024,
    log_level: str = "info",
) -> Provenance:
    """Provenance through the admission journal (the default): the route appends, the replayer's
    process builds and stores the records (provenance_replayer.py). The store opened here only
    reads (GET /provenance, the reconciler, /readyz)."""
    from gpupolicy.provenance import NotRecordable, build_record, router
    from gpupolicy.provenance.engines import default_url
    from gpupolicy.provenance.journal.appender import JournalAppender, JournalUnavailable
    from gpupolicy.provenance.store import open_reader
    from gpupolicy.webhook.provenance_replayer import ReplayerProcess, ReplayerSettings

    data_dir.mkdir(parents=True, exist_ok=True)
    store = open_reader(db or default_url(data_dir))
    journal_dir, spool_dir = data_dir / "journal", data_dir / "spool"
    try:
        journal = JournalAppender(journal_dir, max_bytes=max_bytes).open()
    except JournalUnavailable as exc:
        store.close()
        raise UnusableSettings(f"{exc} (one webhook per --data-dir)") from exc
    replayer = ReplayerProcess(ReplayerSettings(journal_dir, spool_dir, db, timeout, log_level)).start()
    return Provenance(
        store=store,
        build_record=build_record,
        not_recordable=NotRecordable,
        router=router(store, before_read=lambda: journal.wait_replayed(READ_AFTER_WRITE_SECONDS)),
        journal=journal,
        replayer=replayer,
    )


# How often admitted records are checked against the live objects, and how long an admitted
# object may take to appear before its record is marked never-persisted (a later admission
# step, such as another webhook, rejected it).
RECONCILE_INTERVAL_SECONDS = 30.0


def start_reconciler(provenance: Provenance | None, inventory: ClusterInventory) -> threading.Event | None:
    """Confirm provenance records against the cluster, when there is a store and a cluster client."""
    api_client = inventory.api_client
    if provenance is None or api_client is None:
        return None
    from gpupolicy.provenance.reconciler import Reconciler, kubernetes_lookup
    from gpupolicy.provenance.store import ProvenanceStore

    if not isinstance(provenance.store, ProvenanceStore):
        return None  # a store without records to confirm (tests' fakes)
    try:
        lookup = kubernetes_lookup(api_client)  # API discovery: needs a reachable server
    except Exception as exc:  # the webhook serves without it; records stay `admitted`
        log(_log, logging.WARNING, "provenance reconciler not started", reason=str(exc)[:300])
        return None
    return Reconciler(provenance.store).start(lookup, interval=RECONCILE_INTERVAL_SECONDS)


def warm_up(engine: ReviewEngine, inventory: ClusterInventory) -> Decision:
    """Review one GPU Deployment before serving, so that the first admission does not pay for
    lazy imports and first-use compilation of the rules (and, on a policy reload, so that a
    policy under which rules fail is refused before it decides anything)."""
    obj = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "gpupolicy-warm-up", "namespace": "default"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "warm-up"}},
            "template": {
                "metadata": {"labels": {"app": "warm-up"}},
                "spec": {
                    "containers": [
                        {
                            "name": "main",
                            "image": "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04",
                            "resources": {"limits": {"nvidia.com/gpu": "1"}},
                        }
                    ]
                },
            },
        },
    }
    request = {
        "uid": "warm-up",
        "operation": "CREATE",
        "kind": {"kind": "Deployment"},
        "object": obj,
        "dryRun": True,
    }
    return review(
        {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request},
        engine,
        inventory,
    )


class _Companion(uvicorn.Server):
    """A server that runs beside the admission server in its event loop: it leaves the signals
    to the admission server, which stops it when it stops."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


# After SIGTERM, requests in flight have `--drain-seconds` to finish (uvicorn's graceful
# shutdown: the listener is closed at once, open requests are answered, then the process
# exits); this much more is left for the rest of the shutdown. Past both, the process ends
# itself whatever it is doing: with the defaults 5 + 5 s, well inside the pod's
# terminationGracePeriodSeconds (30), after which the kubelet's SIGKILL would end it silently.
# https://kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle/#pod-termination
SHUTDOWN_MARGIN_SECONDS = 5.0
DEFAULT_DRAIN_SECONDS = 5  # whole seconds: uvicorn's timeout_graceful_shutdown


class WebhookServer(uvicorn.Server):
    """The admission server; `companions` (servers with the socket each listens on) start
    before it and stop after it.

    Signals differ from uvicorn's in two ways. The signal is not raised again once the server
    has stopped (uvicorn does, for whoever embeds it: here the process died of it, status -15,
    before `gpupolicy serve` closed the provenance store). And a deadline thread ends the
    process `drain + SHUTDOWN_MARGIN_SECONDS` after SIGTERM if it is still running: the
    handler runs in the main thread between two bytecodes even while a review holds the event
    loop, so the signal is never lost, but the shutdown itself waits for the loop."""

    def __init__(
        self, config: uvicorn.Config, *, companions: list[tuple[uvicorn.Server, socket.socket]]
    ) -> None:
        super().__init__(config)
        self.companions = companions
        self._signalled = SignalPipe()  # not an Event: see webhook/signals.py
        self.shutdown_deadline = float(config.timeout_graceful_shutdown or 0) + SHUTDOWN_MARGIN_SECONDS

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        threading.Thread(target=self._end_after_deadline, name="shutdown-deadline", daemon=True).start()
        tasks = [asyncio.create_task(server.serve(sockets=[sock])) for server, sock in self.companions]
        try:
            await super().serve(sockets)
        finally:
            for server, _sock in self.companions:
                server.should_exit = True
            await asyncio.gather(*tasks, return_exceptions=True)
            flush_logs()  # the last turn's lines: the process may end without logging's own flush

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield  # signals reach the main thread only (tests run servers in threads)
            return
        previous = {sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self._signalled.notify()  # nothing else here: it interrupts whatever the main thread was doing
        super().handle_exit(sig, frame)

    def _end_after_deadline(self) -> None:
        if not self._signalled.wait():
            return
        time.sleep(self.shutdown_deadline)
        # Still running (a daemon thread does not outlive a finished process): the event loop
        # never came back to shut the server down, or the clean-up after it hangs.
        log(
            _log,
            logging.ERROR,
            "shutdown deadline passed: exiting now",
            deadline_seconds=self.shutdown_deadline,
            requests_in_flight=len(self.server_state.tasks),
        )
        flush_logs()
        os._exit(1)


class UnusableSettings(Exception):
    """Settings the server cannot start with (a policy, a store, a port): the command that starts
    it says so on one line and exits 2. Defined here so that the server imports nothing of the CLI."""


def provenance_api_socket(args: argparse.Namespace) -> socket.socket | None:
    """The socket of `--provenance-api-port`, bound before anything else starts: a port in use
    is a usage error, not a server that runs without its API."""
    port = getattr(args, "provenance_api_port", None)
    if port is None or getattr(args, "no_provenance", False):
        return None
    host = getattr(args, "provenance_api_host", "127.0.0.1")
    try:
        return socket.create_server((host, port))
    except OSError as exc:
        raise UnusableSettings(f"cannot listen on --provenance-api-port {host}:{port}: {exc}") from exc


def provenance_api(
    sock: socket.socket | None, provenance: Provenance | None, base: uvicorn.Config
) -> list[tuple[uvicorn.Server, socket.socket]]:
    """The provenance API's server on `sock` (none without a socket or a store)."""
    if sock is None or provenance is None or provenance.router is None:
        return []
    config = uvicorn.Config(
        create_provenance_app(provenance.router),
        ssl_context_factory=base.ssl_context_factory,
        http=base.http,
        lifespan="off",
        log_config=None,
        access_log=False,
        timeout_graceful_shutdown=5,
        server_header=False,
    )
    return [(_Companion(config), sock)]


def build_server(args: argparse.Namespace) -> tuple[uvicorn.Server, Callable[[], None]]:
    """The server `gpupolicy serve` runs, and what to do once it has stopped. Raises
    `UnusableSettings` for a policy, a store or a port it cannot start with."""
    configure_logging(args.log_level)
    import gpupolicy.rules  # noqa: F401  (registers the built-in rules once, at start-up)

    mode = Mode.parse(args.mode) if args.mode else None
    engine = _review_engine(args, mode)
    api_socket = provenance_api_socket(args)
    inventory = _cluster_inventory(args)
    provenance = _provenance(args)
    certificate = ReloadingCertificate(args.tls_cert, args.tls_key) if args.tls_cert else None
    state = _webhook_state(args, engine, mode, inventory, provenance, certificate)
    warm_up(engine, inventory)
    # What was loaded at start-up (rules, policy, client models: ~90,000 objects) lives as long
    # as the process: keep it out of the cyclic collector, whose full passes over it took tens
    # of milliseconds each and showed up as the p99 latency.
    gc.collect()
    gc.freeze()
    fewer_collections()
    config = _uvicorn_config(args, create_app(state), certificate)
    companions = provenance_api(api_socket, provenance, config)
    inventory.start()
    stop_reconciler = start_reconciler(provenance, inventory)
    _log_start(args, state, companions)

    def cleanup() -> None:
        if stop_reconciler is not None:
            stop_reconciler.set()
        inventory.stop()
        if provenance is not None:
            provenance.close()
        log(_log, logging.INFO, "gpupolicy webhook stopped")

    return WebhookServer(config, companions=companions), cleanup


def _review_engine(args: argparse.Namespace, mode: Mode | None) -> ReviewEngine:
    """The policy, and the engine that reviews under it (its custom rules compiled here)."""
    from gpupolicy.policy.loading import load_policy
    from gpupolicy.policy.validation import PolicyError

    try:
        return ReviewEngine.from_policy(load_policy(extra=args.policy), mode=mode)
    except PolicyError as exc:
        raise UnusableSettings(str(exc)) from exc


def _cluster_inventory(args: argparse.Namespace) -> ClusterInventory:
    if args.no_cluster:
        return ClusterInventory(None, no_client_reason="the cluster inventory is switched off (--no-cluster)")
    return ClusterInventory.from_environment(kubeconfig=args.kubeconfig)


def _provenance(args: argparse.Namespace) -> Provenance | None:
    if args.no_provenance:
        return None
    timeout = getattr(args, "db_timeout", 2.0)
    try:
        if getattr(args, "provenance_writes", "journal") == "direct":
            return open_provenance(args.db, args.data_dir, timeout=timeout)
        return open_journaled_provenance(
            args.db,
            args.data_dir,
            timeout=timeout,
            max_bytes=getattr(args, "journal_max_mb", 256) * 1024 * 1024,
            log_level=args.log_level,
        )
    except (OSError, ValueError) as exc:  # an unwritable --data-dir, a URL of another database
        raise UnusableSettings(
            f"cannot open the provenance store: {exc} (see --db, --data-dir, --no-provenance)"
        ) from exc


def _webhook_state(
    args: argparse.Namespace,
    engine: ReviewEngine,
    mode: Mode | None,
    inventory: ClusterInventory,
    provenance: Provenance | None,
    certificate: ReloadingCertificate | None,
) -> WebhookState:
    """What the app serves with: the engine, and what replaces it when the policy files or the
    cluster's facts change (each new engine tried on a review before it is used)."""
    state = WebhookState(
        engine=engine,
        inventory=inventory,
        inventory_status=inventory,
        provenance=provenance,
        certificate=certificate,
        certificate_check_seconds=args.tls_check_seconds,
    )

    def trial(candidate: ReviewEngine) -> Decision:
        return warm_up(candidate, inventory)

    if args.policy:  # the shipped default alone never changes
        state.policy_reload = ReloadingPolicy(args.policy, engine, mode=mode, trial=trial)
        state.policy_check_seconds = getattr(args, "policy_check_seconds", 10.0)
    if inventory.api_client is not None:  # what controllers make inherits what their owners declare
        state.owners = OwnerMetadata(inventory.api_client)
    if inventory.api_client is not None and not getattr(args, "no_cluster_facts", False):
        state.live_facts = LiveFacts(
            inventory,
            engine,
            mode=mode,
            trial=trial,
            min_interval=getattr(args, "cluster_facts_seconds", DEFAULT_MIN_INTERVAL_SECONDS),
        )
    state.review_in_threadpool = bool(getattr(args, "review_in_threadpool", False))
    state.freeze_gc = True
    return state


def _uvicorn_config(
    args: argparse.Namespace, app: FastAPI, certificate: ReloadingCertificate | None
) -> uvicorn.Config:
    return uvicorn.Config(
        app,
        host=args.host,
        port=args.port,
        ssl_context_factory=(lambda _config, _default: certificate.context) if certificate else None,
        http=ReadDeadlineProtocol.with_timeout(getattr(args, "read_timeout", DEFAULT_READ_TIMEOUT)),
        log_config=None,
        access_log=False,
        timeout_graceful_shutdown=getattr(args, "drain_seconds", DEFAULT_DRAIN_SECONDS),
        server_header=False,
    )


def _log_start(
    args: argparse.Namespace, state: WebhookState, companions: list[tuple[uvicorn.Server, socket.socket]]
) -> None:
    policy = state.engine.policy
    log(
        _log,
        logging.INFO,
        "gpupolicy webhook starting",
        host=args.host,
        port=args.port,
        tls=state.certificate is not None,
        mode=state.engine.settings.default_mode.value,
        policy_version=policy.version,
        policy_digest=f"sha256:{policy.digest}",
        provenance=state.provenance is not None,
        provenance_api="{}:{}".format(*companions[0][1].getsockname()[:2]) if companions else None,
        cluster_facts=state.live_facts is not None,
    )

"""The HTTP shell around `review()`: FastAPI routes, nothing that decides.

`POST /validate` takes JSON only (HTTP 415 for another Content-Type), reads the body (HTTP 413
past the policy's limit), parses JSON (HTTP 400 when it is not JSON or not an AdmissionReview),
calls `review()`, records provenance for admitted GPU workloads before answering (what is recorded,
and from what, is decided beside `review()`: records.py), and sends the response. Recording
means, with the admission journal (the default), that the body and its decision are on disk in
the journal (the replayer's process makes the record later), else that the store holds it. `/healthz` says the process serves,
`/readyz` whether the policy is loaded, every inventory cache has synced and the cluster facts
have been learned from them once (with the detail of each, whether the policy files on disk are
the policy in use: policy_reload.py, and what was learned: live_facts.py), `/metrics` is
Prometheus' text format.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from fastapi import FastAPI, Request, Response
from fastapi.concurrency import run_in_threadpool
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.requests import ClientDisconnect
from starlette.types import Receive, Scope, Send

from gpupolicy.core.findings import Severity
from gpupolicy.kube.inventory import Inventory
from gpupolicy.kube.pod_spec import as_mapping
from gpupolicy.webhook.live_facts import LiveFacts
from gpupolicy.webhook.logs import (
    LOGGER,
    MAX_LOGGED_FINDINGS,
    excerpt,
    finding_entry,
    log,
    recurring_excerpt,
)
from gpupolicy.webhook.metrics import WebhookMetrics
from gpupolicy.webhook.owners import MAX_DEPTH, Inherited, NotRemembered, OwnerMetadata, wants_owner
from gpupolicy.webhook.policy_reload import ReloadingPolicy
from gpupolicy.webhook.recording import Provenance
from gpupolicy.webhook.records import should_record
from gpupolicy.webhook.review import Decision, MalformedReview, ReviewEngine, review
from gpupolicy.webhook.tls import ReloadingCertificate

_log = logging.getLogger(LOGGER)
JSON = "application/json"
# How long an admission waits for its owners to be read (owners.py): the API server waits 3 s by
# default for the whole answer.
OWNER_WAIT_SECONDS = 1.5

try:  # orjson parses a 10 KB review about twice as fast; the stdlib is the fallback
    import orjson

    _loads: Callable[[bytes], Any] = orjson.loads

    def _dumps(value: Any) -> bytes:
        return orjson.dumps(value)

except ImportError:  # pragma: no cover - depends on the install
    _loads = json.loads

    def _dumps(value: Any) -> bytes:
        return json.dumps(value, ensure_ascii=False).encode()


class InventoryStatus(Protocol):
    """What /readyz and /metrics read of a cluster inventory (`ClusterInventory` has it)."""

    def synced(self) -> bool: ...

    def status(self) -> dict[str, dict[str, Any]]: ...


@dataclass(slots=True)
class WebhookState:
    engine: ReviewEngine
    inventory: Inventory | None = None
    inventory_status: InventoryStatus | None = None
    provenance: Provenance | None = None
    certificate: ReloadingCertificate | None = None
    certificate_check_seconds: float = 10.0
    # The policy files, watched: `engine` is replaced when they change and the new policy is good.
    policy_reload: ReloadingPolicy | None = None
    policy_check_seconds: float = 10.0
    # The cluster facts learned from the inventory: `engine` is replaced when they change.
    live_facts: LiveFacts | None = None
    facts_check_seconds: float = 1.0  # how often the caches' generations are compared (cheap)
    review_in_threadpool: bool = False
    # Reads the controllers of what controllers make, for what they declare (owners.py); None: off.
    owners: OwnerMetadata | None = None
    owner_reads: dict[str, asyncio.Future[Any]] = field(default_factory=dict)  # in flight, by owner
    freeze_gc: bool = False  # the server sets it; tests in one process leave the collector alone
    metrics: WebhookMetrics = field(init=False)

    def __post_init__(self) -> None:
        status = self.inventory_status
        self.metrics = WebhookMetrics(
            inventory_synced=(lambda: {kind: item["synced"] for kind, item in status.status().items()})
            if status is not None
            else None,
            cluster_facts=self._fact_counts,
            provenance_health=self._journal_health,
        )

    def _journal_health(self) -> dict[str, Any] | None:
        return self.provenance.journal_health() if self.provenance is not None else None

    def _fact_counts(self) -> dict[str, int] | None:
        live = self.live_facts  # read at scrape time: the server sets it after construction
        if live is None:
            return None
        detail = live.status()
        counts = {
            "nodePools": detail["nodePools"],
            "nodes": detail["nodes"],
            "gpuNodes": detail["gpuNodes"],
            "nodeLabels": detail["nodeLabels"],
        }
        if detail["gpuTaints"] is not None:
            counts["gpuTaints"] = detail["gpuTaints"]
        return counts


def _error(status: int, message: str) -> Response:
    return Response(json.dumps({"error": message}), status_code=status, media_type=JSON)


_NO_DOCS: dict[str, Any] = {"docs_url": None, "redoc_url": None, "openapi_url": None}  # nothing but the API


Endpoint = Callable[[Request], Awaitable[Response]]


class WebhookApplication(FastAPI):
    """FastAPI's application, with the plain routes of one exact path (`add_route`: `/validate`,
    `/healthz` ...) called straight from `__call__`: the request made, the endpoint awaited and
    its response sent, as Starlette's route does, without the middleware stack and the router's
    walk of every route in between. That stack does nothing for these routes: its error
    middleware answers an exception 500 `Internal Server Error` as uvicorn does when nothing
    answered, its exception middleware handles `HTTPException`s, which they never raise. What
    it cost a request, about 15 µs, is a tenth of the event loop's work on a realistic
    `/validate` (docs/performance.md, "A plain ASGI path for the webhook's routes").

    Everything else takes FastAPI's way: the lifespan, another method on the same path (405),
    an unknown path (404), a path under a `root_path`, and every request while middleware is
    added or FastAPI's native telemetry is on (an OpenTelemetry provider configured), so that
    each request is still traced and counted."""

    telemetry_check_seconds = 1.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._plain_routes: dict[tuple[str, str], Endpoint] = {}
        self._telemetry_enabled = False
        self._telemetry_checked_until = float("-inf")

    def add_route(
        self,
        path: str,
        route: Callable[[Request], Awaitable[Response] | Response],
        methods: list[str] | None = None,
        name: str | None = None,
        include_in_schema: bool = True,
    ) -> None:
        super().add_route(path, route, methods=methods, name=name, include_in_schema=include_in_schema)
        if methods and "{" not in path and asyncio.iscoroutinefunction(route):
            for method in methods:  # the first route of a path answers it, as the router's walk finds
                self._plain_routes.setdefault((method.upper(), path), route)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not scope.get("root_path"):
            endpoint = self._plain_routes.get((scope["method"], scope["path"]))
            if endpoint is not None and not self.user_middleware and not self._telemetry_on():
                scope["app"] = self
                response = await endpoint(Request(scope, receive, send))
                await response(scope, receive, send)
                return
        await super().__call__(scope, receive, send)

    def _telemetry_on(self) -> bool:
        """Whether FastAPI's native telemetry is on, asked at most once a second: FastAPI asks
        OpenTelemetry for its three global providers at every request, each a look in
        `os.environ` that raises and catches a `KeyError` (13.5 µs in all on this machine). A
        provider set while serving is seen within the second; one set before, at once."""
        now = time.monotonic()
        if now >= self._telemetry_checked_until:
            telemetry = getattr(self, "_native_telemetry", None)  # FastAPI's own OpenTelemetry
            self._telemetry_enabled = telemetry is not None and bool(telemetry.enabled())
            self._telemetry_checked_until = now + self.telemetry_check_seconds
        return self._telemetry_enabled


def create_app(state: WebhookState) -> FastAPI:
    app = WebhookApplication(title="gpupolicy admission webhook", lifespan=_lifespan(state), **_NO_DOCS)
    app.state.webhook = state

    # Plain Starlette routes: the endpoints take the request as it is and answer bytes, so FastAPI's
    # per-request work for an APIRoute (dependency solving, query and body parameter handling)
    # would buy nothing. It was 22 µs of a request, half of what a no-op endpoint costs in process
    # (the app called over ASGI: docs/performance.md, "The webhook's application in process").
    async def validate(request: Request) -> Response:
        return await _validate(state, request)

    async def healthz(request: Request) -> Response:
        return Response(json.dumps({"status": "ok"}), media_type=JSON)

    async def readyz(request: Request) -> Response:
        ready, detail = readiness(state)
        if state.provenance is not None:  # reported, not required: an outage spools records durably
            provenance = await run_in_threadpool(state.provenance.health)
            if provenance is not None:
                detail["provenance"] = provenance
        return Response(json.dumps(detail), status_code=200 if ready else 503, media_type=JSON)

    async def prometheus(request: Request) -> Response:
        return Response(generate_latest(state.metrics.registry), media_type=CONTENT_TYPE_LATEST)

    app.add_route("/validate", validate, methods=["POST"])
    app.add_route("/healthz", healthz, methods=["GET"])
    app.add_route("/readyz", readyz, methods=["GET"])
    app.add_route("/metrics", prometheus, methods=["GET"])
    # GET /provenance is not served here: see create_provenance_app.
    return app


def _lifespan(state: WebhookState) -> Callable[[FastAPI], contextlib.AbstractAsyncContextManager[None]]:
    """The app's background tasks (those `state` asks for), started with it and cancelled at its end."""

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        tasks = [asyncio.create_task(_freeze_when_settled(state))] if state.freeze_gc else []
        if state.certificate:
            tasks.append(asyncio.create_task(_watch_certificate(state)))
        if state.policy_reload:
            tasks.append(asyncio.create_task(_watch_policy(state)))
        if state.live_facts:
            tasks.append(asyncio.create_task(_watch_facts(state)))
        try:
            yield
        finally:
            for task in tasks:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    return lifespan


async def _validate(state: WebhookState, request: Request) -> Response:
    """POST /validate: the HTTP request to `review()` and its decision back, recorded first when
    `should_record` says so."""
    started = time.perf_counter()
    engine = state.engine  # read once: the request is decided and recorded under one policy
    received = await _admission_body(state, request, engine.settings.max_body_bytes)
    if isinstance(received, Response):
        return received
    body, parsed = received
    decision = await _review(state, parsed, engine)
    if state.owners is not None and isinstance(decision, Decision) and _has_errors(decision):
        # Its errors may be what its controllers' metadata suppresses, or its class changes: read
        # them (owners.py) only for an object they could let in, and decide again with them.
        inherited = await _inherited(state, state.owners, parsed)
        if inherited is not None:
            decision = await _review(state, parsed, engine, inherited)
    if isinstance(decision, Response):
        return decision
    provenance = None
    if state.provenance is not None and should_record(decision):
        provenance = await state.provenance.record(
            decision, engine, state.inventory, body, in_threadpool=state.review_in_threadpool
        )
    payload = _dumps(decision.response)
    _account(state, decision, time.perf_counter() - started, provenance)
    return Response(payload, media_type=JSON)


_NOT_PARSED = ("none", "unknown", "")  # the metric labels of a request never reviewed


async def _admission_body(state: WebhookState, request: Request, limit: int) -> Response | tuple[bytes, Any]:
    """The body and its parsed JSON, or the error response: 415 when it is not JSON, 413 past
    `limit`, 408 when the client left while sending it, 400 when it does not parse."""
    content_type, declared = _content_headers(request.scope["headers"])
    if not _is_json(content_type):
        state.metrics.requests.labels("unsupported-media-type", *_NOT_PARSED).inc()
        log(_log, logging.WARNING, "admission request is not JSON", content_type=excerpt(content_type))
        return _error(415, f"the AdmissionReview must be sent as {JSON}")
    try:
        body = await _read_body(request, limit, declared)
    except ClientDisconnect:  # gone, or cut off by the read deadline: nobody to answer
        log(_log, logging.INFO, "admission request abandoned by the client while sending it")
        return _error(408, "the AdmissionReview was not received")
    if body is None:
        state.metrics.requests.labels("too-large", *_NOT_PARSED).inc()
        log(_log, logging.WARNING, "admission request body too large", limit=limit)
        return _error(413, f"the AdmissionReview is larger than the limit of {limit} bytes")
    try:
        return body, _loads(body)
    except (ValueError, RecursionError) as exc:
        return _invalid(state, f"the body is not JSON: {exc}")


def _has_errors(decision: Decision) -> bool:
    return any(finding.severity is Severity.ERROR for finding in decision.findings)


def _read_done(reads: dict[str, asyncio.Future[Any]], key: str, _read: asyncio.Future[Any]) -> None:
    reads.pop(key, None)


async def _inherited(state: WebhookState, owners: OwnerMetadata, parsed: Any) -> Inherited | None:
    """What the admitted object inherits from its controllers, when a Kubernetes controller made
    it: from what is remembered, else read in a thread within OWNER_WAIT_SECONDS (past it,
    nothing). One read per owner at a time: a DaemonSet's Pods, admitted together on every node,
    wait for the same read rather than each asking the API server."""
    request = as_mapping(parsed.get("request")) if isinstance(parsed, dict) else {}
    obj = request.get("object")
    if not isinstance(obj, dict) or not wants_owner(obj):
        return None
    namespace = as_mapping(obj.get("metadata")).get("namespace") or request.get("namespace")
    if not isinstance(namespace, str) or not namespace:
        return None
    deadline = time.monotonic() + OWNER_WAIT_SECONDS
    for _ in range(MAX_DEPTH + 1):  # each pass reads the next owner up the chain that is not remembered
        try:
            return owners.inherited(obj, namespace, read=False)
        except NotRemembered as missing:
            key = str(missing)
        read = state.owner_reads.get(key)
        if read is None:
            read = state.owner_reads[key] = asyncio.ensure_future(
                run_in_threadpool(owners.inherited, obj, namespace)
            )
            read.add_done_callback(functools.partial(_read_done, state.owner_reads, key))
        try:
            await asyncio.wait_for(asyncio.shield(read), max(deadline - time.monotonic(), 0.0))
        except TimeoutError:
            log(
                _log,
                logging.WARNING,
                "the owners were not read in time: nothing inherited",
                owner=excerpt(key),
            )
            return None
    return None


async def _review(
    state: WebhookState, parsed: Any, engine: ReviewEngine, inherited: Inherited | None = None
) -> Decision | Response:
    """`review()` of the parsed body, or the error response: 400 for a body that is not an
    AdmissionReview, 500 for a bug (the API server then applies the failurePolicy)."""
    options = {"inherited": inherited} if inherited is not None else {}
    try:
        if state.review_in_threadpool:
            return await run_in_threadpool(review, parsed, engine, state.inventory, **options)
        return review(parsed, engine, state.inventory, **options)
    except MalformedReview as exc:
        return _invalid(state, str(exc), parsed)
    except Exception:  # a bug must answer (the API server applies failurePolicy), not kill the worker
        uid = excerpt(_uid_of(parsed))
        _log.exception("review failed", extra={"fields": {"uid": uid}})
        state.metrics.requests.labels("error", *_NOT_PARSED).inc()
        return _error(500, f"gpupolicy could not review request {uid}: internal error (see the webhook log)")


def create_provenance_app(router: Any) -> FastAPI:
    """`GET /provenance` on a port of its own (`--provenance-api-port`, off by default). Every
    admitted record can be read there, and the admission port is open to anyone who can reach
    the Service; this one listens on 127.0.0.1 unless told otherwise (reach it with
    `kubectl port-forward`, which needs RBAC on pods/portforward)."""
    app = FastAPI(title="gpupolicy provenance", **_NO_DOCS)
    app.include_router(router)
    return app


def _content_headers(headers: list[tuple[bytes, bytes]]) -> tuple[str | None, str | None]:
    """The request's Content-Type and Content-Length, the first of each, read in one pass over
    the ASGI headers (as `request.headers.get` reads them, which builds a `Headers` and walks
    the list once per name). uvicorn gives the names in lower case."""
    content_type = declared = None
    for name, value in headers:
        if name == b"content-type":
            if content_type is None:
                content_type = value.decode("latin-1")
        elif name == b"content-length" and declared is None:
            declared = value.decode("latin-1")
    return content_type, declared


async def _read_body(request: Request, limit: int, declared: str | None) -> bytes | None:
    """The body, or None once it passes `limit` (`declared`, its Content-Length, or the bytes
    received: chunked bodies are counted). The ASGI messages are read here, as
    `request.stream()` reads them, without an async generator between: a client gone before
    the end is `ClientDisconnect`."""
    if declared is not None and declared.isascii() and declared.isdigit() and int(declared) > limit:
        return None
    receive = request.receive
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        kind = message["type"]
        if kind == "http.request":
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)
        elif kind == "http.disconnect":
            raise ClientDisconnect()


def _is_json(content_type: str | None) -> bool:
    """`application/json`, with or without parameters (`; charset=utf-8`): what the API server
    sends (https://kubernetes.io/docs/reference/access-authn-authz/extensible-admission-controllers/#request)."""
    if content_type is None:
        return False
    return content_type.partition(";")[0].strip().lower() == JSON


def _uid_of(parsed: Any) -> str | None:
    request = parsed.get("request") if isinstance(parsed, dict) else None
    uid = request.get("uid") if isinstance(request, dict) else None
    return uid if isinstance(uid, str) else None


def _invalid(state: WebhookState, message: str, parsed: Any = None) -> Response:
    state.metrics.requests.labels("invalid", *_NOT_PARSED).inc()
    log(
        _log,
        logging.WARNING,
        "malformed admission request",
        uid=excerpt(_uid_of(parsed)),
        error=excerpt(message),
    )
    return _error(400, message)


def _account(state: WebhookState, decision: Decision, elapsed: float, provenance: str | None) -> None:
    metrics = state.metrics
    mode = decision.mode.value if decision.mode is not None else "none"
    dry_run = "true" if decision.dry_run else "false"
    metrics.count_request(decision.decision, mode, dry_run, decision.kind)
    metrics.duration.observe(elapsed)
    if decision.mode is not None:
        metrics.count_decision_cache(remembered=decision.remembered)
    metrics.count_findings(decision.findings)
    if decision.report is not None:
        for error in decision.report.errors:
            metrics.rule_errors.labels(error.rule_id, decision.decision).inc()
    if provenance is not None:
        metrics.provenance_writes.labels(provenance).inc()
    if not _log.isEnabledFor(logging.INFO):
        return  # the log line's fields cost more than the review's bookkeeping: build them only when logged
    report = decision.report
    suppressed = report.suppressed if report is not None else []
    errors = report.errors if report is not None else []
    # Every value that comes from the request is an excerpt, and the lists are capped: one line
    # stays a few kilobytes whatever the object holds (the counts say what was left out).
    log(
        _log,
        logging.INFO,
        "admission reviewed",
        uid=excerpt(decision.uid),
        operation=excerpt(decision.operation),
        kind=excerpt(decision.kind),
        namespace=excerpt(decision.namespace),
        name=excerpt(decision.name),
        dry_run=decision.dry_run,
        decision=decision.decision,
        mode=mode,
        skipped=decision.skipped,
        remembered=decision.remembered,
        duration_ms=round(elapsed * 1000, 3),
        provenance=provenance,
        findings_total=len(decision.findings),
        findings=[finding_entry(finding) for finding in decision.findings[:MAX_LOGGED_FINDINGS]],
        suppressed_total=len(suppressed),
        suppressed=[
            {"rule": finding.rule_id, "reason": recurring_excerpt(reason)}
            for finding, reason in suppressed[:MAX_LOGGED_FINDINGS]
        ],
        internal_errors_total=len(errors),
        internal_errors=[
            excerpt(f"{error.rule_id}: {error.message}") for error in errors[:MAX_LOGGED_FINDINGS]
        ],
    )


def readiness(state: WebhookState) -> tuple[bool, dict[str, Any]]:
    policy = state.engine.policy
    detail: dict[str, Any] = {
        "policy": {"loaded": True, "version": policy.version, "digest": f"sha256:{policy.digest}"},
    }
    if state.policy_reload is not None:  # reported, not required: the last good policy decides
        detail["policy"]["reload"] = state.policy_reload.status()
    ready = True
    if state.inventory_status is not None:
        kinds = state.inventory_status.status()
        synced = state.inventory_status.synced()
        detail["inventory"] = {"synced": synced, "kinds": kinds}
        ready = ready and synced
    else:
        detail["inventory"] = {"synced": False, "reason": "no cluster inventory (switched off)"}
        ready = False
    if state.live_facts is not None:
        # Not ready before the facts were learned once from synced caches: a fresh replica would
        # otherwise answer "unknown" where the others judge. Later changes lag, never block.
        detail["clusterFacts"] = state.live_facts.status()
        ready = ready and state.live_facts.settled and state.engine is state.live_facts.engine
    else:
        detail["clusterFacts"] = {
            "source": "none",
            "reason": "not learned from the cluster (no cluster client, or switched off)",
        }
    detail["ready"] = ready
    return ready, detail


async def _freeze_when_settled(state: WebhookState, *, wait_seconds: float = 30.0) -> None:
    """Move what start-up left behind (the server, and the client models the inventory's first
    lists import: ~100,000 objects) out of the cyclic collector once the caches have synced.
    Left in, every full collection walked them: 30-40 ms pauses that were the p99 latency."""
    status = state.inventory_status
    deadline = time.monotonic() + wait_seconds
    while status is not None and not status.synced() and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    gc.collect()
    gc.freeze()
    log(_log, logging.INFO, "start-up objects frozen", frozen=gc.get_freeze_count())


async def _watch_policy(state: WebhookState) -> None:
    reload = state.policy_reload
    assert reload is not None
    state.metrics.policy_reload_failing.set(0)
    while True:
        await asyncio.sleep(state.policy_check_seconds)
        try:
            outcome = await asyncio.to_thread(_check_policy, reload, state.freeze_gc)
        except Exception:
            _log.exception("policy reload check failed")
            continue
        if outcome == "reloaded":
            live = state.live_facts
            if live is not None:  # the new policy over the facts, learned again under it
                await asyncio.to_thread(live.reconfigure, reload.engine)
                state.engine = live.engine  # the latest, whichever of the two tasks made it
            else:
                state.engine = reload.engine  # in the loop thread, between two requests
        if outcome is not None:
            state.metrics.policy_reloads.labels(outcome).inc()
            state.metrics.policy_reload_failing.set(1 if reload.refusal is not None else 0)


def _check_policy(reload: ReloadingPolicy, frozen: bool) -> str | None:
    outcome = reload.check()
    if outcome == "reloaded" and frozen:
        _collect_replaced()
    return outcome


def _collect_replaced() -> None:
    # The replaced policy's objects were frozen with the rest of start-up: thaw, collect them
    # (one full collection, ~30 ms, once per reload or change of facts), and freeze the rest again.
    gc.unfreeze()
    gc.collect()
    gc.freeze()


async def _watch_facts(state: WebhookState) -> None:
    live = state.live_facts
    assert live is not None
    while True:
        try:
            outcome = await asyncio.to_thread(_check_facts, live, state.freeze_gc)
        except Exception:
            _log.exception("cluster facts check failed")
            outcome = None
        if outcome == "updated":
            state.engine = live.engine  # in the loop thread, between two requests
        if outcome is not None:
            state.metrics.cluster_facts_recomputes.labels(outcome).inc()
        await asyncio.sleep(state.facts_check_seconds)


def _check_facts(live: LiveFacts, frozen: bool) -> str | None:
    outcome = live.check()
    if outcome == "updated" and frozen:
        _collect_replaced()
    return outcome


async def _watch_certificate(state: WebhookState) -> None:
    certificate = state.certificate
    assert certificate is not None
    while True:
        await asyncio.sleep(state.certificate_check_seconds)
        try:
            certificate.reload_if_changed()  # in the loop thread: no handshake runs meanwhile
        except Exception:
            _log.exception("TLS reload check failed")
